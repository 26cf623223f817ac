/// What a claim takes, decided once for every store (issue 36): which kinds its read keeps, how much room each limited
/// kind has left, and which of the roots read it takes. A store reads, in the claim's transaction, the kinds paused,
/// the limits and how many roots of each limited kind are owned now; makes the plan; reads the candidates its
/// ``kinds`` filter keeps; and takes those ``choose(_:)`` returns. Nothing here reads or writes: `ClaimPlanTests` is
/// its table.
package struct ClaimPlan: Sendable, Hashable {
    /// The kinds a claim's read keeps. Closure tasks (no kind) are always kept.
    package enum KindFilter: Sendable, Hashable {
        /// Every kind.
        case all
        /// Only these kinds (sorted; empty: closure tasks only).
        case only([String])
        /// Every kind but these (sorted, never empty).
        case allBut([String])

        /// Whether a root of `kind` is kept.
        package func keeps(_ kind: String?) -> Bool {
            guard let kind else { return true }
            return switch self {
            case .all: true
            case .only(let kinds): kinds.contains(kind)
            case .allBut(let kinds): !kinds.contains(kind)
            }
        }
    }

    package var kinds: KindFilter
    /// The room left of each limited kind the claim may take: its limit less its owned unfinished roots (running, or
    /// claimed to start), never below 0.
    package var room: [String: Int]
    /// At most this many roots.
    package var limit: Int

    /// - Parameters:
    ///   - paused: the kinds paused across the fleet.
    ///   - limits: the limit of each kind that has one.
    ///   - owned: how many unfinished roots of each kind an owner holds, running or pending (kinds without a limit may
    ///     be left out).
    package init(_ claim: RootClaim, paused: Set<String>, limits: [String: Int], owned: [String: Int]) {
        var room: [String: Int] = [:]
        for (kind, limit) in limits where claim.kinds?.contains(kind) ?? true {
            room[kind] = max(0, limit - (owned[kind] ?? 0))
        }
        self.room = room
        limit = max(0, claim.limit)
        if let wanted = claim.kinds {
            kinds = .only(wanted.subtracting(paused).filter { room[$0] != 0 }.sorted())
        } else {
            let blocked = paused.union(room.filter { $0.value == 0 }.keys).sorted()
            kinds = blocked.isEmpty ? .all : .allBut(blocked)
        }
    }

    /// The roots the claim takes of those read (`candidates`, in any order, an id possibly twice): by priority, then
    /// age, then id; at most ``limit``, and no more of a limited kind than its room.
    package func choose(_ candidates: [ClaimedRoot]) -> [ClaimedRoot] {
        var left = room
        var seen: Set<String> = []
        var chosen: [ClaimedRoot] = []
        for root in candidates.sorted(by: Self.precedes) where chosen.count < limit && kinds.keeps(root.kind) {
            guard seen.insert(root.id).inserted else { continue }
            if let kind = root.kind, let room = left[kind] {
                guard room > 0 else { continue }
                left[kind] = room - 1
            }
            chosen.append(root)
        }
        return chosen
    }

    /// The claim's order: higher priority first, then older, then by id (its UTF-8 bytes, as the SQL stores compare).
    package static func precedes(_ left: ClaimedRoot, _ right: ClaimedRoot) -> Bool {
        if left.priority != right.priority { return left.priority > right.priority }
        if left.createdAt != right.createdAt { return left.createdAt < right.createdAt }
        return left.id.utf8.lexicographicallyPrecedes(right.id.utf8)
    }
}
