import Foundation

/// Snapshots: what the progress stream and `snapshot(of:)` show. Transitions appear once committed; progress is live.
/// Each root keeps its last snapshot and rebuilds it only when something in its tree changed, so publishing a graph of
/// many quiet roots (queued jobs, say) costs little.
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
            if root.cachedVersion != root.version || root.cachedSnapshot == nil {
                root.cachedSnapshot = Self.snapshot(root, ancestorPaused: false)
                root.cachedVersion = root.version
            }
            if let snapshot = root.cachedSnapshot { tasks.append(snapshot) }
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
            children: node.children.map { snapshot($0, ancestorPaused: paused) })
    }
}
