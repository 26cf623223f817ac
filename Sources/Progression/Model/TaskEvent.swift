import Foundation

/// One entry in a task's history. Events are appended, never changed.
public struct TaskEvent: Sendable, Hashable, Codable {
    /// What happened.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        case created, started, step, progress, paused, resumed, checkpointed, completed, failed, cancelled, retried,
            interrupted, recovered
    }

    /// The store's sequence number; `nil` before it is stored.
    public var sequence: Int64?
    public var taskID: String
    public var rootID: String
    public var kind: Kind
    public var at: Date
    public var attempt: Int
    public var progress: Double?
    /// A step name, an error description, or a note.
    public var message: String?
    public var errorType: String?

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
