import Foundation

/// What a job that waits durably waits for, as the store keeps it (`tasks.wait`).
package enum JobWait: Sendable, Hashable, Codable {
    /// Its child jobs: every one it awaits (`all`), or the first of them to finish.
    case children(all: Bool)
    /// The jobs it was submitted after (``JobOptions/after``).
    case jobs
    /// A signal of this name (``TaskContext/signal(_:as:timeout:)``).
    case signal(String)

    /// How it is stored: `children:all`, `children:any`, `jobs`, `signal:NAME`.
    package var storedText: String {
        switch self {
        case .children(let all): all ? "children:all" : "children:any"
        case .jobs: "jobs"
        case .signal(let name): "signal:" + name
        }
    }

    /// The wait as stored; `nil` for a text no version of Progression writes.
    package init?(storedText: String) {
        switch storedText {
        case "children:all": self = .children(all: true)
        case "children:any": self = .children(all: false)
        case "jobs": self = .jobs
        default:
            guard storedText.hasPrefix("signal:") else { return nil }
            self = .signal(String(storedText.dropFirst("signal:".count)))
        }
    }

    package init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let wait = JobWait(storedText: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "unknown wait"))
        }
        self = wait
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(storedText)
    }

    /// The run-at time of a root that waits for something other than a time: the latest one a job may have. Claims take
    /// only roots whose time has come, so such a root is claimed once the tree keeper releases it (its time cleared),
    /// or, for a signal with a timeout, at the timeout.
    package static let untilReleased = JobOptions.latestRunAt
}

/// What a job submitted after others (``JobOptions/after``) does when one of them fails or is cancelled (a dependency
/// that still has automatic retries left has not failed yet).
public enum DependencyFailurePolicy: String, Sendable, Hashable, Codable, CaseIterable {
    /// It is cancelled, saying which dependency failed. The default: a job that needs another's output does not start
    /// without it. Retrying it later runs it at once (its dependencies are not looked at again).
    case cancel
    /// It runs once every dependency has finished, however each ended: its code reads their outcome if it cares
    /// (``JobClient/job(_:)``).
    case run
}

/// A job that starts only after another one finished.
package struct JobDependency: Sendable, Hashable {
    /// The job that waits.
    package var jobID: String
    /// The job it waits for.
    package var dependsOn: String
    package var onFailure: DependencyFailurePolicy

    package init(jobID: String, dependsOn: String, onFailure: DependencyFailurePolicy) {
        self.jobID = jobID
        self.dependsOn = dependsOn
        self.onFailure = onFailure
    }
}

/// A signal sent to a job: a name and a payload (JSON), kept until a wait step of the job takes it.
public struct JobSignalRecord: Sendable, Hashable, Codable {
    /// The store's number for it (signals of a name are taken oldest first).
    public var sequence: Int64
    /// The job it was sent to.
    public var jobID: String
    /// Its name: what the job's code waits for.
    public var name: String
    /// Its payload, as JSON; `nil` for none.
    public var payload: Data?
    /// When it was sent.
    public var sentAt: Date
    /// The wait step that took it; `nil` while it waits to be taken.
    public var consumedBy: String?
    /// When it was taken.
    public var consumedAt: Date?

    /// A signal as stored.
    public init(
        sequence: Int64, jobID: String, name: String, payload: Data?, sentAt: Date, consumedBy: String? = nil,
        consumedAt: Date? = nil
    ) {
        self.sequence = sequence
        self.jobID = jobID
        self.name = name
        self.payload = payload
        self.sentAt = sentAt
        self.consumedBy = consumedBy
        self.consumedAt = consumedAt
    }
}

/// Work the tree keeper has to carry out, queued (`tree_changes`) in the transaction of the change that causes it.
package struct TreeChange: Sendable, Hashable {
    package enum Action: String, Sendable, Hashable, CaseIterable {
        /// A child job changed: its link in the parent's tree follows it, and a waiting parent's progress (and, when
        /// the child finished, whether the parent may go on) with it.
        case mirror
        /// A parent ended (completed, failed or cancelled): its unfinished children are cancelled.
        case cancelChildren = "cancel-children"
        /// A parent was paused: its unfinished children are paused.
        case pauseChildren = "pause-children"
        /// A parent was resumed: its paused children are resumed.
        case resumeChildren = "resume-children"
        /// A job finished (or was removed): the jobs that wait for it are looked at again.
        case dependents
        /// A job began to wait: what it waits for is looked at (it may have happened meanwhile).
        case recount
    }

    package var taskID: String
    package var action: Action

    package init(_ taskID: String, _ action: Action) {
        self.taskID = taskID
        self.action = action
    }

    /// What the status change of a root that has child jobs asks of them: its end cancels them, its pause pauses them,
    /// its resume resumes them; other changes (a start, a wait, a graceful stop) leave them alone.
    package static func cascade(from before: TaskStatus, to after: TaskStatus) -> Action? {
        guard before != after else { return nil }
        if after.isFinished { return .cancelChildren }
        if after == .paused { return .pauseChildren }
        if before == .paused { return .resumeChildren }
        return nil
    }
}

extension TaskRecord {
    /// Whether this node is a link: the node of a parent's tree that stands for a child job.
    package var isLink: Bool { childJobID != nil }

    /// Makes this link follow its child job: status, progress, step, error, result, times and rate (the columns of
    /// ``JobTreeKeeper/mirrored``), as the tree keeper writes them and as an executor reads them from the child's row.
    package mutating func follow(child: TaskRecord) {
        status = child.status
        progress = child.status == .completed ? 1 : child.progress.map { min($0, 1) }
        step = child.step
        errorType = child.errorType
        errorDescription = child.errorDescription
        result = child.status == .completed ? child.result : nil
        startedAt = child.startedAt
        finishedAt = child.finishedAt
        rate = child.status.isFinished ? nil : child.rate
    }

    /// Ends a wait: what the job waited for has happened, and any worker may claim it now.
    package mutating func releaseWait(at now: Date) {
        wait = nil
        waitingFor = nil
        waitingProgress = nil
        nextAttemptAt = nil
        updatedAt = max(updatedAt, now.roundedToMilliseconds)
    }
}

/// A job's dependencies (``JobOptions/after``) that cannot be used; nothing is written.
public enum JobDependencyError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    /// No job has this id (it never existed, or it was removed).
    case unknownJob(String)
    /// The id is a subtask's, not a job's.
    case notAJob(String)
    /// The jobs submitted together depend on each other in a circle (these ids, in order).
    case cycle([String])

    public var errorDescription: String? { description }
    public var description: String {
        switch self {
        case .unknownJob(let id): "No job with id '\(id)' to run after (it never existed, or it was removed)"
        case .notAJob(let id): "'\(id)' is a subtask, not a job: a job can only run after other jobs"
        case .cycle(let ids): "Jobs cannot run after each other in a circle: \(ids.joined(separator: " → "))"
        }
    }

    /// The first cycle among jobs submitted together (`dependencies`: each job's dependencies among them and others);
    /// `nil` when there is none.
    static func cycle(in dependencies: [String: [String]]) -> [String]? {
        var state: [String: Bool] = [:]  // false: on the path; true: done
        var path: [String] = []
        func visit(_ id: String) -> [String]? {
            if let done = state[id] {
                guard !done, let start = path.firstIndex(of: id) else { return nil }
                return Array(path[start...]) + [id]
            }
            state[id] = false
            path.append(id)
            for next in dependencies[id] ?? [] {
                if let found = visit(next) { return found }
            }
            path.removeLast()
            state[id] = true
            return nil
        }
        for id in dependencies.keys.sorted() {
            if let found = visit(id) { return found }
        }
        return nil
    }
}

extension JobSignalRecord {
    /// The largest payload a signal may carry, in bytes of JSON.
    package static let maxPayloadBytes = 1 << 20

    /// A payload as JSON, within ``maxPayloadBytes``.
    ///
    /// - Throws: ``ProgressionError/invalidArgument(_:)`` for a larger one; `EncodingError`.
    package static func encode(_ payload: some Encodable) throws -> Data {
        let data = try JSONEncoder().encode(payload)
        guard data.count <= maxPayloadBytes else {
            throw ProgressionError.invalidArgument(
                "a signal's payload is \(data.count) bytes of JSON, more than the limit of \(maxPayloadBytes)")
        }
        return data
    }

    /// Checks a signal's name and the job it is sent to (as read in the send's transaction); returns the job.
    ///
    /// - Throws: ``ProgressionError/invalidArgument(_:)`` for an empty name or one with control characters;
    ///   ``ProgressionError/notFound(taskID:)``; ``ProgressionError/invalidState(taskID:status:action:)`` for a
    ///   subtask or a job that has finished.
    package static func check(_ job: TaskRecord?, id: String, name: String) throws(ProgressionError) -> TaskRecord {
        try checkName(name)
        guard let job else { throw .notFound(taskID: id) }
        guard job.isRoot else {
            throw .invalidState(taskID: id, status: job.status, action: "receive a signal: it is a subtask (signal its job)")
        }
        guard !job.status.isFinished else {
            throw .invalidState(taskID: id, status: job.status, action: "receive the signal '\(name)': it has finished")
        }
        return job
    }

    /// Checks a signal's name: 1 to 200 characters, no control characters.
    package static func checkName(_ name: String) throws(ProgressionError) {
        guard !name.isEmpty, name.count <= 200,
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw .invalidArgument("a signal's name must be 1 to 200 characters without control characters")
        }
    }

    /// The event a signal's sending writes in the job's history.
    package static func sentEvent(to job: TaskRecord, name: String, at date: Date) -> TaskEvent {
        TaskEvent(
            taskID: job.id, rootID: job.id, kind: .signaled, at: date.roundedToMilliseconds, attempt: job.attempt,
            progress: job.progress, message: name)
    }
}
