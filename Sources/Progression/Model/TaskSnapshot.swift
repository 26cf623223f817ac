import Foundation

/// An immutable picture of one task and its subtasks, as published on the progress stream.
public struct TaskSnapshot: Identifiable, Sendable, Hashable, Codable {
    public var id: String
    public var parentID: String?
    public var name: String
    /// The job kind; `nil` for closure tasks and subtasks.
    public var kind: String?
    public var status: TaskStatus
    /// 0...1, or `nil` when indeterminate.
    public var progress: Double?
    public var stepName: String?
    public var options: TaskOptions
    public var attempt: Int
    public var interruptions: Int
    public var errorDescription: String?
    public var errorType: String?
    public var createdAt: Date
    public var startedAt: Date?
    public var updatedAt: Date
    public var finishedAt: Date?
    /// When a failed task waiting for an automatic retry runs again.
    public var nextAttemptAt: Date?
    public var children: [TaskSnapshot]

    public var isPaused: Bool { status == .paused }
    public var isCompleted: Bool { status == .completed }
    public var isFailed: Bool { status == .failed }
    public var isCancelled: Bool { status == .cancelled }
    public var isRunning: Bool { status == .running }
    public var isFinished: Bool { status.isFinished }

    /// This task or a task below it with the given id.
    public func find(_ id: String) -> TaskSnapshot? {
        if self.id == id { return self }
        for child in children {
            if let found = child.find(id) { return found }
        }
        return nil
    }

    /// This snapshot and every one below it, depth first.
    public var allNodes: [TaskSnapshot] {
        [self] + children.flatMap(\.allNodes)
    }
}

/// Every task the executor holds in memory, roots in the order they were added.
public struct TaskGraph: Sendable, Hashable, Codable {
    public var tasks: [TaskSnapshot]

    public init(tasks: [TaskSnapshot] = []) {
        self.tasks = tasks
    }

    /// The task (root or subtask) with this id.
    public func task(_ id: String) -> TaskSnapshot? {
        for root in tasks {
            if let found = root.find(id) { return found }
        }
        return nil
    }
}
