import Foundation

/// Where tasks live: the persistence API that the executor and `progressctl` use.
///
/// Two implementations pass the same test suite: ``SQLiteTaskStore`` (durable, the default) and ``InMemoryTaskStore``
/// (for tests and for work that need not survive the process). Every method that writes is one transaction: it happens
/// whole or not at all.
public protocol TaskStore: Sendable {
    /// Inserts new tasks with their events.
    ///
    /// - Throws: ``TaskStoreError`` `.conflict` when a task with one of the ids (or a child with the same parent, name
    ///   and occurrence, or a job with the same kind and idempotency key) exists; nothing is written then.
    func insert(_ tasks: [TaskRecord], events: [TaskEvent]) async throws

    /// Writes a batch: whole records (inserted or replaced), progress changes and events.
    ///
    /// With ``TaskBatch/owner`` set, a stored row that another owner holds is left alone, and its id is returned in
    /// ``TaskBatchResult/rejectedTaskIDs``; so are its events.
    func apply(_ batch: TaskBatch) async throws -> TaskBatchResult

    /// Replaces a task's record when its stored status is one of `statuses` and its stored owner is `owner`
    /// (compare-and-set), and appends `events` with it. Returns whether it was written.
    func update(
        _ record: TaskRecord, ifStatusIn statuses: Set<TaskStatus>, ownerIs owner: String?, events: [TaskEvent]
    ) async throws -> Bool

    /// One task, or `nil`.
    func task(id: String) async throws -> TaskRecord?

    /// The task and every node below it, parents before children, siblings in creation order.
    func tree(of id: String) async throws -> [TaskRecord]

    /// Roots matching `query`, newest first.
    func roots(_ query: TaskQuery) async throws -> [TaskRecord]

    /// The history of a task and the nodes below it, oldest first.
    func events(of id: String, after sequence: Int64?, limit: Int) async throws -> [TaskEvent]

    /// The root whose kind and idempotency key are these, if any.
    func root(kind: String, idempotencyKey: String) async throws -> TaskRecord?

    /// Ids that begin with `prefix`, at most `limit` of them.
    func taskIDs(withPrefix prefix: String, limit: Int) async throws -> [String]

    /// Takes roots (and their trees) held by none of the live owners: unowned, or held by one of `fromOwners`, whose
    /// status is one of `statuses` (compare-and-set on owner and status, so a task that finished meanwhile stays as
    /// it is), by priority then age, at most `limit`. With `kinds`, only jobs of those kinds and closure tasks (no
    /// kind) are taken. Returns the claimed roots as they were before the claim.
    func claimRoots(
        heldBy fromOwners: [String?], statuses: Set<TaskStatus>, kinds: Set<String>?, newOwner: String, limit: Int,
        now: Date
    ) async throws -> [TaskRecord]

    /// Gives every node of a root's tree to `newOwner` when the root's status is one of `statuses` and its owner is
    /// `owner` (compare-and-set). Returns whether it did.
    func transferTree(
        of rootID: String, ifStatusIn statuses: Set<TaskStatus>, from owner: String?, to newOwner: String?
    ) async throws -> Bool

    /// Deletes a task, every node below it and their history, when the task's status is one of `statuses`
    /// (compare-and-set: a task that started again meanwhile stays). Returns how many tasks were deleted, or `nil` when
    /// the status check failed.
    func deleteTree(of id: String, ifStatusIn statuses: Set<TaskStatus>) async throws -> Int?

    /// Deletes finished roots (with their trees and history) that finished before `date` and whose status is one of
    /// `statuses`. Returns how many roots were deleted.
    func prune(finishedBefore date: Date, statuses: Set<TaskStatus>) async throws -> Int

    /// Records an owner, or replaces it.
    func saveOwner(_ owner: OwnerRecord) async throws

    /// Every owner recorded.
    func owners() async throws -> [OwnerRecord]

    /// Appends a control request and returns its number.
    func addControlRequest(_ request: ControlRequest) async throws -> Int64

    /// Requests not handled yet that are addressed to `ownerID` (or to no owner when `nil`), oldest first.
    func pendingControlRequests(for ownerID: String?) async throws -> [ControlRequest]

    /// One control request, or `nil`.
    func controlRequest(id: Int64) async throws -> ControlRequest?

    /// Marks a request handled with its outcome.
    func completeControlRequest(id: Int64, outcome: String, at date: Date) async throws

    /// A number that changes whenever another connection commits a change (SQLite's `data_version`); lets a poller
    /// skip its queries when nothing changed.
    func changeCounter() async throws -> Int64

    /// Counts of roots by status and kind, and the oldest pending root.
    func statistics() async throws -> TaskStoreStatistics
}

extension TaskStore {
    /// Deletes a task, every node below it and their history, whatever its status. Returns how many tasks were
    /// deleted.
    public func deleteTree(of id: String) async throws -> Int {
        try await deleteTree(of: id, ifStatusIn: Set(TaskStatus.allCases)) ?? 0
    }
}

/// Which roots to list.
public struct TaskQuery: Sendable, Hashable {
    public var statuses: Set<TaskStatus>?
    public var kind: String?
    /// Roots created at or after this date.
    public var createdSince: Date?
    public var limit: Int
    public var offset: Int

    public init(
        statuses: Set<TaskStatus>? = nil, kind: String? = nil, createdSince: Date? = nil, limit: Int = 50,
        offset: Int = 0
    ) {
        self.statuses = statuses
        self.kind = kind
        self.createdSince = createdSince
        self.limit = limit
        self.offset = offset
    }
}

/// What a batch writes in one transaction.
public struct TaskBatch: Sendable, Hashable {
    /// Whole records, inserted or replaced.
    public var records: [TaskRecord]
    /// New rows, inserted unless a row with the same id, child identity or idempotency key exists: those are left
    /// as they are and reported in ``TaskBatchResult/conflictingTaskIDs`` (the batch goes on).
    public var inserts: [TaskRecord] = []
    /// Changes of stored rows: only the columns that change after creation are written (status, progress, step,
    /// attempt, interruptions, error, result, checkpoint, owner, lease, weight, priority and times), which leaves the
    /// identity columns and their index entries alone. A row that does not exist is reported as rejected.
    public var updates: [TaskRecord] = []
    /// Progress-only changes.
    public var progress: [TaskProgressRecord]
    public var events: [TaskEvent]
    /// When set, only rows held by this owner (or new rows) are written.
    public var owner: String?

    public init(
        records: [TaskRecord] = [], inserts: [TaskRecord] = [], updates: [TaskRecord] = [],
        progress: [TaskProgressRecord] = [], events: [TaskEvent] = [], owner: String? = nil
    ) {
        self.records = records
        self.inserts = inserts
        self.updates = updates
        self.progress = progress
        self.events = events
        self.owner = owner
    }

    public var isEmpty: Bool {
        records.isEmpty && inserts.isEmpty && updates.isEmpty && progress.isEmpty && events.isEmpty
    }
}

/// What a batch did not write.
public struct TaskBatchResult: Sendable, Hashable {
    /// Tasks held by another owner (or gone), left as they were.
    public var rejectedTaskIDs: [String]
    /// New rows not inserted because their identity exists already.
    public var conflictingTaskIDs: [String]

    public init(rejectedTaskIDs: [String] = [], conflictingTaskIDs: [String] = []) {
        self.rejectedTaskIDs = rejectedTaskIDs
        self.conflictingTaskIDs = conflictingTaskIDs
    }
}

/// Counts for `progressctl stats`.
public struct TaskStoreStatistics: Sendable, Hashable, Codable {
    public var rootsByStatus: [String: Int]
    public var rootsByKind: [String: Int]
    public var oldestPendingCreatedAt: Date?
    public var events: Int
    /// Size of the database in bytes (0 for the in-memory store).
    public var databaseBytes: Int64

    public init(
        rootsByStatus: [String: Int] = [:], rootsByKind: [String: Int] = [:], oldestPendingCreatedAt: Date? = nil,
        events: Int = 0, databaseBytes: Int64 = 0
    ) {
        self.rootsByStatus = rootsByStatus
        self.rootsByKind = rootsByKind
        self.oldestPendingCreatedAt = oldestPendingCreatedAt
        self.events = events
        self.databaseBytes = databaseBytes
    }
}
