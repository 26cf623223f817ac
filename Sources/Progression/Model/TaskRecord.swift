import Foundation

/// One node of a task tree as the store keeps it: a root submitted to the executor, or a child created by `push`.
///
/// Times are kept to the millisecond; the store rounds them.
public struct TaskRecord: Sendable, Hashable, Codable, Identifiable {
    public var id: String
    /// `nil` for a root.
    public var parentID: String?
    /// The root of the tree (the task's own id for a root).
    public var rootID: String
    public var name: String
    /// Which occurrence of `name` under the parent this child is (0 for the first): with `parentID` and `name`, the
    /// child's identity across runs.
    public var occurrence: Int
    /// The registered job kind; `nil` for a closure task and for children.
    public var kind: String?
    /// The job's encoded input.
    public var input: Data?
    public var idempotencyKey: String?
    public var options: TaskOptions
    public var status: TaskStatus
    /// 0...1, or `nil` when indeterminate.
    public var progress: Double?
    public var step: String?
    /// The share of the parent's progress this child carries, relative to its siblings.
    public var weight: Double
    public var attempt: Int
    /// How many times the process running the task died while it ran.
    public var interruptions: Int
    public var errorType: String?
    public var errorDescription: String?
    /// A completed step's output (JSON).
    public var result: Data?
    public var checkpoint: Data?
    public var ownerID: String?
    public var leaseExpiresAt: Date?
    public var priority: Int
    public var createdAt: Date
    public var startedAt: Date?
    public var updatedAt: Date
    public var finishedAt: Date?
    public var nextAttemptAt: Date?

    public init(
        id: String, parentID: String? = nil, rootID: String? = nil, name: String, occurrence: Int = 0,
        kind: String? = nil, input: Data? = nil, idempotencyKey: String? = nil, options: TaskOptions = .default,
        status: TaskStatus = .pending, progress: Double? = nil, step: String? = nil, weight: Double = 1,
        attempt: Int = 1, interruptions: Int = 0, errorType: String? = nil, errorDescription: String? = nil,
        result: Data? = nil, checkpoint: Data? = nil, ownerID: String? = nil, leaseExpiresAt: Date? = nil,
        priority: Int? = nil, createdAt: Date, startedAt: Date? = nil, updatedAt: Date? = nil,
        finishedAt: Date? = nil, nextAttemptAt: Date? = nil
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
        self.leaseExpiresAt = leaseExpiresAt
        self.priority = priority ?? options.priority
        self.createdAt = createdAt
        self.startedAt = startedAt
        self.updatedAt = updatedAt ?? createdAt
        self.finishedAt = finishedAt
        self.nextAttemptAt = nextAttemptAt
    }

    public var isRoot: Bool { parentID == nil }
}

/// A progress-only change of a node: what a `report` changes, written without touching the rest of the row.
public struct TaskProgressRecord: Sendable, Hashable {
    public var id: String
    public var progress: Double?
    public var step: String?
    public var updatedAt: Date

    public init(id: String, progress: Double?, step: String?, updatedAt: Date) {
        self.id = id
        self.progress = progress
        self.step = step
        self.updatedAt = updatedAt
    }
}

extension Date {
    /// Milliseconds since the Unix epoch, as stored. A date beyond what 64 bits of milliseconds hold (some 292
    /// million years either way, e.g. "now minus 10¹⁴ days" from a command line) saturates to `Int64.min` or
    /// `Int64.max` instead of trapping; `Date.distantPast` and `distantFuture` fit and keep their order.
    var storedMilliseconds: Int64 {
        let milliseconds = (timeIntervalSince1970 * 1000).rounded()
        // Double(Int64.max) rounds up to 2⁶³, which no Int64 holds; Double(Int64.min) is exactly -2⁶³.
        if milliseconds >= Double(Int64.max) { return .max }
        if milliseconds < Double(Int64.min) { return .min }
        return milliseconds.isNaN ? 0 : Int64(milliseconds)
    }

    init(storedMilliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(storedMilliseconds) / 1000)
    }

    /// This date rounded to the millisecond, as the store keeps it.
    var roundedToMilliseconds: Date {
        Date(storedMilliseconds: storedMilliseconds)
    }

    /// Now, to the millisecond.
    static func currentMillisecond() -> Date {
        Date().roundedToMilliseconds
    }
}
