import Foundation
import Progression

/// An executor (owner) as the console's overview shows it: who it is, whether it is alive, and what it runs.
/// `progressctl doctor --json` names the same fields.
package struct OwnerJSON: Encodable, Sendable, Equatable {
    package var id: String
    package var host: String
    package var pid: Int32
    package var startedAt: Date
    package var heartbeatAt: Date
    /// Seconds since its last heartbeat.
    package var heartbeatAgeSeconds: Double
    @Null package var stoppedAt: Date?
    package var liveness: String
    package var alive: Bool
    /// Roots it holds that are running, and paused.
    package var running: Int
    package var paused: Int
    /// The kinds of the roots it runs or holds paused, in order.
    package var kinds: [String]
    /// The kinds it registered (it runs jobs of those only); `null` when not recorded (an older worker).
    @Null package var registered: [String]?
    /// The versions of its kinds that declare one (`"3 (continues 2)"`), by kind: it runs a job of such a kind only
    /// when its version can continue the job's (``JobVersion``); `null` when not recorded (an older worker).
    @Null package var versions: [String: String]?

    /// Its registered kinds as the console shows them: each with its version, when it declares one.
    package var kindsWithVersions: [String] {
        (registered ?? kinds).map { kind in versions?[kind].map { "\(kind) \($0)" } ?? kind }
    }
}

extension OperatorStore {
    /// The most running and paused roots read to count per owner: more are counted as this many.
    package static let ownerReportLimit = 10_000

    /// Every recorded owner, live ones first (then by start), with the running and paused roots each holds.
    package func ownerReports(now: Date = Date()) async throws -> [OwnerJSON] {
        let owners = try await checked { try await $0.owners() }
        var running: [String: Int] = [:]
        var paused: [String: Int] = [:]
        var kinds: [String: Set<String>] = [:]
        var query = TaskQuery(statuses: [.running, .paused], limit: 1000)
        while query.offset < Self.ownerReportLimit {
            let page = try await checked { [query] in try await $0.roots(query) }
            for root in page {
                guard let owner = root.ownerID else { continue }
                if root.status == .running { running[owner, default: 0] += 1 } else { paused[owner, default: 0] += 1 }
                kinds[owner, default: []].insert(root.kind ?? "(closure)")
            }
            guard page.count == query.limit else { break }
            query.offset += page.count
        }
        return owners.map { owner in
            let liveness = owner.liveness(now: now)
            return OwnerJSON(
                id: owner.id, host: owner.host, pid: owner.pid, startedAt: owner.startedAt,
                heartbeatAt: owner.heartbeatAt,
                heartbeatAgeSeconds: max(0, (now.timeIntervalSince(owner.heartbeatAt) * 10).rounded() / 10),
                stoppedAt: owner.stoppedAt, liveness: liveness.description, alive: liveness.isAlive,
                running: running[owner.id] ?? 0, paused: paused[owner.id] ?? 0, kinds: (kinds[owner.id] ?? []).sorted(),
                registered: owner.kinds?.sorted(), versions: owner.versions?.mapValues(\.description))
        }.sorted { ($0.alive ? 0 : 1, $0.startedAt, $0.id) < ($1.alive ? 0 : 1, $1.startedAt, $1.id) }
    }

    /// The roots that completed or failed since `cursor` (or, without one, since `date`), as the history recorded
    /// them; `nil` for a store that cannot say (the in-memory one).
    package func rootOutcomes(after cursor: RootOutcomeCursor?, since date: Date) async throws -> RootOutcomePage? {
        try await checked { store in
            if let sqlite = store.sqlite { return try await sqlite.rootOutcomes(after: cursor, since: date) }
            return try await store.baseOutcomes(after: cursor, since: date)
        }
    }
}
