import Foundation

/// Snapshots: what the progress stream and `snapshot(of:)` show. Transitions appear once committed; progress is live.
/// Each node keeps its last snapshot and rebuilds it only when it or a node below it changed, so publishing a graph of
/// many quiet roots (queued jobs, say), or of a wide tree where two steps move, costs little.
extension GraphState {
    /// The graph as published; `nil` when nothing changed since the last call.
    mutating func snapshotIfChanged() -> TaskGraph? {
        guard version != publishedVersion else { return nil }
        publishedVersion = version
        return graph()
    }

    mutating func graph() -> TaskGraph {
        var tasks: [TaskSnapshot] = []
        tasks.reserveCapacity(roots.count)
        for root in roots where !root.hidden {
            tasks.append(Self.cached(root))
        }
        return TaskGraph(tasks: tasks, storage: storage)
    }

    func snapshot(of node: TaskNode) -> TaskSnapshot {
        var ancestorPaused = false
        var parent = node.parent
        while let current = parent {
            if current.committed.status == .paused { ancestorPaused = true }
            parent = current.parent
        }
        return Self.snapshot(node, ancestorPaused: ancestorPaused)
    }

    /// A root's snapshot, rebuilt where something changed.
    private static func cached(_ root: TaskNode) -> TaskSnapshot {
        if !root.snapshotIsStale, let cached = root.cachedSnapshot { return cached }
        let snapshot = rebuild(root, ancestorPaused: false)
        return snapshot
    }

    /// Rebuilds the stale part of a tree: nodes that did not change (and whose pause is as before) keep their snapshot.
    private static func rebuild(_ node: TaskNode, ancestorPaused: Bool) -> TaskSnapshot {
        if !node.snapshotIsStale, let cached = node.cachedSnapshot,
            (cached.status == .paused) == (ancestorPaused || node.committed.status == .paused) || cached.isFinished
        {
            return cached
        }
        let record = node.record
        let committed = node.committed
        var status = committed.status
        if ancestorPaused, !status.isFinished { status = .paused }
        let paused = ancestorPaused || committed.status == .paused
        let snapshot = TaskSnapshot(
            id: record.id, parentID: record.parentID, name: record.name, kind: record.kind, status: status,
            progress: record.progress, stepName: record.step, options: record.options, attempt: committed.attempt,
            interruptions: committed.interruptions, errorDescription: committed.errorDescription,
            errorType: committed.errorType, createdAt: record.createdAt, startedAt: committed.startedAt,
            updatedAt: record.updatedAt, finishedAt: committed.finishedAt, nextAttemptAt: committed.nextAttemptAt,
            total: record.total, rate: status == .running ? record.rate : nil,
            children: node.children.map { rebuild($0, ancestorPaused: paused) }, parentJobID: record.parentJobID,
            childJobID: record.childJobID)
        node.cachedSnapshot = snapshot
        node.snapshotIsStale = false
        return snapshot
    }

    private static func snapshot(_ node: TaskNode, ancestorPaused: Bool) -> TaskSnapshot {
        let record = node.record
        let committed = node.committed
        var status = committed.status
        if ancestorPaused, !status.isFinished { status = .paused }
        let paused = ancestorPaused || committed.status == .paused
        return TaskSnapshot(
            id: record.id, parentID: record.parentID, name: record.name, kind: record.kind, status: status,
            progress: record.progress, stepName: record.step, options: record.options, attempt: committed.attempt,
            interruptions: committed.interruptions, errorDescription: committed.errorDescription,
            errorType: committed.errorType, createdAt: record.createdAt, startedAt: committed.startedAt,
            updatedAt: record.updatedAt, finishedAt: committed.finishedAt, nextAttemptAt: committed.nextAttemptAt,
            total: record.total, rate: status == .running ? record.rate : nil,
            children: node.children.map { snapshot($0, ancestorPaused: paused) }, parentJobID: record.parentJobID,
            childJobID: record.childJobID)
    }
}
