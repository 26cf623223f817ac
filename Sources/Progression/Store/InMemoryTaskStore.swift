import Foundation

/// A ``TaskStore`` in memory: the same rules as ``SQLiteTaskStore`` (identities, constraints, compare-and-set, whole
/// transactions), nothing durable. For tests, and for work that need not outlive the process.
public actor InMemoryTaskStore: TaskStore {
    private struct State {
        var tasks: [String: TaskRecord] = [:]
        /// Insertion order, for stable listings.
        var sequence: [String: Int] = [:]
        var nextSequence = 0
        var events: [TaskEvent] = []
        var owners: [String: OwnerRecord] = [:]
        var controls: [ControlRequest] = []
        var changes: Int64 = 0
        /// Indexes, as the SQLite schema has them: child identity, idempotency key, nodes of each root.
        var children: [ChildKey: String] = [:]
        var idempotency: [String: String] = [:]
        var byRoot: [String: Set<String>] = [:]
        /// Children written in the running transaction, whose parent must exist when it commits (a deferred key).
        var parentChecks: [TaskRecord] = []
        /// The tasks the running transaction touched, as they were before it (`nil`: absent): its undo log.
        var journal: [String: (record: TaskRecord?, sequence: Int?)] = [:]

        /// Notes a task's state before the running transaction first changes it.
        mutating func remember(_ id: String) {
            if journal[id] == nil { journal[id] = (tasks[id], sequence[id]) }
        }

        mutating func remove(_ id: String) {
            remember(id)
            guard let task = tasks.removeValue(forKey: id) else { return }
            sequence[id] = nil
            if let parent = task.parentID { children[ChildKey(parent: parent, name: task.name, occurrence: task.occurrence)] = nil }
            if let kind = task.kind, let key = task.idempotencyKey { idempotency[kind + "\u{0}" + key] = nil }
            byRoot[task.rootID]?.remove(id)
            if byRoot[task.rootID]?.isEmpty == true { byRoot[task.rootID] = nil }
        }
    }

    private struct ChildKey: Hashable {
        var parent: String
        var name: String
        var occurrence: Int
    }

    private var state = State()

    public init() {}

    // MARK: Writing

    public func insert(_ tasks: [TaskRecord], events: [TaskEvent]) throws {
        try transaction { state in
            for task in tasks {
                guard state.tasks[task.id] == nil else {
                    throw TaskStoreError(.conflict, message: "a task with id '\(task.id)' exists")
                }
                try Self.put(task, into: &state)
            }
            try Self.append(events, to: &state)
        }
    }

    public func apply(_ batch: TaskBatch) throws -> TaskBatchResult {
        try transaction { state in
            var rejected: [String] = []
            var conflicting: [String] = []
            for record in batch.inserts {
                if state.tasks[record.id] != nil {
                    conflicting.append(record.id)
                    continue
                }
                do {
                    try Self.put(record, into: &state)
                } catch let error as TaskStoreError where error.reason == .conflict {
                    conflicting.append(record.id)
                }
            }
            for record in batch.records {
                if let owner = batch.owner, let stored = state.tasks[record.id], stored.ownerID != owner {
                    rejected.append(record.id)
                    continue
                }
                try Self.put(record, into: &state)
            }
            for update in batch.updates {
                guard var stored = state.tasks[update.id], batch.owner == nil || stored.ownerID == batch.owner else {
                    rejected.append(update.id)
                    continue
                }
                stored.status = update.status
                stored.progress = update.progress
                stored.step = update.step
                stored.weight = update.weight
                stored.attempt = update.attempt
                stored.interruptions = update.interruptions
                stored.errorType = update.errorType
                stored.errorDescription = update.errorDescription
                stored.result = update.result
                stored.checkpoint = update.checkpoint
                stored.ownerID = update.ownerID
                stored.leaseExpiresAt = update.leaseExpiresAt
                stored.priority = update.priority
                stored.startedAt = update.startedAt
                stored.updatedAt = update.updatedAt
                stored.finishedAt = update.finishedAt
                stored.nextAttemptAt = update.nextAttemptAt
                try Self.put(stored, into: &state)
            }
            for change in batch.progress {
                guard var stored = state.tasks[change.id], batch.owner == nil || stored.ownerID == batch.owner else {
                    rejected.append(change.id)
                    continue
                }
                stored.progress = change.progress
                stored.step = change.step
                stored.updatedAt = change.updatedAt
                try Self.put(stored, into: &state)
            }
            let skipped = Set(rejected + conflicting)
            try Self.append(batch.events.filter { !skipped.contains($0.taskID) }, to: &state)
            return TaskBatchResult(rejectedTaskIDs: rejected, conflictingTaskIDs: conflicting)
        }
    }

    public func update(
        _ record: TaskRecord, ifStatusIn statuses: Set<TaskStatus>, ownerIs owner: String?, events: [TaskEvent]
    ) throws -> Bool {
        try transaction { state in
            guard let stored = state.tasks[record.id], statuses.contains(stored.status), stored.ownerID == owner else {
                return false
            }
            try Self.put(record, into: &state)
            try Self.append(events, to: &state)
            return true
        }
    }

    public func claimRoots(
        heldBy fromOwners: [String?], statuses: Set<TaskStatus>, kinds: Set<String>?, newOwner: String, limit: Int,
        now: Date
    ) throws -> [TaskRecord] {
        try transaction { state in
            let claimed = state.tasks.values
                .filter { $0.isRoot && statuses.contains($0.status) && fromOwners.contains($0.ownerID) }
                .filter { task in kinds.map { kinds in task.kind.map(kinds.contains) ?? true } ?? true }
                .sorted { left, right in
                    if left.priority != right.priority { return left.priority > right.priority }
                    return (left.createdAt, left.id) < (right.createdAt, right.id)
                }
                .prefix(max(0, limit))
            let roots = Set(claimed.map(\.id))
            for root in roots {
                for id in state.byRoot[root] ?? [] {
                    state.remember(id)
                    state.tasks[id]?.ownerID = newOwner
                }
            }
            return Array(claimed)
        }
    }

    public func transferTree(
        of rootID: String, ifStatusIn statuses: Set<TaskStatus>, from owner: String?, to newOwner: String?
    ) throws -> Bool {
        try transaction { state in
            guard let root = state.tasks[rootID], root.isRoot, statuses.contains(root.status), root.ownerID == owner else {
                return false
            }
            for id in state.byRoot[rootID] ?? [] {
                state.remember(id)
                state.tasks[id]?.ownerID = newOwner
            }
            return true
        }
    }

    public func deleteTree(of id: String, ifStatusIn statuses: Set<TaskStatus>) throws -> Int? {
        try transaction { state in
            let nodes = Self.subtree(of: id, in: state)
            if let top = nodes.first, !statuses.contains(top.status) { return nil }
            let ids = Set(nodes.map(\.id))
            for id in ids { state.remove(id) }
            state.events.removeAll { ids.contains($0.taskID) }
            return nodes.count
        }
    }

    public func prune(finishedBefore date: Date, statuses: Set<TaskStatus>) throws -> Int {
        try transaction { state in
            let roots = Set(
                state.tasks.values.filter {
                    $0.isRoot && $0.status.isFinished && statuses.contains($0.status)
                        && ($0.finishedAt.map { $0.storedMilliseconds < date.storedMilliseconds } ?? false)
                }.map(\.id))
            for root in roots {
                for id in state.byRoot[root] ?? [] { state.remove(id) }
            }
            state.events.removeAll { roots.contains($0.rootID) }
            return roots.count
        }
    }

    public func saveOwner(_ owner: OwnerRecord) throws {
        try transaction { state in
            var owner = owner
            owner.startedAt = owner.startedAt.roundedToMilliseconds
            owner.heartbeatAt = owner.heartbeatAt.roundedToMilliseconds
            owner.stoppedAt = owner.stoppedAt?.roundedToMilliseconds
            state.owners[owner.id] = owner
        }
    }

    public func addControlRequest(_ request: ControlRequest) throws -> Int64 {
        try transaction { state in
            var request = request
            request.id = Int64(state.controls.count + 1)
            request.requestedAt = request.requestedAt.roundedToMilliseconds
            request.handledAt = request.handledAt?.roundedToMilliseconds
            state.controls.append(request)
            return request.id
        }
    }

    public func completeControlRequest(id: Int64, outcome: String, at date: Date) throws {
        try transaction { state in
            guard let index = state.controls.firstIndex(where: { $0.id == id }) else { return }
            state.controls[index].handledAt = date.roundedToMilliseconds
            state.controls[index].outcome = outcome
        }
    }

    // MARK: Reading

    public func task(id: String) -> TaskRecord? {
        state.tasks[id]
    }

    public func tree(of id: String) -> [TaskRecord] {
        Self.subtree(of: id, in: state)
    }

    public func roots(_ query: TaskQuery) -> [TaskRecord] {
        state.tasks.values
            .filter { task in
                task.isRoot && (query.statuses?.contains(task.status) ?? true)
                    && (query.kind.map { task.kind == $0 } ?? true)
                    && (query.createdSince.map { task.createdAt.storedMilliseconds >= $0.storedMilliseconds } ?? true)
            }
            .sorted { ($1.createdAt, $1.id) < ($0.createdAt, $0.id) }
            .dropFirst(max(0, query.offset))
            .prefix(max(0, query.limit))
            .map { $0 }
    }

    public func events(of id: String, after sequence: Int64?, limit: Int) -> [TaskEvent] {
        let ids = Set(Self.subtree(of: id, in: state).map(\.id))
        return Array(
            state.events.lazy.filter { ids.contains($0.taskID) && ($0.sequence ?? 0) > (sequence ?? 0) }.prefix(limit))
    }

    public func root(kind: String, idempotencyKey: String) -> TaskRecord? {
        state.idempotency[kind + "\u{0}" + idempotencyKey].flatMap { state.tasks[$0] }
    }

    public func taskIDs(withPrefix prefix: String, limit: Int) -> [String] {
        Array(state.tasks.keys.filter { $0.hasPrefix(prefix) }.sorted().prefix(limit))
    }

    public func owners() -> [OwnerRecord] {
        state.owners.values.sorted { ($0.startedAt, $0.id) < ($1.startedAt, $1.id) }
    }

    public func pendingControlRequests(for ownerID: String?) -> [ControlRequest] {
        state.controls.filter { $0.handledAt == nil && $0.ownerID == ownerID }
    }

    public func controlRequest(id: Int64) -> ControlRequest? {
        state.controls.first { $0.id == id }
    }

    public func changeCounter() -> Int64 {
        state.changes
    }

    public func statistics() -> TaskStoreStatistics {
        var statistics = TaskStoreStatistics()
        for task in state.tasks.values where task.isRoot {
            statistics.rootsByStatus[task.status.rawValue, default: 0] += 1
            statistics.rootsByKind[task.kind ?? "", default: 0] += 1
            if task.status == .pending {
                statistics.oldestPendingCreatedAt = min(statistics.oldestPendingCreatedAt ?? task.createdAt, task.createdAt)
            }
        }
        statistics.events = state.events.count
        return statistics
    }

    // MARK: Rules

    /// Runs `body` as a transaction: when it throws, the tasks it touched are put back as they were (an undo log,
    /// so that a transaction costs what it changes, not the size of the store), and the events it added removed.
    private func transaction<T>(_ body: (inout State) throws -> T) throws -> T {
        let eventCount = state.events.count
        let controlCount = state.controls.count
        let owners = state.owners
        state.journal.removeAll(keepingCapacity: true)
        state.parentChecks.removeAll(keepingCapacity: true)
        do {
            let value = try body(&state)
            for task in state.parentChecks where state.tasks[task.id] != nil {
                guard let parent = task.parentID, state.tasks[parent] != nil else {
                    throw TaskStoreError(
                        .constraint, message: "parent '\(task.parentID ?? "")' of '\(task.id)' does not exist")
                }
            }
            state.journal.removeAll(keepingCapacity: true)
            state.changes += 1
            return value
        } catch {
            let journal = state.journal
            state.journal.removeAll()
            for (id, before) in journal {
                state.remove(id)
                state.sequence[id] = before.sequence
                if let record = before.record { Self.index(record, into: &state) }
            }
            state.journal.removeAll()
            if state.events.count > eventCount { state.events.removeSubrange(eventCount...) }
            if state.controls.count > controlCount { state.controls.removeSubrange(controlCount...) }
            state.owners = owners
            throw error
        }
    }

    /// Stores a record after checking what the SQLite schema checks.
    private static func put(_ task: TaskRecord, into state: inout State) throws {
        func fail(_ message: String) -> TaskStoreError { TaskStoreError(.constraint, message: message) }
        if let progress = task.progress, !(progress >= 0 && progress <= 1) {
            throw fail("progress \(progress) of '\(task.id)' is outside 0...1")
        }
        guard task.weight > 0 else { throw fail("weight of '\(task.id)' must be positive") }
        guard task.attempt >= 1, task.interruptions >= 0, task.occurrence >= 0 else {
            throw fail("attempt, interruptions or occurrence of '\(task.id)' out of range")
        }
        guard (task.parentID == nil) == (task.rootID == task.id) else {
            throw fail("root id of '\(task.id)' does not match its parent")
        }
        guard task.status.isFinished == (task.finishedAt != nil) else {
            throw fail("finished time of '\(task.id)' does not match its status \(task.status)")
        }
        if let parentID = task.parentID {
            let key = ChildKey(parent: parentID, name: task.name, occurrence: task.occurrence)
            if let twin = state.children[key], twin != task.id {
                throw TaskStoreError(
                    .conflict, message: "'\(parentID)' has a child '\(task.name)' #\(task.occurrence) already")
            }
            state.parentChecks.append(task)
        }
        if let kind = task.kind, let key = task.idempotencyKey, let twin = state.idempotency[kind + "\u{0}" + key],
            twin != task.id
        {
            throw TaskStoreError(.conflict, message: "a '\(kind)' job with idempotency key '\(key)' exists")
        }
        // A replaced record may have moved in the indexes; it keeps its place in the insertion order.
        let place = state.sequence[task.id]
        state.remove(task.id)
        state.sequence[task.id] = place
        var task = task
        task.createdAt = task.createdAt.roundedToMilliseconds
        task.updatedAt = task.updatedAt.roundedToMilliseconds
        task.startedAt = task.startedAt?.roundedToMilliseconds
        task.finishedAt = task.finishedAt?.roundedToMilliseconds
        task.nextAttemptAt = task.nextAttemptAt?.roundedToMilliseconds
        task.leaseExpiresAt = task.leaseExpiresAt?.roundedToMilliseconds
        if state.sequence[task.id] == nil {
            state.sequence[task.id] = state.nextSequence
            state.nextSequence += 1
        }
        index(task, into: &state)
    }

    /// Stores a record and its index entries.
    private static func index(_ task: TaskRecord, into state: inout State) {
        state.tasks[task.id] = task
        if let parent = task.parentID {
            state.children[ChildKey(parent: parent, name: task.name, occurrence: task.occurrence)] = task.id
        }
        if let kind = task.kind, let key = task.idempotencyKey { state.idempotency[kind + "\u{0}" + key] = task.id }
        state.byRoot[task.rootID, default: []].insert(task.id)
    }

    private static func append(_ events: [TaskEvent], to state: inout State) throws {
        for var event in events {
            if let progress = event.progress, !(progress >= 0 && progress <= 1) {
                throw TaskStoreError(.constraint, message: "event progress \(progress) is outside 0...1")
            }
            guard event.attempt >= 1 else { throw TaskStoreError(.constraint, message: "event attempt must be ≥ 1") }
            // As SQLite's rowid: one more than the largest kept.
            event.sequence = (state.events.last?.sequence ?? 0) + 1
            event.at = event.at.roundedToMilliseconds
            state.events.append(event)
        }
    }

    private static func subtree(of id: String, in state: State) -> [TaskRecord] {
        guard let top = state.tasks[id] else { return [] }
        let nodes = (state.byRoot[top.rootID] ?? []).compactMap { state.tasks[$0] }
        return TaskTreeOrder.subtree(of: id, in: nodes)
    }
}
