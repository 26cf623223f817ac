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
    /// The job kinds it registered (it runs jobs of those only); `nil` when not recorded (an owner of an older
    /// version).
    package var kinds: [String]?
    /// How many roots it runs at once (its ``TaskExecutor/Configuration/maxConcurrentTasks``); `nil` when not
    /// recorded (an owner of an older version, or a process that runs none).
    package var slots: Int?
    /// The versions of its kinds that declare one (``JobVersion``), by kind; `nil` when not recorded (an owner of an
    /// older version). A kind it registered without a version continues any job.
    package var versions: [String: JobVersion]?

    package init(
        id: String, host: String, pid: Int32, startedAt: Date, heartbeatAt: Date, stoppedAt: Date? = nil,
        kinds: [String]? = nil, slots: Int? = nil, versions: [String: JobVersion]? = nil
    ) {
        self.slots = slots
        self.versions = versions
        self.id = id
        self.host = host
        self.pid = pid
        self.startedAt = startedAt
        self.heartbeatAt = heartbeatAt
        self.stoppedAt = stoppedAt
        self.kinds = kinds
    }
}

extension OwnerRecord {
    /// The stored form of ``kinds``: a JSON array of names, or `nil`.
    package static func encodeKinds(_ kinds: [String]?) throws -> String? {
        guard let kinds else { return nil }
        return String(decoding: try JSONEncoder().encode(kinds.sorted()), as: UTF8.self)
    }

    /// ``kinds`` from its stored form (text that does not decode reads as not recorded).
    package static func decodeKinds(_ text: String?) -> [String]? {
        guard let text else { return nil }
        return try? JSONDecoder().decode([String].self, from: Data(text.utf8))
    }

    /// The stored form of ``versions``: a JSON object by kind (keys sorted), or `nil`.
    package static func encodeVersions(_ versions: [String: JobVersion]?) throws -> String? {
        guard let versions else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(versions), as: UTF8.self)
    }

    /// ``versions`` from its stored form (text that does not decode reads as not recorded).
    package static func decodeVersions(_ text: String?) -> [String: JobVersion]? {
        guard let text else { return nil }
        return try? JSONDecoder().decode([String: JobVersion].self, from: Data(text.utf8))
    }

    /// Whether this owner, had it registered `kind`, would continue a job of it that `version` began: it registered
    /// the kind, and without a version or with one that can. `false` for an owner that did not record its kinds.
    package func continues(kind: String, version: String?) -> Bool {
        guard let kinds, kinds.contains(kind) else { return false }
        return versions?[kind].map { $0.canContinue(version) } ?? true
    }
}

/// A request to change a task, written by another process (progressctl) for the task's live owner to apply.
package struct ControlRequest: Sendable, Hashable, Codable, Identifiable {
    package enum Action: String, Sendable, Hashable, Codable, CaseIterable {
        case pause, resume, cancel, retry, remove
        /// A job that waits for a time (a run-at, a retry's backoff, a durable sleep) runs at once.
        case runNow = "run-now"
    }

    /// The lifecycle transition an action asks for.
    package static func transition(of action: Action) -> TaskLifecycle.Transition {
        switch action {
        case .pause: .pause
        case .resume: .resume(codeRunning: false)
        case .cancel: .cancel
        case .retry: .retry
        case .remove: .remove
        case .runNow: .runNow
        }
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
