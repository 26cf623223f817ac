import Foundation

/// How long finished jobs stay in the store before the fleet deletes them, with their steps, history, signals and
/// dependencies.
///
/// Every executor that runs jobs carries it out: once per ``interval`` one executor of the fleet (whichever takes the
/// turn in the store first) deletes jobs finished longer ago than their status's period, in batches of at most
/// ``batchSize`` jobs, each its own short transaction, so that it never holds the writer (SQLite) or a lock
/// (PostgreSQL) for long. A child job is kept until its parent has gone (a retried parent runs its failed children
/// again), and a job until no unfinished job waits for it. Give every executor of a database the same policy: the turn
/// goes to any of them.
///
/// The default keeps completed and cancelled jobs a day and failed ones a week (what an operator looks at after a
/// failure). ``keepEverything`` deletes nothing, as before Progression had retention; `progressctl prune` deletes on
/// demand either way.
public struct RetentionPolicy: Sendable, Hashable {
    /// How long a completed job is kept once finished; `nil` keeps it for ever.
    public var completed: Duration?
    /// How long a failed job is kept; `nil` keeps it for ever.
    public var failed: Duration?
    /// How long a cancelled job is kept; `nil` keeps it for ever.
    public var cancelled: Duration?
    /// How often the fleet looks for jobs to delete (one executor per interval).
    public var interval: Duration
    /// At most this many jobs (with their trees) per transaction.
    public var batchSize: Int
    /// At most this many batches per turn; the rest waits for the next one.
    public var maxBatchesPerTurn: Int

    /// A policy.
    ///
    /// - Throws: ``ProgressionError/invalidArgument(_:)`` for a period, interval or size that is not positive.
    public init(
        completed: Duration?, failed: Duration?, cancelled: Duration?, interval: Duration = .seconds(60),
        batchSize: Int = 500, maxBatchesPerTurn: Int = 20
    ) throws(ProgressionError) {
        for (name, period) in [("completed", completed), ("failed", failed), ("cancelled", cancelled)] {
            if let period, period <= .zero {
                throw .invalidArgument("the retention of \(name) jobs must be positive, or nil to keep them (\(period))")
            }
        }
        guard interval > .zero else { throw .invalidArgument("the retention interval must be positive (\(interval))") }
        guard batchSize > 0, maxBatchesPerTurn > 0 else {
            throw .invalidArgument("the retention's batch size and batches per turn must be positive")
        }
        self.completed = completed
        self.failed = failed
        self.cancelled = cancelled
        self.interval = interval
        self.batchSize = batchSize
        self.maxBatchesPerTurn = maxBatchesPerTurn
    }

    private init(completed: Duration?, failed: Duration?, cancelled: Duration?) {
        self.completed = completed
        self.failed = failed
        self.cancelled = cancelled
        interval = .seconds(60)
        batchSize = 500
        maxBatchesPerTurn = 20
    }

    /// Completed and cancelled jobs a day, failed ones a week.
    public static let `default` = RetentionPolicy(
        completed: .seconds(86_400), failed: .seconds(7 * 86_400), cancelled: .seconds(86_400))

    /// Nothing is deleted but by `progressctl prune`, the console or ``TaskExecutor/remove(taskID:)``.
    public static let keepEverything = RetentionPolicy(completed: nil, failed: nil, cancelled: nil)

    /// How long a job that finished with `status` is kept; `nil` for ever (and for an unfinished status).
    public func period(for status: TaskStatus) -> Duration? {
        switch status {
        case .completed: completed
        case .failed: failed
        case .cancelled: cancelled
        case .pending, .running, .paused: nil
        }
    }

    /// Whether it deletes anything.
    public var deletesAnything: Bool { completed != nil || failed != nil || cancelled != nil }

    /// The finished-before time of each status it deletes, at `now`, in a fixed order.
    package func cutoffs(at now: Date) -> [(status: TaskStatus, finishedBefore: Date)] {
        [TaskStatus.completed, .cancelled, .failed].compactMap { status in
            period(for: status).map { (status, now.addingTimeInterval(-$0.seconds)) }
        }
    }
}
