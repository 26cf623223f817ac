import Foundation

/// An immutable picture of one task and its subtasks, as published on the progress stream.
public struct TaskSnapshot: Identifiable, Sendable, Hashable, Codable {
    /// The task's id.
    public var id: String
    /// The parent's id; `nil` for a root.
    public var parentID: String?
    /// The name given to `addTask`, `submit` or `push`.
    public var name: String
    /// The job kind; `nil` for closure tasks and subtasks.
    public var kind: String?
    /// The task's status as committed; `paused` also for an unfinished task below a paused one (its code waits too).
    public var status: TaskStatus
    /// 0...1, or `nil` when indeterminate; 1 only once completed.
    public var progress: Double?
    /// The current step's name.
    public var stepName: String?
    /// What may be done to the task.
    public var options: TaskOptions
    /// Which run of the task this is (1 for the first).
    public var attempt: Int
    /// How many times the process running the task died while it ran.
    public var interruptions: Int
    /// Why the task failed, for people.
    public var errorDescription: String?
    /// The Swift type of the error that failed the task.
    public var errorType: String?
    /// When the task was submitted or pushed.
    public var createdAt: Date
    /// When its latest run started.
    public var startedAt: Date?
    /// When it last changed.
    public var updatedAt: Date
    /// When it completed, failed or was cancelled.
    public var finishedAt: Date?
    /// When a failed task waiting for an automatic retry runs again.
    public var nextAttemptAt: Date?
    /// The work the task declared with `.total(_:)`, in its own units.
    public var total: Double?
    /// How fast its progress moves while it runs: a smoothed fraction of the whole task per second.
    public var rate: Double?
    /// Its subtasks, in the order they were first pushed.
    public var children: [TaskSnapshot]
    /// On a child job: the job that started it (see ``TaskRecord/parentJobID``).
    public var parentJobID: String? = nil
    /// On a node that stands for a child job (a link): that job's id (see ``TaskRecord/childJobID``). Its status,
    /// progress and result are the child's, as last read.
    public var childJobID: String? = nil

    /// Whether the task (or a task above it) is paused.
    public var isPaused: Bool { status == .paused }
    /// Whether the task completed.
    public var isCompleted: Bool { status == .completed }
    /// Whether the task failed.
    public var isFailed: Bool { status == .failed }
    /// Whether the task was cancelled.
    public var isCancelled: Bool { status == .cancelled }
    /// Whether the task's code runs.
    public var isRunning: Bool { status == .running }
    /// Whether the task completed, failed or was cancelled.
    public var isFinished: Bool { status.isFinished }
    /// The estimated time until the task completes, from its progress and rate: `nil` unless it runs and moves.
    public var estimatedTimeRemaining: Duration? {
        TaskProgressEstimate.remaining(progress: progress, rate: rate, status: status)
    }
    /// Units of its declared total done, when it declared one.
    public var completedUnits: Double? {
        guard let total, let progress else { return nil }
        return total * progress
    }

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

/// Every task the executor holds in memory, roots in the order they were added, and the health of its store.
public struct TaskGraph: Sendable, Hashable, Codable {
    /// The roots, each with its subtree.
    public var tasks: [TaskSnapshot]
    /// Whether the executor's writes reach its store; while they fail, tasks wait at their next transition.
    public var storage: StorageHealth

    /// A graph of `tasks`.
    public init(tasks: [TaskSnapshot] = [], storage: StorageHealth = .healthy) {
        self.tasks = tasks
        self.storage = storage
    }

    /// The task (root or subtask) with this id.
    public func task(_ id: String) -> TaskSnapshot? {
        for root in tasks {
            if let found = root.find(id) { return found }
        }
        return nil
    }
}

/// Whether an executor's writes reach its store.
public enum StorageHealth: Sendable, Hashable, Codable {
    /// Writes succeed.
    case healthy
    /// Writes have failed since `since` (a full disk, an I/O error, a lock held too long); the executor keeps what
    /// it has in memory, retries with backoff, and tasks wait at their next transition until a write succeeds.
    case failing(since: Date, error: String)

    /// Whether writes succeed.
    public var isHealthy: Bool { self == .healthy }
}
