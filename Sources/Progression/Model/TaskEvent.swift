import Foundation

/// One entry in a task's history. Events are appended, never changed.
public struct TaskEvent: Sendable, Hashable, Codable {
    /// What happened.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// The root was submitted.
        case created
        /// An attempt of the task started (a subtask: it was pushed).
        case started
        /// The task reported a new step name.
        case step
        /// A sample of the task's progress (at most one per `progressSampleInterval`).
        case progress
        /// The task was paused (the tasks below it with it).
        case paused
        /// The task was resumed.
        case resumed
        /// The task stored a checkpoint.
        case checkpointed
        /// The task completed.
        case completed
        /// The task failed (or an attempt failed and another is due: see `nextAttemptAt`).
        case failed
        /// The task was cancelled (the tasks below it with it).
        case cancelled
        /// A new attempt began (a retry).
        case retried
        /// The process running the task stopped while it ran: it is pending again.
        case interrupted
        /// Another executor took the task over.
        case recovered
        /// The job's run-at time was set or cleared (run now).
        case scheduled
        /// The job gave its slot back until a time (a durable sleep): any worker continues it then.
        case sleeping
        /// The job gave its slot back to wait for its child jobs, for other jobs or for a signal: any worker continues
        /// it once that happened.
        case waiting
        /// A signal was sent to the job (its message names it).
        case signaled
    }

    /// The store's sequence number; `nil` before it is stored.
    public var sequence: Int64?
    /// The task it happened to.
    public var taskID: String
    /// The root of that task's tree.
    public var rootID: String
    /// What happened.
    public var kind: Kind
    /// When it happened.
    public var at: Date
    /// The task's attempt then.
    public var attempt: Int
    /// The task's progress then.
    public var progress: Double?
    /// A step name, an error description, or a note.
    public var message: String?
    /// The Swift type of the error of a failure.
    public var errorType: String?

    /// An event.
    public init(
        sequence: Int64? = nil, taskID: String, rootID: String, kind: Kind, at: Date, attempt: Int,
        progress: Double? = nil, message: String? = nil, errorType: String? = nil
    ) {
        self.sequence = sequence
        self.taskID = taskID
        self.rootID = rootID
        self.kind = kind
        self.at = at
        self.attempt = attempt
        self.progress = progress
        self.message = message
        self.errorType = errorType
    }
}
