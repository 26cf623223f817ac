import Foundation
import Progression
import ProgressionOperator

/// Which task trees `watch` follows, read again from the store whenever it changed.
///
/// With an id it follows that task. Without one it follows every pending, running or paused root, and every root
/// created since the watch began (so that one that starts and ends between two polls is seen too); a root stays
/// followed after it finished, up to ``finishedLimit`` of them, the most recently finished kept.
///
/// Trees are read whole only when `wholeTrees` is set (the dashboard needs them; change lines without `--all`
/// need only the roots), and a finished tree is read once: it is read again only when its root changes (a retry).
/// The task followed by id is read across the fleet (``JobTreeView``): below each of its links, the steps of the
/// child job it stands for, wherever that runs (the unfinished ones that ran, at most ``JobTreeView/expandLimit``).
struct TaskFollower {
    /// The task followed, or `nil` to follow every unfinished root.
    let taskID: String?
    /// Whether descendants are read too.
    let wholeTrees: Bool
    /// Roots created at or after this date are followed whatever their status.
    let since: Date
    /// How many finished roots stay followed.
    var finishedLimit = 200
    /// How many roots one query reads.
    var queryLimit = 1000

    /// The trees followed, by root id; each tree's nodes in tree order, the followed task first.
    private(set) var trees: [String: [TaskRecord]] = [:]
    private var lastChange: Int64?

    init(taskID: String?, wholeTrees: Bool, since: Date) {
        self.taskID = taskID
        self.wholeTrees = wholeTrees
        self.since = since
    }

    /// The trees followed, in no particular order.
    var followed: [[TaskRecord]] { Array(trees.values) }

    /// Whether any task is followed and every followed task (the roots) has finished.
    var allFinished: Bool {
        !trees.isEmpty && trees.values.allSatisfy { $0[0].status.isFinished }
    }

    /// Reads the store again when it changed since the last call; returns whether it did.
    ///
    /// - Throws: ``CLIError`` when the store fails, or when the task given by id was removed.
    mutating func refresh(from store: OperatorStore) async throws -> Bool {
        let change = try await store.checked { try await $0.changeCounter() }
        guard change != lastChange else { return false }
        lastChange = change
        if let taskID {
            let tree = try await read(taskID, from: store)
            guard !tree.isEmpty else { throw CLIError("task '\(taskID)' was removed") }
            trees = [taskID: tree]
            return true
        }
        let unfinished = try await store.checked {
            try await $0.roots(TaskQuery(statuses: [.pending, .running, .paused], limit: queryLimit))
        }
        let recent = try await store.checked {
            try await $0.roots(TaskQuery(createdSince: since, limit: queryLimit))
        }
        var current: [String: TaskRecord] = [:]
        for root in unfinished + recent { current[root.id] = root }
        // Roots followed but not listed now finished meanwhile (or were removed): read them once more.
        for (id, tree) in trees where current[id] == nil && !tree[0].status.isFinished {
            if let root = try await store.checked({ try await $0.task(id: id) }) { current[id] = root }
        }
        var next: [String: [TaskRecord]] = [:]
        for (id, tree) in trees where current[id] == nil && tree[0].status.isFinished {
            next[id] = tree
        }
        for (id, root) in current {
            if let known = trees[id], known[0] == root, root.status.isFinished {
                next[id] = known
            } else if !wholeTrees || (root.status == .pending && root.waitReason != .waiting) {
                // A pending root's descendants, if any, are left from an earlier attempt; a waiting one's are its
                // steps so far and the links of the child jobs it waits for.
                next[id] = [root]
            } else {
                let tree = try await read(id, from: store)
                if !tree.isEmpty { next[id] = tree }
            }
        }
        trees = Self.droppingOldFinished(next, keeping: finishedLimit)
        return true
    }

    private func read(_ id: String, from store: OperatorStore) async throws -> [TaskRecord] {
        if wholeTrees, id == taskID {
            return try await store.jobTreeView(of: id, relations: false)?.graftedNodes ?? []
        }
        if wholeTrees { return try await store.checked { try await $0.tree(of: id) } }
        return try await store.checked { try await $0.task(id: id) }.map { [$0] } ?? []
    }

    private static func droppingOldFinished(
        _ trees: [String: [TaskRecord]], keeping limit: Int
    ) -> [String: [TaskRecord]] {
        let finished = trees.values.map { $0[0] }.filter(\.status.isFinished)
        guard finished.count > limit else { return trees }
        let dropped = finished.sorted { ($0.finishedAt ?? $0.updatedAt) > ($1.finishedAt ?? $1.updatedAt) }
            .dropFirst(limit)
        var kept = trees
        for root in dropped { kept[root.id] = nil }
        return kept
    }
}
