import Foundation

/// When a running job counts as *stalled*, and what its worker does then (issue 37).
///
/// A job is stalled while it runs and nothing in its tree has moved — no report, no step started or ended, no
/// checkpoint, no child job's progress — for longer than ``limit``. The rule is read from the job's own row (its
/// last change, ``TaskRecord/updatedAt``, which any movement in its tree advances), so every reader of the store —
/// `progressctl list`, `show`, `watch`, the console, the fleet's gauges — sees the same thing at the same time,
/// whichever worker runs the job, even if that worker's heartbeat is healthy.
///
/// ```swift
/// static let options = TaskOptions.default.stallLimit(.minutes(5), then: .retry)
/// ```
public struct StallRule: Sendable, Hashable, Codable {
    /// How long the job may go without moving.
    public var limit: Duration
    /// What the worker running the job does once it is stalled.
    public var action: StallAction

    /// A rule: stalled after `limit` without movement, then `action`.
    public init(limit: Duration, action: StallAction = .flag) {
        self.limit = limit
        self.action = action
    }

    /// How long a job that last moved at `lastMoved` has been still at `now`, when that is longer than the limit
    /// (it is stalled); `nil` while it is not.
    public func stalledFor(lastMoved: Date, now: Date) -> Duration? {
        let still = now.timeIntervalSince(lastMoved)
        guard still > limit.seconds else { return nil }
        return .milliseconds(Int64((still * 1000).rounded(.down)))
    }

    /// Refuses a limit that is not positive.
    package func check() throws(ProgressionError) {
        guard limit > .zero else {
            throw ProgressionError.invalidArgument("a stall limit must be positive, not \(limit)")
        }
    }
}

/// What the worker running a stalled job does.
public enum StallAction: String, Sendable, Hashable, Codable, CaseIterable {
    /// Nothing: the job is shown as stalled (and counted in the gauges) until it moves again.
    case flag
    /// Cancels the job (its code is cancelled; the job ends `cancelled`, and may be retried by hand).
    case cancel
    /// Fails the attempt with ``TaskStalledError``: the job's retry policy runs it again from its checkpoint and
    /// completed steps, or, with no attempt left, it ends `failed`.
    case retry

    /// The action named `name` (`flag`, `cancel`, `retry`).
    ///
    /// - Throws: ``ProgressionError/invalidArgument(_:)`` for any other name.
    public init(parsing name: String) throws(ProgressionError) {
        guard let action = StallAction(rawValue: name) else {
            throw ProgressionError.invalidArgument(
                "unknown stall action '\(name)': use \(StallAction.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        self = action
    }
}

/// The error a job's attempt ends with when its stall rule's action is ``StallAction/retry``.
public struct TaskStalledError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    /// The limit it went past.
    public var limit: Duration

    /// The error of a job that did not move for `limit`.
    public init(limit: Duration) {
        self.limit = limit
    }

    /// The description for people.
    public var errorDescription: String? { description }

    /// "Task stalled: nothing moved for 30 seconds".
    public var description: String { "Task stalled: nothing moved for \(TaskTimeoutError.format(limit))" }
}

extension TaskOptions {
    /// A copy that counts the job as stalled after `limit` without movement and then takes `action` (see
    /// ``StallRule``); `nil` for no stall rule. The rule applies to a job (a root); a subtask's movement counts for
    /// its job, a subtask's own rule is not used.
    public func stallLimit(_ limit: Duration?, then action: StallAction = .flag) -> TaskOptions {
        with { $0.stall = limit.map { StallRule(limit: $0, action: action) } }
    }

    /// Refuses options no job can have: a stall limit that is not positive.
    package func check() throws(ProgressionError) {
        try stall?.check()
    }
}

extension TaskRecord {
    /// How long this running job has not moved, when that is longer than its stall limit; `nil` otherwise (not
    /// running, no stall rule, or moving).
    public func stalledFor(at now: Date = Date()) -> Duration? {
        guard status == .running, parentID == nil, let rule = options.stall else { return nil }
        return rule.stalledFor(lastMoved: updatedAt, now: now)
    }
}

extension TaskSnapshot {
    /// How long this running job has not moved, when that is longer than its stall limit; `nil` otherwise.
    public func stalledFor(at now: Date = Date()) -> Duration? {
        guard status == .running, parentID == nil, let rule = options.stall else { return nil }
        return rule.stalledFor(lastMoved: updatedAt, now: now)
    }
}
