import Foundation

/// One node of a task tree as the store keeps it: a root submitted to the executor, or a child created by `push`.
///
/// Times are kept to the millisecond; the store rounds them.
public struct TaskRecord: Sendable, Hashable, Codable, Identifiable {
    /// The task's id. A root's is the caller's, or 8 characters of Crockford's base32 (`3xjggyz2`) drawn from the
    /// store's sequence; a subtask's is its root's id, a dot and a number (`3xjggyz2.7`).
    public var id: String
    /// The parent's id; `nil` for a root.
    public var parentID: String?
    /// The root of the tree (the task's own id for a root).
    public var rootID: String
    /// The name given to `addTask`, `submit` or `push`.
    public var name: String
    /// Which occurrence of `name` under the parent this child is (0 for the first): with `parentID` and `name`, the
    /// child's identity across runs.
    public var occurrence: Int
    /// The registered job kind; `nil` for a closure task and for children.
    public var kind: String?
    /// The job's encoded input (JSON).
    public var input: Data?
    /// The key that makes a second submit of the same job return the first one.
    public var idempotencyKey: String?
    /// What may be done to the task, and how long it may take.
    public var options: TaskOptions
    /// Where the task is in its life (the node's own status: a node below a paused one keeps its own).
    public var status: TaskStatus
    /// 0...1, or `nil` when indeterminate. 1 only once completed.
    public var progress: Double?
    /// The current step's name.
    public var step: String?
    /// The share of the parent's progress this child carries: relative to its siblings, or units of the parent's
    /// declared total.
    public var weight: Double
    /// Which run of the task this is (1 for the first; a retry adds one).
    public var attempt: Int
    /// How many times the process running the task died while it ran.
    public var interruptions: Int
    /// The Swift type of the error that failed the task.
    public var errorType: String?
    /// The error that failed the task, for people.
    public var errorDescription: String?
    /// A completed step's output (JSON).
    public var result: Data?
    /// The last checkpoint the task stored (JSON).
    public var checkpoint: Data?
    /// The executor that holds the task.
    public var ownerID: String?
    /// Higher runs first when the executor limits how many roots run at once.
    public var priority: Int
    /// When the task was submitted (a root) or first pushed (a child).
    public var createdAt: Date
    /// When its latest run started.
    public var startedAt: Date?
    /// When its row last changed (a transition, or progress that was written).
    public var updatedAt: Date
    /// When it completed, failed or was cancelled.
    public var finishedAt: Date?
    /// When a task waiting for an automatic retry runs again.
    public var nextAttemptAt: Date?
    /// The work the task declared with `.total(_:)`, in its own units.
    public var total: Double?
    /// How fast its progress moves while it runs: a smoothed fraction of the whole task per second.
    public var rate: Double?
    /// On a child job (started by another job's code with ``TaskContext/startChild(_:input:options:)``): the id of the
    /// job that started it. `nil` for any other task.
    public var parentJobID: String?
    /// On the node of a parent job's tree that stands for a child job (its *link*): that child job's id. A link's
    /// status, progress, step, result and error follow its child's, wherever the child runs.
    public var childJobID: String?
    /// What a waiting job waits for, for people: "3 child jobs", "jobs 3xjggyz2, 4ab7k2m1", "signal 'approve'";
    /// `nil` unless it waits (see ``waitReason``).
    public var waitingFor: String?
    /// What a waiting job waits for, as the store and the tree keeper read it.
    package var wait: JobWait?
    /// While the job waits for its children: the progress its tree adds up to, raised as they report.
    package var waitingProgress: Double?
    /// On a link: what one unit of its child's progress adds to the parent's root while the parent waits.
    package var share: Double?
    /// On a link: whether the parent waits for this child now.
    package var awaited = false
    /// On a job whose kind declares a ``JobVersion``: the version it began under (of the worker that first started
    /// it); only workers whose version can continue it run it again. `nil` (not started yet, or begun by code without
    /// a version): any version continues it.
    public var version: String?

    /// A record; `rootID` defaults to the id for a root, `priority` to the options' priority, `updatedAt` to
    /// `createdAt`.
    public init(
        id: String, parentID: String? = nil, rootID: String? = nil, name: String, occurrence: Int = 0,
        kind: String? = nil, input: Data? = nil, idempotencyKey: String? = nil, options: TaskOptions = .default,
        status: TaskStatus = .pending, progress: Double? = nil, step: String? = nil, weight: Double = 1,
        attempt: Int = 1, interruptions: Int = 0, errorType: String? = nil, errorDescription: String? = nil,
        result: Data? = nil, checkpoint: Data? = nil, ownerID: String? = nil,
        priority: Int? = nil, createdAt: Date, startedAt: Date? = nil, updatedAt: Date? = nil,
        finishedAt: Date? = nil, nextAttemptAt: Date? = nil, total: Double? = nil, rate: Double? = nil,
        parentJobID: String? = nil, childJobID: String? = nil, waitingFor: String? = nil
    ) {
        self.id = id
        self.parentID = parentID
        self.rootID = rootID ?? (parentID == nil ? id : "")
        self.name = name
        self.occurrence = occurrence
        self.kind = kind
        self.input = input
        self.idempotencyKey = idempotencyKey
        self.options = options
        self.status = status
        self.progress = progress
        self.step = step
        self.weight = weight
        self.attempt = attempt
        self.interruptions = interruptions
        self.errorType = errorType
        self.errorDescription = errorDescription
        self.result = result
        self.checkpoint = checkpoint
        self.ownerID = ownerID
        self.priority = priority ?? options.priority
        self.createdAt = createdAt
        self.startedAt = startedAt
        self.updatedAt = updatedAt ?? createdAt
        self.finishedAt = finishedAt
        self.nextAttemptAt = nextAttemptAt
        self.total = total
        self.rate = rate
        self.parentJobID = parentJobID
        self.childJobID = childJobID
        self.waitingFor = waitingFor
    }

    /// Whether the task is a root (it has no parent).
    public var isRoot: Bool { parentID == nil }

    /// What a root that waits for a time (``nextAttemptAt``) waits for; `nil` when it waits for none (or is not a
    /// pending or paused root).
    public var waitReason: WaitReason? {
        guard isRoot, status == .pending || status == .paused else { return nil }
        if wait != nil { return .waiting }
        guard nextAttemptAt != nil else { return nil }
        if errorDescription != nil { return .retry }
        return startedAt == nil ? .runAt : .sleep
    }

    /// Why a job waits for a time.
    public enum WaitReason: String, Sendable, Hashable, Codable {
        /// It was submitted to run at a time (a delayed job, or a schedule's): it is *scheduled*.
        case runAt = "scheduled"
        /// An attempt failed and its retry policy gave it another one then: it is *retrying*.
        case retry = "retrying"
        /// Its code slept (``TaskContext/sleep(until:name:)``) and gave its slot back until then: it is *sleeping*.
        case sleep = "sleeping"
        /// It gave its slot back to wait for its child jobs, for other jobs (``JobOptions/after``) or for a signal:
        /// it is *waiting* (``TaskRecord/waitingFor`` says for what).
        case waiting
    }

    /// The status as people read it: a pending root that waits says why (`scheduled`, `retrying`, `sleeping`,
    /// `waiting`), a running job past its stall limit says `stalled` (``stalledFor(at:)``); otherwise the status.
    public var displayStatus: String { displayStatus(at: Date()) }

    /// The status as people read it at `now` (see ``displayStatus``).
    public func displayStatus(at now: Date) -> String {
        if status == .pending, let waitReason { return waitReason.rawValue }
        if stalledFor(at: now) != nil { return "stalled" }
        return status.rawValue
    }

    /// The estimated time until the task completes, from its progress and rate: `nil` unless it runs and moves.
    public var estimatedTimeRemaining: Duration? {
        TaskProgressEstimate.remaining(progress: progress, rate: rate, status: isWaitingForChildren ? .running : status)
    }

    /// Whether the job waits for its child jobs (its progress moves with theirs meanwhile).
    var isWaitingForChildren: Bool {
        if case .children? = wait, status == .pending { return true }
        return false
    }
}

/// Time left from a fraction done and a rate.
enum TaskProgressEstimate {
    static func remaining(progress: Double?, rate: Double?, status: TaskStatus) -> Duration? {
        guard status == .running, let progress, let rate, rate > 1e-9, progress < 1 else { return nil }
        let seconds = (1 - progress) / rate
        guard seconds.isFinite, seconds < 100 * 365 * 86_400 else { return nil }
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }
}

extension Date {
    /// Milliseconds since the Unix epoch, as stored. A date beyond what 64 bits of milliseconds hold (some 292
    /// million years either way, e.g. "now minus 10¹⁴ days" from a command line) saturates to `Int64.min` or
    /// `Int64.max` instead of trapping; `Date.distantPast` and `distantFuture` fit and keep their order.
    package var storedMilliseconds: Int64 {
        let milliseconds = (timeIntervalSince1970 * 1000).rounded()
        // Double(Int64.max) rounds up to 2⁶³, which no Int64 holds; Double(Int64.min) is exactly -2⁶³.
        if milliseconds >= Double(Int64.max) { return .max }
        if milliseconds < Double(Int64.min) { return .min }
        return milliseconds.isNaN ? 0 : Int64(milliseconds)
    }

    package init(storedMilliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(storedMilliseconds) / 1000)
    }

    /// This date rounded to the millisecond, as the store keeps it.
    package var roundedToMilliseconds: Date {
        Date(storedMilliseconds: storedMilliseconds)
    }

    /// The first millisecond at or after this date: a run-at kept at the store's precision that is never before the
    /// time asked for (rounding to the nearest let a delayed job start up to half a millisecond early). A date within
    /// a microsecond after a millisecond is that millisecond: a `Date` near now holds time to about a tenth of a
    /// microsecond, so "1 ms after" read back from a sum is often a hair past it.
    package var roundedUpToMilliseconds: Date {
        let milliseconds = (timeIntervalSince1970 * 1000 - 0.001).rounded(.up)
        if milliseconds >= Double(Int64.max) { return Date(storedMilliseconds: .max) }
        if milliseconds < Double(Int64.min) { return Date(storedMilliseconds: .min) }
        return Date(storedMilliseconds: milliseconds.isNaN ? 0 : Int64(milliseconds))
    }

    /// Now, to the millisecond: the system's real-time clock read directly (a report reads it, and `Date()` with its
    /// rounding cost about twice as much). The millisecond that has begun, never one that has not: a job due at a
    /// millisecond is not seen as due before it (rounded to the nearest, now ran up to half a millisecond ahead).
    package static func currentMillisecond() -> Date {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        let milliseconds = Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
        return Date(storedMilliseconds: milliseconds)
    }
}
