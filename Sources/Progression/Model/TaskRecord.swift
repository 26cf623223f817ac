import Foundation

/// One node of a task tree as the store keeps it: a root submitted to the executor, or a child created by `push`.
///
/// Times are kept to the millisecond; the store rounds them.
public struct TaskRecord: Sendable, Hashable, Codable, Identifiable {
    /// Every value of the record, kept in one storage that copies share: a copy of a record (a batch, an update, a
    /// snapshot of it) is a retain, and the storage is copied only when a record that shares it is changed.
    private var storage: Storage

    /// The task's id. A root's is the caller's, or 8 characters of Crockford's base32 (`3xjggyz2`) drawn from the
    /// store's sequence; a subtask's is its root's id, a dot and a number (`3xjggyz2.7`).
    public var id: String {
        get { storage.fields.id }
        set { fields.id = newValue }
    }
    /// The parent's id; `nil` for a root.
    public var parentID: String? {
        get { storage.fields.parentID }
        set { fields.parentID = newValue }
    }
    /// The root of the tree (the task's own id for a root).
    public var rootID: String {
        get { storage.fields.rootID }
        set { fields.rootID = newValue }
    }
    /// The name given to `addTask`, `submit` or `push`.
    public var name: String {
        get { storage.fields.name }
        set { fields.name = newValue }
    }
    /// Which occurrence of `name` under the parent this child is (0 for the first): with `parentID` and `name`, the
    /// child's identity across runs.
    public var occurrence: Int {
        get { storage.fields.occurrence }
        set { fields.occurrence = newValue }
    }
    /// The registered job kind; `nil` for a closure task and for children.
    public var kind: String? {
        get { storage.fields.kind }
        set { fields.kind = newValue }
    }
    /// The job's encoded input (JSON).
    public var input: Data? {
        get { storage.fields.input }
        set { fields.input = newValue }
    }
    /// The key that makes a second submit of the same job return the first one.
    public var idempotencyKey: String? {
        get { storage.fields.idempotencyKey }
        set { fields.idempotencyKey = newValue }
    }
    /// What may be done to the task, and how long it may take.
    public var options: TaskOptions {
        get { storage.fields.options }
        set { fields.options = newValue }
    }
    /// Where the task is in its life (the node's own status: a node below a paused one keeps its own).
    public var status: TaskStatus {
        get { storage.fields.status }
        set { fields.status = newValue }
    }
    /// 0...1, or `nil` when indeterminate. 1 only once completed.
    public var progress: Double? {
        get { storage.fields.progress }
        set { fields.progress = newValue }
    }
    /// The current step's name.
    public var step: String? {
        get { storage.fields.step }
        set { fields.step = newValue }
    }
    /// The share of the parent's progress this child carries: relative to its siblings, or units of the parent's
    /// declared total.
    public var weight: Double {
        get { storage.fields.weight }
        set { fields.weight = newValue }
    }
    /// Which run of the task this is (1 for the first; a retry adds one).
    public var attempt: Int {
        get { storage.fields.attempt }
        set { fields.attempt = newValue }
    }
    /// How many times the process running the task died while it ran.
    public var interruptions: Int {
        get { storage.fields.interruptions }
        set { fields.interruptions = newValue }
    }
    /// The Swift type of the error that failed the task.
    public var errorType: String? {
        get { storage.fields.errorType }
        set { fields.errorType = newValue }
    }
    /// The error that failed the task, for people.
    public var errorDescription: String? {
        get { storage.fields.errorDescription }
        set { fields.errorDescription = newValue }
    }
    /// A completed step's output (JSON).
    public var result: Data? {
        get { storage.fields.result }
        set { fields.result = newValue }
    }
    /// The last checkpoint the task stored (JSON).
    public var checkpoint: Data? {
        get { storage.fields.checkpoint }
        set { fields.checkpoint = newValue }
    }
    /// The executor that holds the task.
    public var ownerID: String? {
        get { storage.fields.ownerID }
        set { fields.ownerID = newValue }
    }
    /// Higher runs first when the executor limits how many roots run at once.
    public var priority: Int {
        get { storage.fields.priority }
        set { fields.priority = newValue }
    }
    /// When the task was submitted (a root) or first pushed (a child).
    public var createdAt: Date {
        get { storage.fields.createdAt }
        set { fields.createdAt = newValue }
    }
    /// When its latest run started.
    public var startedAt: Date? {
        get { storage.fields.startedAt }
        set { fields.startedAt = newValue }
    }
    /// When its row last changed (a transition, or progress that was written).
    public var updatedAt: Date {
        get { storage.fields.updatedAt }
        set { fields.updatedAt = newValue }
    }
    /// When it completed, failed or was cancelled.
    public var finishedAt: Date? {
        get { storage.fields.finishedAt }
        set { fields.finishedAt = newValue }
    }
    /// When a task waiting for an automatic retry runs again.
    public var nextAttemptAt: Date? {
        get { storage.fields.nextAttemptAt }
        set { fields.nextAttemptAt = newValue }
    }
    /// The work the task declared with `.total(_:)`, in its own units.
    public var total: Double? {
        get { storage.fields.total }
        set { fields.total = newValue }
    }
    /// How fast its progress moves while it runs: a smoothed fraction of the whole task per second.
    public var rate: Double? {
        get { storage.fields.rate }
        set { fields.rate = newValue }
    }
    /// On a child job (started by another job's code with ``TaskContext/startChild(_:input:options:)``): the id of the
    /// job that started it. `nil` for any other task.
    public var parentJobID: String? {
        get { storage.fields.parentJobID }
        set { fields.parentJobID = newValue }
    }
    /// On the node of a parent job's tree that stands for a child job (its *link*): that child job's id. A link's
    /// status, progress, step, result and error follow its child's, wherever the child runs.
    public var childJobID: String? {
        get { storage.fields.childJobID }
        set { fields.childJobID = newValue }
    }
    /// What a waiting job waits for, for people: "3 child jobs", "jobs 3xjggyz2, 4ab7k2m1", "signal 'approve'";
    /// `nil` unless it waits (see ``waitReason``).
    public var waitingFor: String? {
        get { storage.fields.waitingFor }
        set { fields.waitingFor = newValue }
    }
    /// What a waiting job waits for, as the store and the tree keeper read it.
    package var wait: JobWait? {
        get { storage.fields.wait }
        set { fields.wait = newValue }
    }
    /// While the job waits for its children: the progress its tree adds up to, raised as they report.
    package var waitingProgress: Double? {
        get { storage.fields.waitingProgress }
        set { fields.waitingProgress = newValue }
    }
    /// On a link: what one unit of its child's progress adds to the parent's root while the parent waits.
    package var share: Double? {
        get { storage.fields.share }
        set { fields.share = newValue }
    }
    /// On a link: whether the parent waits for this child now.
    package var awaited: Bool {
        get { storage.fields.awaited }
        set { fields.awaited = newValue }
    }
    /// On a job whose kind declares a ``JobVersion``: the version it began under (of the worker that first started
    /// it); only workers whose version can continue it run it again. `nil` (not started yet, or begun by code without
    /// a version): any version continues it.
    public var version: String? {
        get { storage.fields.version }
        set { fields.version = newValue }
    }

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
        storage = Storage(
            Fields(
                id: id, parentID: parentID, rootID: rootID ?? (parentID == nil ? id : ""), name: name,
                occurrence: occurrence, kind: kind, input: input, idempotencyKey: idempotencyKey, options: options,
                status: status, progress: progress, step: step, weight: weight, attempt: attempt,
                interruptions: interruptions, errorType: errorType, errorDescription: errorDescription, result: result,
                checkpoint: checkpoint, ownerID: ownerID, priority: priority ?? options.priority, createdAt: createdAt,
                startedAt: startedAt, updatedAt: updatedAt ?? createdAt, finishedAt: finishedAt,
                nextAttemptAt: nextAttemptAt, total: total, rate: rate, parentJobID: parentJobID,
                childJobID: childJobID, waitingFor: waitingFor))
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


extension TaskRecord {
    /// The stored values of a record, in the order its JSON has them.
    struct Fields: Sendable, Hashable, Codable {
        var id: String
        var parentID: String?
        var rootID: String
        var name: String
        var occurrence: Int
        var kind: String?
        var input: Data?
        var idempotencyKey: String?
        var options: TaskOptions
        var status: TaskStatus
        var progress: Double?
        var step: String?
        var weight: Double
        var attempt: Int
        var interruptions: Int
        var errorType: String?
        var errorDescription: String?
        var result: Data?
        var checkpoint: Data?
        var ownerID: String?
        var priority: Int
        var createdAt: Date
        var startedAt: Date?
        var updatedAt: Date
        var finishedAt: Date?
        var nextAttemptAt: Date?
        var total: Double?
        var rate: Double?
        var parentJobID: String?
        var childJobID: String?
        var waitingFor: String?
        var wait: JobWait?
        var waitingProgress: Double?
        var share: Double?
        var awaited: Bool = false
        var version: String?
    }

    /// The storage of a record's values.
    ///
    /// `@unchecked Sendable` is sound: `fields` is written only through ``TaskRecord/fields``, which first makes the
    /// storage this record's alone (`isKnownUniquelyReferenced`, or a copy). A storage that two records share, and so
    /// the only kind another thread can reach, is never written, only read; a record is a value, and two threads
    /// that change one record at once race on the record itself, which Swift's checking refuses as for any value.
    /// Its field is unchecked for exclusivity for the same reason (and since every read of a record goes through
    /// it).
    final class Storage: @unchecked Sendable {
        @exclusivity(unchecked) var fields: Fields

        init(_ fields: Fields) {
            self.fields = fields
        }
    }

    /// The values, for a change: the storage is copied first when another record shares it.
    var fields: Fields {
        _read { yield storage.fields }
        _modify {
            if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
            yield &storage.fields
        }
    }

    public static func == (left: TaskRecord, right: TaskRecord) -> Bool {
        left.storage === right.storage || left.storage.fields == right.storage.fields
    }

    public func hash(into hasher: inout Hasher) {
        storage.fields.hash(into: &hasher)
    }

    /// A record from its JSON, as the stored values encode (every property by its name).
    public init(from decoder: any Decoder) throws {
        storage = Storage(try Fields(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        try storage.fields.encode(to: encoder)
    }
}
