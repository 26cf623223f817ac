import Foundation
import Synchronization

/// What a store must do for an executor to run jobs on one host: read a task, its tree and a job by its idempotency
/// key; write through ``TaskWriting`` (ids, inserts, the writer's batches, lifecycle changes, claims, hand-offs); and
/// keep the owners' heartbeats (``OwnerRegistry``), by which a restarted executor finds the jobs of the one before
/// it. Eleven requirements (and ``TaskWriting/writerExecutor``, which has a default); with them an executor runs
/// closures, subtasks and jobs with checkpoints, durable steps, retries, timeouts, delays and priorities, pauses and
/// cancels them, and resumes a dead owner's jobs.
///
/// Everything else is a capability the executor asks the store for (`as?`) and does without:
/// - ``ControlRequestQueue``: changes asked of a task another executor holds (progressctl, the console, another
///   executor). Without it such a change is refused with ``ProgressionError/storeCannot(store:action:)``.
/// - ``StoreHousekeeping``: a change counter (without it the executor reads the store, and claims, at each look of
///   its control loop instead of when another process changed it), checkpoints, retention's deletions and the fleet's
///   duties. Without it nothing is deleted (a notice says so at start).
/// - ``FleetStore``: kinds paused fleet-wide, kinds' limits, the kinds other workers registered, the earliest time a
///   delayed job waits for (without it a due job is found by a later claim pass: at the next recovery interval, or
///   the next control look on a store without a change counter), schedules, and forgetting idle dead owners. Without
///   it pausing a kind, a kind's limit and declaring a schedule are refused, and a child job of a kind not registered
///   here is an unknown kind.
/// - ``JobTreeStore``: child jobs, dependencies and signals. Without it they are refused.
/// - ``BroadcastingChanges``: wakes within the process; without it the executor polls.
///
/// The gauges read every capability at once: a store that lacks any records none (a notice says so at start).
///
/// The package's three stores have every capability (``TaskStoreBackend``); `CoreOnlyStoreTests` runs the executor on
/// a store that has none.
package protocol TaskStoreCore: TaskWriting, OwnerRegistry {
    /// One task, or `nil`.
    func task(id: String) async throws -> TaskRecord?

    /// The task and every node below it, parents before children, siblings in creation order.
    func tree(of id: String) async throws -> [TaskRecord]

    /// The root whose kind and idempotency key are these, if any.
    func root(kind: String, idempotencyKey: String) async throws -> TaskRecord?
}

/// The write side of a store: what the executor, its scheduler, progressctl and the benchmark use, and no library user
/// needs: the core an executor runs jobs with (``TaskStoreCore``), and every capability beyond it: requests to change
/// a task held elsewhere (``ControlRequestQueue``), housekeeping (``StoreHousekeeping``), the fleet's kinds and
/// schedules (``FleetStore``) and job trees (``JobTreeStore``). Every method that writes is one transaction: it
/// happens whole or not at all. A store that wraps another implements ``TaskStoreForwarding`` instead of forwarding
/// each method.
package protocol TaskStoreBackend: TaskStore, TaskStoreCore, ControlRequestQueue, StoreHousekeeping, FleetStore,
    JobTreeStore
{}

/// What the executor writes: new tasks, its batches, lifecycle changes, claims.
package protocol TaskWriting: Sendable {
    /// The serial executor the executor's writer should run on (`nil`: one of its own). A store whose calls run on a
    /// serial executor names it, so that the writer's calls into the store run without a thread switch.
    nonisolated var writerExecutor: UnownedSerialExecutor? { get }

    /// Reserves `count` consecutive values of the store's root-id sequence (see ``TaskIdentifier``).
    func reserveIdentifiers(_ count: Int) async throws -> Range<Int64>

    /// Inserts new tasks with their events.
    ///
    /// - Throws: ``TaskStoreError`` `.conflict` when a task with one of the ids (or a child with the same parent, name
    ///   and occurrence, or a job with the same kind and idempotency key) exists; nothing is written then.
    func insert(_ tasks: [TaskRecord], events: [TaskEvent]) async throws

    /// Writes the executor's batch: new rows, changed columns of stored rows, events.
    ///
    /// With ``TaskBatch/owner`` set, a stored row that another owner holds is left alone and its id returned in
    /// ``TaskBatchResult/rejectedTaskIDs``; so are its events (fencing).
    func apply(_ batch: TaskBatch) async throws -> TaskBatchResult

    /// Changes one task through ``TaskLifecycle`` in one transaction that first checks what the caller read: the
    /// status, and the owner (compare-and-set). Cancelling cancels its unfinished descendants too (no event: they are
    /// implied); removing deletes its subtree and history. What the change does is decided once for every store
    /// (``TaskChangeRequest/plan(over:path:)``); a store reads the subtree and carries the plan out.
    ///
    /// - Throws: ``TaskStoreError`` `.notFound`, `.conflict` (the task changed since it was read); the lifecycle's
    ///   ``ProgressionError`` when the change is not allowed. Nothing is written then.
    func change(_ request: TaskChangeRequest) async throws -> TaskChangeResult

    /// Takes unfinished roots held by none of the live owners — unowned, or held by one of ``RootClaim/fromOwners`` —
    /// with a compare-and-set on their owner, by priority then age, at most ``RootClaim/limit``; their trees go with
    /// them. Returns what was claimed, as it was before the claim, except ``ClaimedRoot/tree``: the tree as the claim
    /// left it (with the new owner).
    func claimRoots(_ claim: RootClaim) async throws -> [ClaimedRoot]

    /// Gives every node of a root's tree to `newOwner` when the root's status is one of `statuses` and its owner is
    /// `owner` (compare-and-set). Returns whether it did.
    func transferTree(
        of rootID: String, ifStatusIn statuses: Set<TaskStatus>, from owner: String?, to newOwner: String?
    ) async throws -> Bool
}

/// The executors that hold tasks, with their heartbeats.
package protocol OwnerRegistry: Sendable {
    /// Records an owner, or replaces it.
    func saveOwner(_ owner: OwnerRecord) async throws

    /// Every owner recorded.
    func owners() async throws -> [OwnerRecord]
}

/// Changes asked of tasks that another process holds (progressctl, the console): each is applied by the owner.
package protocol ControlRequestQueue: Sendable {
    /// Appends a control request and returns its number.
    func addControlRequest(_ request: ControlRequest) async throws -> Int64

    /// Requests not handled yet that are addressed to `ownerID`, oldest first.
    func pendingControlRequests(for ownerID: String?) async throws -> [ControlRequest]

    /// One control request, or `nil`.
    func controlRequest(id: Int64) async throws -> ControlRequest?

    /// Marks a request handled with its outcome.
    func completeControlRequest(id: Int64, outcome: String, at date: Date) async throws
}

/// Pruning, change detection and maintenance off the commit path.
package protocol StoreHousekeeping: Sendable {
    /// Deletes (or, with `dryRun`, counts) finished roots that finished before `date` with a status in `statuses`,
    /// with their trees, history, signals and dependencies: at most `limit` of them (those that finished first), in
    /// one transaction. A child job whose parent is still there is kept, and a job that an unfinished job waits for.
    func prune(finishedBefore date: Date, statuses: Set<TaskStatus>, dryRun: Bool, limit: Int?) async throws
        -> PruneResult

    /// Takes the turn of a duty that one executor of the fleet does for all (``RetentionPolicy``'s deletions, the
    /// gauges): when its next turn is due at `now` (or it never ran), or `owner` took the last one (it renews its
    /// turn), moves it to `nextAt` for `owner` and returns `true`; of executors that try at once, one gets `true`.
    func takeDutyTurn(_ duty: String, owner: String, now: Date, nextAt: Date) async throws -> Bool

    /// What ``FleetGauges`` counts: unfinished roots grouped by kind, status, whether they wait and whether they are
    /// due at `now` (from the index of unfinished roots), and failed roots by kind.
    func gaugeCounts(at now: Date) async throws -> (unfinished: [UnfinishedRootGroup], failedByKind: [String: Int])

    /// A number that changes whenever another connection commits a change (SQLite's `data_version`); lets a poller
    /// skip its queries when nothing changed.
    func changeCounter() async throws -> Int64

    /// Housekeeping off the commit path: a WAL checkpoint, a vacuum. A no-op where it means nothing.
    func maintain(_ work: StoreMaintenance) async throws
}

extension TaskWriting {
    package nonisolated var writerExecutor: UnownedSerialExecutor? { nil }
}

extension StoreHousekeeping {
    /// Deletes (or counts) every finished root that matches (``prune(finishedBefore:statuses:dryRun:limit:)`` without
    /// a limit).
    package func prune(finishedBefore date: Date, statuses: Set<TaskStatus>, dryRun: Bool) async throws -> PruneResult {
        try await prune(finishedBefore: date, statuses: statuses, dryRun: dryRun, limit: nil)
    }
}

extension TaskStoreBackend {
    /// Deletes a task, every node below it and their history, whatever its status. Returns how many tasks were
    /// deleted.
    package func deleteTree(of id: String) async throws -> Int {
        guard let record = try await task(id: id) else { return 0 }
        if !record.status.isFinished {
            _ = try await change(TaskChangeRequest(taskID: id, transition: .cancel, requester: .system, at: Date()))
        }
        return try await change(TaskChangeRequest(taskID: id, transition: .remove, requester: .system, at: Date()))
            .deleted
    }
}

/// Housekeeping a store may do.
package enum StoreMaintenance: Sendable, Hashable {
    /// Copies what it can of the write-ahead log into the database without waiting for readers.
    case passiveCheckpoint
    /// Copies the whole log and truncates it, waiting at most `patience` for readers of old frames (writers wait
    /// meanwhile).
    case truncatingCheckpoint(patience: Duration)
    /// Rewrites the database to return free pages to the file system.
    case vacuum
}

/// The columns of a task that change after it is created: what a narrow update writes.
package struct TaskColumns: OptionSet, Sendable, Hashable {
    package let rawValue: UInt32
    package init(rawValue: UInt32) { self.rawValue = rawValue }

    package static let status = TaskColumns(rawValue: 1 << 0)
    package static let progress = TaskColumns(rawValue: 1 << 1)
    package static let step = TaskColumns(rawValue: 1 << 2)
    package static let weight = TaskColumns(rawValue: 1 << 3)
    package static let attempt = TaskColumns(rawValue: 1 << 4)
    package static let interruptions = TaskColumns(rawValue: 1 << 5)
    /// `error_type` and `error_description`.
    package static let error = TaskColumns(rawValue: 1 << 6)
    package static let result = TaskColumns(rawValue: 1 << 7)
    package static let checkpoint = TaskColumns(rawValue: 1 << 8)
    package static let owner = TaskColumns(rawValue: 1 << 9)
    package static let priority = TaskColumns(rawValue: 1 << 10)
    package static let startedAt = TaskColumns(rawValue: 1 << 11)
    package static let updatedAt = TaskColumns(rawValue: 1 << 12)
    package static let finishedAt = TaskColumns(rawValue: 1 << 13)
    package static let nextAttemptAt = TaskColumns(rawValue: 1 << 14)
    package static let total = TaskColumns(rawValue: 1 << 15)
    package static let rate = TaskColumns(rawValue: 1 << 16)
    package static let options = TaskColumns(rawValue: 1 << 17)
    /// `wait`, `waiting_for` and `waiting_progress`: what a root waits for (job trees).
    package static let waiting = TaskColumns(rawValue: 1 << 18)
    /// `share` and `awaited`: how a link counts in its waiting parent.
    package static let link = TaskColumns(rawValue: 1 << 19)
    /// `version`: the version of its kind's code a job began under, written with its first start.
    package static let version = TaskColumns(rawValue: 1 << 20)

    /// Every column that changes after creation.
    package static let all: TaskColumns = [
        .status, .progress, .step, .weight, .attempt, .interruptions, .error, .result, .checkpoint, .owner, .priority,
        .startedAt, .updatedAt, .finishedAt, .nextAttemptAt, .total, .rate, .options, .waiting, .link, .version,
    ]
    /// What a progress report changes.
    package static let report: TaskColumns = [.progress, .step, .updatedAt, .rate, .total]

    /// The columns whose values differ between two versions of a record.
    package static func changed(from old: TaskRecord, to new: TaskRecord) -> TaskColumns {
        var columns: TaskColumns = []
        if old.status != new.status { columns.insert(.status) }
        if old.progress != new.progress { columns.insert(.progress) }
        if old.step != new.step { columns.insert(.step) }
        if old.weight != new.weight { columns.insert(.weight) }
        if old.attempt != new.attempt { columns.insert(.attempt) }
        if old.interruptions != new.interruptions { columns.insert(.interruptions) }
        if old.errorType != new.errorType || old.errorDescription != new.errorDescription { columns.insert(.error) }
        if old.result != new.result { columns.insert(.result) }
        if old.checkpoint != new.checkpoint { columns.insert(.checkpoint) }
        if old.ownerID != new.ownerID { columns.insert(.owner) }
        if old.priority != new.priority { columns.insert(.priority) }
        if old.startedAt != new.startedAt { columns.insert(.startedAt) }
        if old.updatedAt != new.updatedAt { columns.insert(.updatedAt) }
        if old.finishedAt != new.finishedAt { columns.insert(.finishedAt) }
        if old.nextAttemptAt != new.nextAttemptAt { columns.insert(.nextAttemptAt) }
        if old.total != new.total { columns.insert(.total) }
        if old.rate != new.rate { columns.insert(.rate) }
        if old.options != new.options { columns.insert(.options) }
        if old.wait != new.wait || old.waitingFor != new.waitingFor || old.waitingProgress != new.waitingProgress {
            columns.insert(.waiting)
        }
        if old.share != new.share || old.awaited != new.awaited { columns.insert(.link) }
        if old.version != new.version { columns.insert(.version) }
        return columns
    }

    /// Copies these columns from `source` into `target`.
    package func copy(from source: TaskRecord, into target: inout TaskRecord) {
        if contains(.status) { target.status = source.status }
        if contains(.progress) { target.progress = source.progress }
        if contains(.step) { target.step = source.step }
        if contains(.weight) { target.weight = source.weight }
        if contains(.attempt) { target.attempt = source.attempt }
        if contains(.interruptions) { target.interruptions = source.interruptions }
        if contains(.error) {
            target.errorType = source.errorType
            target.errorDescription = source.errorDescription
        }
        if contains(.result) { target.result = source.result }
        if contains(.checkpoint) { target.checkpoint = source.checkpoint }
        if contains(.owner) { target.ownerID = source.ownerID }
        if contains(.priority) { target.priority = source.priority }
        if contains(.startedAt) { target.startedAt = source.startedAt }
        if contains(.updatedAt) { target.updatedAt = source.updatedAt }
        if contains(.finishedAt) { target.finishedAt = source.finishedAt }
        if contains(.nextAttemptAt) { target.nextAttemptAt = source.nextAttemptAt }
        if contains(.total) { target.total = source.total }
        if contains(.rate) { target.rate = source.rate }
        if contains(.options) { target.options = source.options }
        if contains(.waiting) {
            target.wait = source.wait
            target.waitingFor = source.waitingFor
            target.waitingProgress = source.waitingProgress
        }
        if contains(.link) {
            target.share = source.share
            target.awaited = source.awaited
        }
        if contains(.version) { target.version = source.version }
    }
}

/// A change of a stored row: the record as it is now, and which of its columns to write.
package struct TaskUpdate: Sendable, Hashable {
    package var record: TaskRecord
    package var columns: TaskColumns
    /// A root that no owner holds in the store (a job queued in memory, which any worker may claim): written only
    /// while it is still unowned with this status, instead of the batch owner's fencing. Its start takes it.
    package var unownedWithStatus: TaskStatus?

    package init(_ record: TaskRecord, columns: TaskColumns, unownedWithStatus: TaskStatus? = nil) {
        self.record = record
        self.columns = columns
        self.unownedWithStatus = unownedWithStatus
    }
}

/// What the executor's writer stores in one transaction.
package struct TaskBatch: Sendable, Hashable {
    /// New rows, inserted unless a row with the same id, child identity or idempotency key exists: those are left as
    /// they are and reported in ``TaskBatchResult/conflictingTaskIDs`` (the batch goes on).
    package var inserts: [TaskRecord]
    /// Changes of stored rows (only their ``TaskUpdate/columns``). A row that does not exist, or that another owner
    /// holds, is reported as rejected.
    package var updates: [TaskUpdate]
    package var events: [TaskEvent]
    /// When set, only rows held by this owner (or new rows) are written.
    package var owner: String?
    /// Work for the tree keeper that the writer knows of (a parent's end, pause or resume to carry to its children, a
    /// job that began to wait), queued with the batch. The store adds what it finds itself
    /// (``impliedTreeChanges(written:)``).
    package var treeChanges: [TreeChange]

    package init(
        inserts: [TaskRecord] = [], updates: [TaskUpdate] = [], events: [TaskEvent] = [], owner: String? = nil,
        treeChanges: [TreeChange] = []
    ) {
        self.inserts = inserts
        self.updates = updates
        self.events = events
        self.owner = owner
        self.treeChanges = treeChanges
    }

    /// Whole records written over stored rows (every changeable column): for tests and tools.
    package init(records: [TaskRecord], events: [TaskEvent] = [], owner: String? = nil) {
        self.init(updates: records.map { TaskUpdate($0, columns: .all) }, events: events, owner: owner)
    }

    package var isEmpty: Bool { inserts.isEmpty && updates.isEmpty && events.isEmpty && treeChanges.isEmpty }
}

/// What a batch did not write.
package struct TaskBatchResult: Sendable, Hashable {
    /// Tasks held by another owner (or gone), left as they were.
    package var rejectedTaskIDs: [String]
    /// New rows not inserted because their identity exists already.
    package var conflictingTaskIDs: [String]

    package init(rejectedTaskIDs: [String] = [], conflictingTaskIDs: [String] = []) {
        self.rejectedTaskIDs = rejectedTaskIDs
        self.conflictingTaskIDs = conflictingTaskIDs
    }
}

/// A lifecycle change of one stored task, with what the caller read (compare-and-set).
package struct TaskChangeRequest: Sendable, Hashable {
    package var taskID: String
    package var transition: TaskLifecycle.Transition
    package var requester: TaskChangeRequester
    /// The status the caller read; `nil`: not checked.
    package var expectedStatus: TaskStatus?
    /// Whether the owner is checked, and the owner the caller read (`nil` inside: unowned).
    package var checksOwner: Bool
    package var expectedOwner: String?
    /// The event's message.
    package var message: String?
    package var at: Date

    package init(
        taskID: String, transition: TaskLifecycle.Transition, requester: TaskChangeRequester,
        expectedStatus: TaskStatus? = nil, checksOwner: Bool = false, expectedOwner: String? = nil,
        message: String? = nil, at: Date
    ) {
        self.taskID = taskID
        self.transition = transition
        self.requester = requester
        self.expectedStatus = expectedStatus
        self.checksOwner = checksOwner
        self.expectedOwner = expectedOwner
        self.message = message
        self.at = at
    }

    /// Checks a stored row against what the caller read and applies the transition to it; returns the event.
    ///
    /// - Throws: ``TaskStoreError`` `.conflict` when the row changed; the lifecycle's refusal.
    package func applied(to record: inout TaskRecord, path: String?) throws -> TaskEvent? {
        if let expectedStatus, record.status != expectedStatus {
            throw TaskStoreError(
                .conflict, path: path,
                message: "task '\(taskID)' changed meanwhile: it is \(record.status) now, not \(expectedStatus)")
        }
        if checksOwner, record.ownerID != expectedOwner {
            throw TaskStoreError(
                .conflict, path: path,
                message: "task '\(taskID)' changed meanwhile: it is held by "
                    + "\(record.ownerID.map { "owner '\($0)'" } ?? "no owner") now")
        }
        return try TaskLifecycle.apply(transition, to: &record, now: at, by: requester, message: message)
    }
}

/// What a change does to the stored subtree of its task, decided once for every store: each store reads the subtree
/// (the task first, then its descendants in tree order) in its transaction and carries the plan out there, so the
/// checks, the lifecycle, the cascade to descendants and the result are written once (``TaskChangeRequest/plan(over:path:)``).
package enum TaskChangePlan: Sendable {
    /// A removal: delete `nodes` (the subtree, in tree order) and their history.
    case delete(_ nodes: [TaskRecord], TaskChangeResult)
    /// Write `batch`: the task's changed columns, its descendants' (cancelled with it, or run now), and its event.
    case write(TaskBatch, TaskChangeResult)

    package var result: TaskChangeResult {
        switch self {
        case .delete(_, let result), .write(_, let result): result
        }
    }
}

extension TaskChangeRequest {
    /// Plans this change over the stored subtree of its task (`nodes`: the task first, then its descendants in tree
    /// order).
    ///
    /// - Throws: ``TaskStoreError`` `notFound` (no task) or `conflict` (it changed since it was read);
    ///   ``ProgressionError``: the lifecycle's refusal.
    package func plan(over nodes: [TaskRecord], path: String?) throws -> TaskChangePlan {
        guard let before = nodes.first else {
            throw TaskStoreError(.notFound, path: path, message: "no task with id '\(taskID)'")
        }
        var after = before
        let event = try applied(to: &after, path: path)
        if case .remove = transition {
            return .delete(nodes, TaskChangeResult(before: before, after: nil, deleted: nodes.count))
        }
        // Descendants of a cancelled task end with it; a job run now stops sleeping.
        let cascade = try TaskUpdate.cascade(of: transition, over: nodes.dropFirst(), at: at)
        let updates = [TaskUpdate(after, columns: TaskColumns.changed(from: before, to: after))] + cascade
        // A job with child jobs: its end, pause or resume reaches them (the tree keeper carries it out).
        var treeChanges: [TreeChange] = []
        if before.isRoot, nodes.contains(where: \.isLink),
            let action = TreeChange.cascade(from: before.status, to: after.status)
        {
            treeChanges.append(TreeChange(before.id, action))
        }
        return .write(
            TaskBatch(updates: updates, events: event.map { [$0] } ?? [], treeChanges: treeChanges),
            TaskChangeResult(before: before, after: after, cascaded: cascade.count))
    }
}

/// What a change did.
package struct TaskChangeResult: Sendable, Hashable {
    /// The task before the change.
    package var before: TaskRecord
    /// The task after it; `nil` once removed.
    package var after: TaskRecord?
    /// Descendants cancelled with it.
    package var cascaded: Int
    /// Tasks deleted (a removal).
    package var deleted: Int

    package init(before: TaskRecord, after: TaskRecord?, cascaded: Int = 0, deleted: Int = 0) {
        self.before = before
        self.after = after
        self.cascaded = cascaded
        self.deleted = deleted
    }
}

/// Which roots to claim: pending or running ones (not paused) whose time has come, of kinds that are not paused and
/// whose limit leaves room.
package struct RootClaim: Sendable, Hashable {
    /// Owners whose roots may be taken; `nil` in the list: unowned roots.
    package var fromOwners: [String?]
    /// With a set, only jobs of those kinds and closure tasks (no kind) are taken.
    package var kinds: Set<String>?
    package var newOwner: String
    package var limit: Int
    /// Roots waiting for a later time are left.
    package var now: Date
    /// The heartbeat by which each of these owners was judged dead. The store reads the owners' heartbeats again in
    /// the claim's transaction (locking their rows where it can) and leaves out an owner whose heartbeat has moved
    /// since: it wrote one between the judgement and the claim, so it is alive. An owner not in it, or no longer in
    /// the owners table, is taken as judged.
    package var judgedHeartbeats: [String: Date]
    /// Whether the claimer loads the claimed trees at once (an executor does): a store that can read them in the
    /// claim for less than a read of each afterwards returns them (``ClaimedRoot/tree``).
    package var readsTrees: Bool
    /// The claimer's versions of the kinds that declare one (``JobVersion``): a root whose version the claimer cannot
    /// continue is left when its kind says ``JobVersion/Otherwise/leave`` (taken otherwise: the claimer fails it).
    package var versions: [String: JobVersion]
    /// The starts the claim may write in its transaction (an executor's claim), or `nil`. A store that reads claimed
    /// trees (``readsTrees``) writes them; any other ignores them (the executor starts what it claimed itself).
    package var starts: ClaimStarts?

    package init(
        fromOwners: [String?], kinds: Set<String>?, newOwner: String, limit: Int, now: Date = .distantFuture,
        judgedHeartbeats: [String: Date] = [:], readsTrees: Bool = false, versions: [String: JobVersion] = [:],
        starts: ClaimStarts? = nil
    ) {
        self.versions = versions
        self.starts = starts
        self.fromOwners = fromOwners
        self.kinds = kinds
        self.newOwner = newOwner
        self.limit = limit
        self.now = now
        self.judgedHeartbeats = judgedHeartbeats
        self.readsTrees = readsTrees
    }

    /// The kinds whose roots the claim takes only when their version is one of `accepted` (or none), by kind name:
    /// those whose version says ``JobVersion/Otherwise/leave``. Each store writes this as a condition of its read.
    package var versionsLeft: [(kind: String, accepted: [String])] {
        versions.filter { $0.value.otherwise == .leave }.sorted { $0.key < $1.key }.map { kind, version in
            (kind, ([version.name] + version.continues).sorted())
        }
    }

    /// Whether the claim may take a root of `kind` that recorded `version` (the in-memory store's form of
    /// ``versionsLeft``).
    package func mayTake(kind: String?, version: String?) -> Bool {
        guard let kind, let declared = versions[kind], declared.otherwise == .leave else { return true }
        return declared.canContinue(version)
    }

    /// The owners whose heartbeats the store must read again in the claim's transaction.
    package var judgedOwners: [String] {
        fromOwners.compactMap { $0 }.filter { judgedHeartbeats[$0] != nil }
    }

    /// `fromOwners` without those whose heartbeat, read in the claim's transaction (`current`), is not the one they
    /// were judged dead by. Compared at the store's precision (milliseconds).
    package func ownersStillDead(current: [String: Date]) -> [String?] {
        fromOwners.filter { owner in
            guard let owner, let judged = judgedHeartbeats[owner], let now = current[owner] else { return true }
            return now.storedMilliseconds == judged.storedMilliseconds
        }
    }
}

/// The starts an executor's claim writes in its own transaction, so that a job it takes runs without a commit of its
/// start first (a commit, and a wake of the writer, less per job).
///
/// A root is started by the claim when the claim took it from no owner, it has no subtasks, it is pending and due (not
/// a retry, nor waiting for children, jobs or a signal), it is of a kind the claimer runs, with its kind's options, and
/// a version the claimer can continue, and the claimer has a slot for it. Its start is the one the executor would write (``TaskLifecycle`` `.start`, the version
/// its kind's code begins under, the `started` event), written with the claim, so that it is committed before the
/// job's code runs or anyone is shown it running, as every start is.
package final class ClaimStarts: Sendable, Hashable {
    /// The kinds the claimer runs.
    package let kinds: Set<String>
    /// The claimer's versions of the kinds that declare one.
    package let versions: [String: JobVersion]
    /// The time the starts are written at: read when the first is made (in the claim's transaction, after its reads
    /// and locks, so that a slow claim does not date its starts back), the same for all of them.
    package var now: Date {
        taken.withLock { taken in
            if let fixed = taken.now { return fixed }
            let now = clock()
            taken.now = now
            return now
        }
    }
    private let clock: @Sendable () -> Date
    /// Takes a slot of the claimer for the root with this id and kind; `false`: none is free, or the claimer holds
    /// that root in memory already, or pauses its kind (it is not started by the claim).
    private let slot: @Sendable (String, String) -> Bool
    /// Gives the claimer back slots taken for starts that were not written (``giveBack(_:)``).
    private let giveBackSlots: @Sendable (Int) -> Void
    /// Slots taken, and whether the claimer has stopped counting them (``close()``): a claim that went on after its
    /// caller gave up (a call's deadline) takes no more.
    private let taken = Mutex((count: 0, closed: false, now: Date?.none, nextWaiting: Date??.none))

    package init(
        kinds: Set<String>, versions: [String: JobVersion], clock: @escaping @Sendable () -> Date,
        takeSlot: @escaping @Sendable (String, String) -> Bool, giveBack: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.kinds = kinds
        self.versions = versions
        self.clock = clock
        slot = takeSlot
        giveBackSlots = giveBack
    }

    /// Gives back the slots of `count` starts that ``start(_:owner:)`` made and the store did not write (a root it
    /// found with subtasks in the statement that writes the starts), so that the claimer counts them free again before
    /// the claim returns: it shares its free slots among the roots the claim took and did not start. Once the claimer
    /// has closed the claim (``close()``), its count of slots taken is final, and this gives back nothing.
    package func giveBack(_ count: Int) {
        let given = taken.withLock { taken -> Int in
            guard !taken.closed else { return 0 }
            let given = min(max(0, count), taken.count)
            taken.count -= given
            return given
        }
        if given > 0 { giveBackSlots(given) }
    }

    /// How many slots the claim took (one per root it started, unless its transaction failed after).
    package var slotsTaken: Int { taken.withLock { $0.count } }

    /// The earliest time at which a root the claim left waits to run (a run-at, a retry's backoff, a durable sleep),
    /// when the store read it in the claim's transaction (``noteNextWaitingTime(_:)``): `.some(nil)` when none waits,
    /// `nil` when the store did not read it (the claimer asks the store, ``FleetStore/nextWaitingTime(after:)``). Read
    /// in the claim, it costs the claimer no call of its own to the store, which would hold the store's queue while
    /// the jobs the claim started run and their ends wait to be written.
    package var nextWaitingTime: Date?? { taken.withLock { $0.nextWaiting } }

    /// Records what ``nextWaitingTime`` says: the earliest `next_attempt_at` after the claim's `now` of the unfinished,
    /// pending roots, as ``FleetStore/nextWaitingTime(after:)`` reads it.
    package func noteNextWaitingTime(_ date: Date?) {
        taken.withLock { $0.nextWaiting = .some(date) }
    }

    /// Ends the claim's starts and returns how many slots they took: a start asked after this is not made.
    package func close() -> Int {
        taken.withLock { taken in
            taken.closed = true
            return taken.count
        }
    }

    /// The start of `root` for `owner`, when the claim starts it: the started record, and the batch that writes it.
    /// `root` is the stored row after the claim took it from no owner, and its whole tree (a store asks only for a
    /// root without subtasks). A slot is taken for each start returned.
    package func start(_ root: TaskRecord, owner: String) -> (record: TaskRecord, batch: TaskBatch)? {
        // A retry's start begins a new attempt first, and a job that waits for its children, jobs or a signal is
        // released by the tree keeper: both are left to the executor.
        guard root.isRoot, root.ownerID == owner, root.status == .pending, root.wait == nil,
            root.waitReason != .retry, root.nextAttemptAt.map({ $0 <= self.now }) ?? true,
            root.options.givenFields == nil, let kind = root.kind, kinds.contains(kind),
            versions[kind]?.canContinue(root.version) ?? true
        else { return nil }
        var record = root
        let now = self.now
        guard let event = try? TaskLifecycle.apply(.start, to: &record, now: now, by: .system) else { return nil }
        if root.startedAt == nil, record.version == nil, let version = versions[kind] { record.version = version.name }
        let took = taken.withLock { taken in
            guard !taken.closed, slot(root.id, kind) else { return false }
            taken.count += 1
            return true
        }
        guard took else { return nil }
        let update = TaskUpdate(record, columns: TaskColumns.changed(from: root, to: record).union(.updatedAt))
        return (record, TaskBatch(updates: [update], events: [event], owner: owner))
    }

    package static func == (lhs: ClaimStarts, rhs: ClaimStarts) -> Bool { lhs === rhs }

    package func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// A claimed root, as it was before the claim: enough to queue it without loading its tree.
package struct ClaimedRoot: Sendable, Hashable {
    package var id: String
    package var status: TaskStatus
    package var kind: String?
    package var priority: Int
    package var createdAt: Date
    package var nextAttemptAt: Date?
    package var previousOwner: String?
    /// The root's whole tree as the claim committed it, when the store read it in the claim (a root with no subtasks,
    /// on PostgreSQL, where each read is a round trip); `nil`: the executor reads it after the claim.
    package var tree: [TaskRecord]?
    /// Whether the claim started it (``ClaimStarts``): ``tree`` is then the started root, committed.
    package var started = false

    package init(
        id: String, status: TaskStatus, kind: String?, priority: Int, createdAt: Date, nextAttemptAt: Date?,
        previousOwner: String?, tree: [TaskRecord]? = nil
    ) {
        self.id = id
        self.status = status
        self.kind = kind
        self.priority = priority
        self.createdAt = createdAt
        self.nextAttemptAt = nextAttemptAt
        self.previousOwner = previousOwner
        self.tree = tree
    }
}

/// What a prune did (or, on a dry run, would do).
package struct PruneResult: Sendable, Hashable, Codable {
    package var roots: Int
    package var tasks: Int

    package init(roots: Int, tasks: Int) {
        self.roots = roots
        self.tasks = tasks
    }
}
