import Foundation

/// An executor process that holds tasks: who it is and when it last said it was alive.
package struct OwnerRecord: Sendable, Hashable, Codable, Identifiable {
    package var id: String
    package var host: String
    package var pid: Int32
    package var startedAt: Date
    package var heartbeatAt: Date
    /// Set when the owner shut down cleanly.
    package var stoppedAt: Date?

    package init(id: String, host: String, pid: Int32, startedAt: Date, heartbeatAt: Date, stoppedAt: Date? = nil) {
        self.id = id
        self.host = host
        self.pid = pid
        self.startedAt = startedAt
        self.heartbeatAt = heartbeatAt
        self.stoppedAt = stoppedAt
    }
}

/// A request to change a task, written by another process (progressctl) for the task's live owner to apply.
package struct ControlRequest: Sendable, Hashable, Codable, Identifiable {
    package enum Action: String, Sendable, Hashable, Codable, CaseIterable {
        case pause, resume, cancel, retry, remove
    }

    /// The store's number; 0 before it is stored.
    package var id: Int64
    package var taskID: String
    package var action: Action
    /// The owner that is to apply it.
    package var ownerID: String?
    package var requestedAt: Date
    package var handledAt: Date?
    /// What the owner did: `applied`, or why it refused.
    package var outcome: String?

    package init(
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
