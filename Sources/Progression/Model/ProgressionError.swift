import Foundation

/// The errors of Progression's executor, each with a description for people.
public enum ProgressionError: Error, Sendable, LocalizedError, CustomStringConvertible {
    /// The task was cancelled.
    case cancelled
    /// A reported value was out of range (NaN, infinite, < 0, > 1, a step count of 0, n > m, a weight ≤ 0).
    case invalidProgressValue(String)
    /// A subtask failed; `underlying` is its error.
    case subtaskFailed(name: String, underlying: any Error & Sendable)
    /// No task with this id is known.
    case notFound(taskID: String)
    /// The task's options do not allow retrying it, or it is not failed or cancelled.
    case notRetryable(taskID: String, reason: String)
    /// The task's options do not allow pausing it.
    case notPausable(taskID: String)
    /// The task's options do not allow cancelling it.
    case notCancellable(taskID: String)
    /// The task is not in a state that allows this (removing a running task, resuming one that is not paused).
    /// `action` is what was refused, with its object: "resume it", "remove it before it has finished (cancel it
    /// first)".
    case invalidState(taskID: String, status: TaskStatus, action: String)
    /// A task with this id exists already.
    case duplicateID(String)
    /// No job kind of this name is registered.
    case unknownKind(String)
    /// A job kind of this name is registered already (its code is not replaced).
    case kindAlreadyRegistered(String)
    /// The process that ran the task died while it ran, and the task cannot be run again (a closure task).
    case interrupted(taskID: String)
    /// The process running the task died while it ran more times than allowed (a crash loop).
    case tooManyInterruptions(taskID: String, count: Int)
    /// The executor is shutting down or shut down.
    case shutDown
    /// The live executor that holds the task refused the change, or did not answer in time.
    case refusedByOwner(taskID: String, owner: String, reason: String)
    /// A value given to the executor cannot be used (a limit below 1, a run-at that cannot be stored).
    case invalidArgument(String)
    /// A durable sleep outside a job: only a job's code (a registered kind) can be continued by another process.
    case notResumable(taskID: String, reason: String)
    /// A store an executor or a job client cannot use: any ``TaskStore`` other than this package's (their write side,
    /// with fencing and claims, is the package's own). Such a store can still be read through the ``TaskStore`` API.
    case unsupportedStore(String)
    /// A store that has only part of what a store can do (one of the package's, in its tests: the core alone) was asked
    /// for what it cannot do: `store` is its type, `action` what was asked ("pause a kind").
    case storeCannot(store: String, action: String)
    /// A job's code awaited a job that is not one of its children (started with ``TaskContext/startChild(_:input:options:)``).
    case notAChildJob(taskID: String, jobID: String)

    /// The description for people.
    public var errorDescription: String? { description }

    /// The description for people.
    public var description: String {
        switch self {
        case .cancelled:
            "Task was cancelled"
        case .invalidProgressValue(let detail):
            "Invalid progress value: \(detail)"
        case .subtaskFailed(let name, let underlying):
            "Subtask '\(name)' failed: \(Self.describe(underlying))"
        case .notFound(let id):
            "No task with id '\(id)'"
        case .notRetryable(let id, let reason):
            "Task '\(id)' cannot be retried: \(reason)"
        case .notPausable(let id):
            "Task '\(id)' cannot be paused: its options do not allow it"
        case .notCancellable(let id):
            "Task '\(id)' cannot be cancelled: its options do not allow it"
        case .invalidState(let id, let status, let action):
            "Task '\(id)' is \(status): cannot \(action)"
        case .duplicateID(let id):
            "A task with id '\(id)' exists already"
        case .unknownKind(let kind):
            "No job kind '\(kind)' is registered"
        case .kindAlreadyRegistered(let kind):
            "A job kind '\(kind)' is registered already: register each kind once"
        case .interrupted(let id):
            "Task '\(id)' was interrupted: the process running it stopped, and its code cannot run in another process"
        case .tooManyInterruptions(let id, let count):
            "Task '\(id)' was interrupted \(count) times (its process died while it ran each time): it is not run again"
        case .shutDown:
            "The executor is shut down"
        case .refusedByOwner(let id, let owner, let reason):
            "The executor '\(owner)' that holds task '\(id)' did not change it: \(reason)"
        case .invalidArgument(let detail):
            "Invalid argument: \(detail)"
        case .notResumable(let id, let reason):
            "Task '\(id)' cannot wait durably: \(reason)"
        case .notAChildJob(let id, let job):
            "Job '\(job)' is not a child job of task '\(id)': a job awaits only the children it started"
        case .unsupportedStore(let type):
            "Progression cannot run or enqueue jobs on a \(type): it needs a SQLiteTaskStore, an InMemoryTaskStore or a PostgresTaskStore"
        case .storeCannot(let store, let action):
            "The store (\(store)) cannot \(action); a SQLiteTaskStore, an InMemoryTaskStore or a PostgresTaskStore can"
        }
    }

    /// A person's description of any error: `LocalizedError`'s `errorDescription`, else `CustomStringConvertible`,
    /// else the type's name.
    public static func describe(_ error: any Error) -> String {
        if let localized = error as? any LocalizedError, let text = localized.errorDescription { return text }
        if error is CancellationError { return ProgressionError.cancelled.description }
        return String(describing: error)
    }
}

/// A task ran longer than its `timeout` (paused time not counted).
public struct TaskTimeoutError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    /// The timeout that ran out.
    public var timeout: Duration

    /// A timeout of `timeout`.
    public init(timeout: Duration) {
        self.timeout = timeout
    }

    /// The description for people.
    public var errorDescription: String? { description }

    /// "Task timed out after 30 seconds".
    public var description: String {
        "Task timed out after \(Self.format(timeout))"
    }

    /// "30 seconds", "1.5 seconds", "2 minutes", "1 hour 30 minutes".
    static func format(_ duration: Duration) -> String {
        let seconds = duration.seconds
        func unit(_ value: Double, _ name: String) -> String {
            let text = value == value.rounded() ? String(Int(value)) : String(format: "%.3g", value)
            return "\(text) \(name)\(value == 1 ? "" : "s")"
        }
        if seconds < 60 { return unit(seconds, "second") }
        let hours = Int(seconds) / 3600
        let minutes = (Int(seconds) % 3600) / 60
        let rest = seconds - Double(hours * 3600 + minutes * 60)
        var parts: [String] = []
        if hours > 0 { parts.append(unit(Double(hours), "hour")) }
        if minutes > 0 { parts.append(unit(Double(minutes), "minute")) }
        if rest >= 0.001 { parts.append(unit((rest * 1000).rounded() / 1000, "second")) }
        return parts.joined(separator: " ")
    }
}
