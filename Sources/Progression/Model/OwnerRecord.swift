import Foundation

/// An executor process that holds tasks: who it is and when it last said it was alive.
public struct OwnerRecord: Sendable, Hashable, Codable, Identifiable {
    public var id: String
    public var host: String
    public var pid: Int32
    public var startedAt: Date
    public var heartbeatAt: Date
    /// Set when the owner shut down cleanly.
    public var stoppedAt: Date?

    public init(id: String, host: String, pid: Int32, startedAt: Date, heartbeatAt: Date, stoppedAt: Date? = nil) {
        self.id = id
        self.host = host
        self.pid = pid
        self.startedAt = startedAt
        self.heartbeatAt = heartbeatAt
        self.stoppedAt = stoppedAt
    }
}

/// A request to change a task, written by another process (progressctl) for the task's live owner to apply.
public struct ControlRequest: Sendable, Hashable, Codable, Identifiable {
    public enum Action: String, Sendable, Hashable, Codable, CaseIterable {
        case pause, resume, cancel, retry, remove
    }

    /// The store's number; 0 before it is stored.
    public var id: Int64
    public var taskID: String
    public var action: Action
    /// The owner that is to apply it.
    public var ownerID: String?
    public var requestedAt: Date
    public var handledAt: Date?
    /// What the owner did: `applied`, or why it refused.
    public var outcome: String?

    public init(
        id: Int64 = 0, taskID: String, action: Action, ownerID: String?, requestedAt: Date, handledAt: Date? = nil,
        outcome: String? = nil
    ) {
        self.id = id
        self.taskID = taskID
        self.action = action
        self.ownerID = ownerID
        self.requestedAt = requestedAt
        self.handledAt = handledAt
        self.outcome = outcome
    }
}
