import Foundation
import ProgressionSQLite

/// A ``TaskStore`` in memory: the same rules as ``SQLiteTaskStore`` (identities, constraints, compare-and-set, whole
/// transactions), nothing durable. For tests, and for work that need not outlive the process.
public actor InMemoryTaskStore: TaskStoreBackend, BroadcastingChanges {
    private struct State {
        var tasks: [String: TaskRecord] = [:]
        /// Insertion order, for stable listings.
        var sequence: [String: Int] = [:]
        var nextSequence = 0
        var events: [TaskEvent] = []
        var owners: [String: OwnerRecord] = [:]
        var controls: [ControlRequest] = []
        var changes: Int64 = 0
        /// Job kinds executors registered, the paused ones, and schedules.
        var kinds: [String: StoredKind] = [:]
        var pausedKinds: [String: Date] = [:]
        var schedules: [String: ScheduleRecord] = [:]
        /// The root-id sequence (see ``TaskIdentifier``).
        var nextIdentifier = Int64.random(in: 0..<(1 << 38))
        /// Indexes, as the SQLite schema has them: child identity, idempotency key, nodes of each root.
        var children: [ChildKey: String] = [:]
        var idempotency: [String: String] = [:]
        var byRoot: [String: Set<String>] = [:]
        /// Roots not finished (pending, running, paused), as SQLite's partial index of waiting roots: what a claim, the
        /// next waiting time and the owners that hold work read, without a scan of every task kept.
        var unfinishedRoots: Set<String> = []
        /// Job trees: the link of each child job, dependencies, signals, and the tree keeper's queue (in order).
        var links: [String: String] = [:]
        var dependencies: [JobDependency] = []
        var signals: [JobSignalRecord] = []
        var treeQueue: [TreeChange] = []
        /// When each fleet duty's next turn is due.
        var duties: [String: (next: Date, owner: String)] = [:]
        /// The tasks the running transaction touched, as they were before each change (`nil`: absent), in order: its
        /// undo log, undone from the last entry.
        var journal: [(id: String, record: TaskRecord?, sequence: Int?)] = []

        /// Notes a task's state before the running transaction changes it.
        mutating func remember(_ id: String) {
            journal.append((id, tasks[id], sequence[id]))
        }

        mutating func remove(_ id: String) {
            remember(id)
            guard let task = tasks.removeValue(forKey: id) else { return }
            sequence[id] = nil
            if let parent = task.parentID { children[ChildKey(parent: parent, name: task.name, occurrence: task.occurrence)] = nil }
            if let kind = task.kind, let key = task.idempotencyKey { idempotency[kind + "\u{0}" + key] = nil }
            if let child = task.childJobID { links[child] = nil }
            byRoot[task.rootID]?.remove(id)
            if byRoot[task.rootID]?.isEmpty == true { byRoot[task.rootID] = nil }
            if task.isRoot { unfinishedRoots.remove(id) }
        }

        /// The unfinished roots, as stored (an array: a lazy view would keep `tasks` shared, and the next write to it
        /// would copy every record).
        var unfinished: [TaskRecord] {
            unfinishedRoots.compactMap { tasks[$0] }
        }
    }

    private struct ChildKey: Hashable {
        var parent: String
        var name: String
        var occurrence: Int
    }

    private var state = State()

    /// The store's dispatch queue, which the executor's writer shares (as with ``SQLiteTaskStore``): the writer's
    /// batches switch no thread on their way into the store and back.
    private let queue = DispatchSerialExecutor(label: "progression.memory")
    public nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }
    package nonisolated var writerExecutor: UnownedSerialExecutor? { queue.asUnownedSerialExecutor() }

    /// An empty store.
    /// Its own: no other store shares its memory.
    package nonisolated let beacons = StoreBeacons()

    public init() {}

    // MARK: Writing

    package func reserveIdentifiers(_ count: Int) throws -> Range<Int64> {
        precondition(count > 0, "reserve at least one identifier")
        defer { state.nextIdentifier += Int64(count) }
        return state.nextIdentifier..<(state.nextIdentifier + Int64(count))
    }

    package func insert(_ tasks: [TaskRecord], events: [TaskEvent]) throws {
        try transaction { state in try Self.insert(tasks, events: events, into: &state) }
    }

    /// Inserts rows (refusing an id that exists) and their events.
    private static func insert(_ tasks: [TaskRecord], events: [TaskEvent], into state: inout State) throws {
        for task in tasks {
            guard state.tasks[task.id] == nil else {
                throw TaskStoreError(.conflict, message: "a task with id '\(task.id)' exists")
            }
            try put(task, into: &state)
        }
        try append(events, to: &state)
    }

    package func apply(_ batch: TaskBatch) throws -> TaskBatchResult {
        try transaction { state in
            var rejected: [String] = []
            var conflicting: [String] = []
            // A root's own row is checked as it is updated (as SQLite does): the actor's transaction excludes every
            // other writer, so that is the same rule as reading it first.
            var fence = BatchFence(batch, checksRootsInTheirUpdates: true)
            var holders: [String: BatchFence.Holder] = [:]
            for root in fence.rootsToRead {
                if let stored = state.tasks[root] {
                    holders[root] = BatchFence.Holder(owner: stored.ownerID, status: stored.status)
                }
            }
            fence.decide(holders: holders)
            for record in batch.inserts {
                guard fence.inserts(record) else {
                    rejected.append(record.id)
                    continue
                }
                do {
                    try Self.insert(record, into: &state)
                } catch let error as TaskStoreError where error.reason == .conflict {
                    conflicting.append(record.id)
                    if record.isRoot { fence.rootInsertConflicted(record.id) }
                }
            }
            for update in batch.updates {
                guard fence.writes(update.record), let place = state.tasks.index(forKey: update.record.id) else {
                    rejected.append(update.record.id)
                    continue
                }
                var stored = state.tasks.values[place]
                let held =
                    switch fence.condition(for: update) {
                    case .none: true
                    case .heldBy(let owner): stored.ownerID == owner
                    case .unownedWith(let status): stored.ownerID == nil && stored.status == status
                    }
                guard held else {
                    rejected.append(update.record.id)
                    continue
                }
                update.columns.copy(from: update.record, into: &stored)
                try Self.replace(stored, at: place, into: &state)
            }
            try Self.append(BatchFence.events(of: batch, skipping: rejected + conflicting), to: &state)
            let refused = Set(rejected)
            Self.queueTreeChanges(of: batch, written: { !refused.contains($0) }, into: &state)
            return TaskBatchResult(rejectedTaskIDs: rejected, conflictingTaskIDs: conflicting)
        }
    }

    package func change(_ request: TaskChangeRequest) throws -> TaskChangeResult {
        try transaction { state in
            switch try request.plan(over: Self.subtree(of: request.taskID, in: state), path: nil) {
            case .delete(let nodes, var result):
                var ids = Set(nodes.map(\.id))
                if let top = nodes.first, top.isRoot {
                    var removedJobs = [top.id]
                    var links = nodes.compactMap(\.childJobID)
                    while let child = links.popLast() {
                        guard let record = state.tasks[child], record.isRoot else { continue }
                        let tree = Self.subtree(of: child, in: state)
                        ids.formUnion(tree.map(\.id))
                        result.deleted += tree.count
                        links += tree.compactMap(\.childJobID)
                        removedJobs.append(child)
                    }
                    for job in removedJobs {
                        state.dependencies.removeAll { $0.jobID == job }
                        state.signals.removeAll { $0.jobID == job }
                        if state.dependencies.contains(where: { $0.dependsOn == job }) {
                            Self.queue([TreeChange(job, .dependents)], into: &state)
                        }
                    }
                }
                for id in ids { state.remove(id) }
                state.events.removeAll { ids.contains($0.taskID) }
                return result
            case .write(let batch, var result):
                for update in batch.updates { try Self.put(update.record, into: &state) }
                try Self.append(batch.events, to: &state)
                Self.queueTreeChanges(of: batch, written: { _ in true }, into: &state)
                result.after = state.tasks[result.before.id]
                return result
            }
        }
    }

    package func claimRoots(_ claim: RootClaim) throws -> [ClaimedRoot] {
        // Ends and removes no job: it wakes no JobClient waiting in this process (as SQLite's claim).
        try transaction(postsCommit: false) { state in
            // An owner judged dead that wrote a heartbeat since is left.
            let fromOwners = claim.ownersStillDead(current: state.owners.mapValues(\.heartbeatAt))
            // Limited kinds, and their owned roots that run or are about to.
            var limits: [String: Int] = [:]
            for (name, kind) in state.kinds {
                if let limit = kind.maxConcurrent { limits[name] = limit }
            }
            var owned: [String: Int] = [:]
            for task in state.unfinished
            where task.ownerID != nil && (task.status == .running || task.status == .pending) {
                if let kind = task.kind, limits[kind] != nil { owned[kind, default: 0] += 1 }
            }
            let plan = ClaimPlan(claim, paused: Set(state.pausedKinds.keys), limits: limits, owned: owned)
            let now = claim.now.storedMilliseconds
            let candidates = state.unfinished
                .filter { $0.status != .paused && fromOwners.contains($0.ownerID) }
                .filter { ($0.nextAttemptAt?.storedMilliseconds ?? .min) <= now }
                .filter { plan.kinds.keeps($0.kind) && claim.mayTake(kind: $0.kind, version: $0.version) }
                .map {
                    ClaimedRoot(
                        id: $0.id, status: $0.status, kind: $0.kind, priority: $0.priority, createdAt: $0.createdAt,
                        nextAttemptAt: $0.nextAttemptAt, previousOwner: $0.ownerID)
                }
            let claimed = plan.choose(candidates)
            for root in claimed {
                state.remember(root.id)
                state.tasks[root.id]?.ownerID = claim.newOwner
            }
            return claimed
        }
    }

    package func transferTree(
        of rootID: String, ifStatusIn statuses: Set<TaskStatus>, from owner: String?, to newOwner: String?
    ) throws -> Bool {
        try transaction { state in
            guard let root = state.tasks[rootID], root.isRoot, statuses.contains(root.status), root.ownerID == owner else {
                return false
            }
            state.remember(rootID)
            state.tasks[rootID]?.ownerID = newOwner
            return true
        }
    }

    package func prune(finishedBefore date: Date, statuses: Set<TaskStatus>, dryRun: Bool, limit: Int?) throws
        -> PruneResult
    {
        try transaction { state in
            let cutoff = date.storedMilliseconds
            var matching = state.tasks.values.filter { record in
                guard record.isRoot, record.status.isFinished, statuses.contains(record.status),
                    let finishedAt = record.finishedAt, finishedAt.storedMilliseconds < cutoff
                else { return false }
                // A child job goes only once its parent has gone, and a job only once no unfinished job waits for it.
                if let parent = record.parentJobID, state.tasks[parent] != nil { return false }
                return !state.dependencies.contains { dependency in
                    dependency.dependsOn == record.id && state.tasks[dependency.jobID].map { !$0.status.isFinished } == true
                }
            }
            matching.sort { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
            if let limit { matching = Array(matching.prefix(max(0, limit))) }
            let roots = Set(matching.map(\.id))
            var tasks = 0
            for root in roots {
                let ids = state.byRoot[root] ?? []
                tasks += ids.count
                guard !dryRun else { continue }
                for id in ids { state.remove(id) }
                state.dependencies.removeAll { $0.jobID == root }
                state.signals.removeAll { $0.jobID == root }
                if state.dependencies.contains(where: { $0.dependsOn == root }) {
                    Self.queue([TreeChange(root, .dependents)], into: &state)
                }
            }
            if !dryRun { state.events.removeAll { roots.contains($0.rootID) } }
            return PruneResult(roots: roots.count, tasks: tasks)
        }
    }

    package func takeDutyTurn(_ duty: String, owner: String, now: Date, nextAt: Date) -> Bool {
        if let (due, holder) = state.duties[duty], due.storedMilliseconds > now.storedMilliseconds, holder != owner {
            return false
        }
        state.duties[duty] = (nextAt, owner)
        return true
    }

    package func gaugeCounts(at now: Date) -> (unfinished: [UnfinishedRootGroup], failedByKind: [String: Int]) {
        struct Key: Hashable {
            var kind: String
            var status: TaskStatus
            var waiting: Bool
            var due: Bool
        }
        var groups: [Key: UnfinishedRootGroup] = [:]
        var failed: [String: Int] = [:]
        for record in state.tasks.values where record.isRoot {
            let kind = record.kind ?? ""
            if record.status == .failed { failed[kind, default: 0] += 1 }
            guard !record.status.isFinished else { continue }
            let due = (record.nextAttemptAt?.storedMilliseconds ?? 0) <= now.storedMilliseconds
            let key = Key(kind: kind, status: record.status, waiting: record.wait != nil, due: due)
            let since = (record.nextAttemptAt ?? record.updatedAt).roundedToMilliseconds
            var group =
                groups[key]
                ?? UnfinishedRootGroup(
                    kind: kind, status: record.status, waiting: key.waiting, due: due, count: 0, earliest: since)
            group.count += 1
            group.earliest = min(group.earliest ?? since, since)
            groups[key] = group
        }
        return (Array(groups.values), failed)
    }

    package func saveOwner(_ owner: OwnerRecord) throws {
        try transaction { state in
            var owner = owner
            owner.startedAt = owner.startedAt.roundedToMilliseconds
            owner.heartbeatAt = owner.heartbeatAt.roundedToMilliseconds
            owner.stoppedAt = owner.stoppedAt?.roundedToMilliseconds
            state.owners[owner.id] = owner
        }
    }

    package func addControlRequest(_ request: ControlRequest) throws -> Int64 {
        try transaction { state in
            var request = request
            request.id = Int64(state.controls.count + 1)
            request.requestedAt = request.requestedAt.roundedToMilliseconds
            request.handledAt = request.handledAt?.roundedToMilliseconds
            state.controls.append(request)
            return request.id
        }
    }

    package func completeControlRequest(id: Int64, outcome: String, at date: Date) throws {
        try transaction { state in
            guard let index = state.controls.firstIndex(where: { $0.id == id }) else { return }
            state.controls[index].handledAt = date.roundedToMilliseconds
            state.controls[index].outcome = outcome
        }
    }

    package func maintain(_ work: StoreMaintenance) {}

    package func saveKinds(_ kinds: [String: StoredKind], at date: Date) {
        state.kinds.merge(kinds) { _, new in new }
        state.changes += 1
    }

    package func registeredKinds() -> [String: StoredKind] {
        state.kinds
    }

    package func setKindPaused(_ kind: String, paused: Bool, at date: Date) -> Bool {
        defer { state.changes += 1 }
        if paused {
            guard state.pausedKinds[kind] == nil else { return false }
            state.pausedKinds[kind] = date.roundedToMilliseconds
            return true
        }
        return state.pausedKinds.removeValue(forKey: kind) != nil
    }

    package func pausedKinds() -> [String: Date] {
        state.pausedKinds
    }

    package func nextWaitingTime(after date: Date) -> Date? {
        let after = date.storedMilliseconds
        return state.unfinished.lazy
            .filter { $0.status == .pending }
            .compactMap(\.nextAttemptAt)
            .filter { $0.storedMilliseconds > after }
            .min()
    }

    package func saveSchedules(_ schedules: [ScheduleRecord], at date: Date) -> [ScheduleRecord] {
        defer { state.changes += 1 }
        return schedules.map { declared in
            var schedule = declared
            if let stored = state.schedules[schedule.name] {
                schedule.lastFireAt = stored.lastFireAt
                schedule.lastJobID = stored.lastJobID
                schedule.paused = stored.paused
                if stored.hasSameTicks(as: schedule) { schedule.nextFireAt = stored.nextFireAt }
            }
            schedule.updatedAt = date.roundedToMilliseconds
            schedule.nextFireAt = schedule.nextFireAt.roundedToMilliseconds
            state.schedules[schedule.name] = schedule
            return schedule
        }
    }

    package func schedules() -> [ScheduleRecord] {
        state.schedules.values.sorted { $0.name < $1.name }
    }

    package func dueSchedules(at date: Date, limit: Int) -> [ScheduleRecord] {
        Array(
            state.schedules.values.filter { !$0.paused && $0.nextFireAt.storedMilliseconds <= date.storedMilliseconds }
                .sorted { ($0.nextFireAt, $0.name) < ($1.nextFireAt, $1.name) }.prefix(max(0, limit)))
    }

    package func earliestScheduleTick(after date: Date) -> Date? {
        state.schedules.values.filter { !$0.paused && $0.nextFireAt.storedMilliseconds > date.storedMilliseconds }
            .map(\.nextFireAt).min()
    }

    package func fireSchedule(_ fire: ScheduleFire) throws -> Bool {
        try transaction { state in
            guard var schedule = state.schedules[fire.name], !schedule.paused,
                schedule.nextFireAt.storedMilliseconds == fire.expectedNextFireAt.storedMilliseconds
            else { return false }
            for job in fire.jobs {
                if let kind = job.kind, let key = job.idempotencyKey, state.idempotency[kind + "\u{0}" + key] != nil {
                    continue
                }
                try Self.put(job, into: &state)
            }
            let inserted = Set(fire.jobs.map(\.id)).filter { state.tasks[$0] != nil }
            try Self.append(fire.events.filter { inserted.contains($0.taskID) }, to: &state)
            schedule.nextFireAt = fire.nextFireAt.roundedToMilliseconds
            if let tick = fire.firedTick { schedule.lastFireAt = tick.roundedToMilliseconds }
            if let job = fire.jobs.last { schedule.lastJobID = job.id }
            state.schedules[fire.name] = schedule
            return true
        }
    }

    package func setSchedulePaused(_ name: String, paused: Bool, nextFireAt: Date?, at date: Date) -> ScheduleRecord? {
        guard var schedule = state.schedules[name] else { return nil }
        defer { state.changes += 1 }
        schedule.paused = paused
        if let nextFireAt { schedule.nextFireAt = nextFireAt.roundedToMilliseconds }
        schedule.updatedAt = date.roundedToMilliseconds
        state.schedules[name] = schedule
        return schedule
    }

    package func removeSchedule(_ name: String) -> Bool {
        defer { state.changes += 1 }
        return state.schedules.removeValue(forKey: name) != nil
    }

    package func forgetIdleOwners(_ ids: [String]) -> Int {
        let holding = Set(state.unfinished.compactMap(\.ownerID))
        var forgotten = 0
        for id in Set(ids) where !holding.contains(id) {
            if state.owners.removeValue(forKey: id) != nil { forgotten += 1 }
        }
        if forgotten > 0 { state.changes += 1 }
        return forgotten
    }

    /// How many failed subtasks each of these roots has; roots without any are left out.
    public func failedSteps(ofRoots ids: [String]) -> [String: Int] {
        var counts: [String: Int] = [:]
        for id in Set(ids) {
            let failed = (state.byRoot[id] ?? []).count { state.tasks[$0].map { !$0.isRoot && $0.status == .failed } ?? false }
            if failed > 0 { counts[id] = failed }
        }
        return counts
    }

    // MARK: Reading

    /// One task, or `nil`.
    public func task(id: String) -> TaskRecord? {
        state.tasks[id]
    }

    /// The task and every node below it, parents before children, siblings in creation order.
    public func tree(of id: String) -> [TaskRecord] {
        Self.subtree(of: id, in: state)
    }

    /// Roots matching `query`, in its order.
    public func roots(_ query: TaskQuery) -> [TaskRecord] {
        let matching = state.tasks.values.filter(query.matches)
        let ordered: [TaskRecord] =
            switch query.sort {
            case .created: matching.sorted { ($1.createdAt, $1.id) < ($0.createdAt, $0.id) }
            case .updated: matching.sorted { ($1.updatedAt, $1.id) < ($0.updatedAt, $0.id) }
            case .progress:
                matching.sorted { ($1.progress ?? -1, $1.createdAt, $1.id) < ($0.progress ?? -1, $0.createdAt, $0.id) }
            }
        return (query.reverse ? Array(ordered.reversed()) : ordered)
            .dropFirst(max(0, query.offset))
            .prefix(max(0, query.limit))
            .map { $0 }
    }

    /// How many roots match `query` (its limit and offset ignored), at most `bound` when given.
    public func countRoots(_ query: TaskQuery, upTo bound: Int?) -> Int {
        let matching = state.tasks.values.lazy.filter(query.matches)
        guard let bound else { return matching.count }
        return matching.prefix(max(0, bound)).count
    }

    /// History matching `query`, oldest first.
    public func events(_ query: EventQuery) -> [TaskEvent] {
        guard query.limit > 0 else { return [] }
        let ids = Set(Self.subtree(of: query.taskID, in: state).map(\.id))
        let matching = state.events.lazy.filter { ids.contains($0.taskID) && query.matches($0) }
        return query.tail ? Array(Array(matching).suffix(query.limit)) : Array(matching.prefix(query.limit))
    }

    /// The root whose kind and idempotency key are these, if any.
    public func root(kind: String, idempotencyKey: String) -> TaskRecord? {
        state.idempotency[kind + "\u{0}" + idempotencyKey].flatMap { state.tasks[$0] }
    }

    /// Ids of roots (or of any task) that begin with `prefix`, at most `limit`, in order.
    public func taskIDs(withPrefix prefix: String, rootsOnly: Bool, limit: Int) -> [String] {
        Array(
            state.tasks.values.filter { $0.id.hasPrefix(prefix) && (!rootsOnly || $0.isRoot) }.map(\.id).sorted()
                .prefix(max(0, limit)))
    }

    package func owners() -> [OwnerRecord] {
        state.owners.values.sorted { ($0.startedAt, $0.id) < ($1.startedAt, $1.id) }
    }

    package func pendingControlRequests(for ownerID: String?) -> [ControlRequest] {
        state.controls.filter { $0.handledAt == nil && $0.ownerID == ownerID }
    }

    package func controlRequest(id: Int64) -> ControlRequest? {
        state.controls.first { $0.id == id }
    }

    package func changeCounter() -> Int64 {
        state.changes
    }

    /// Counts of roots by status and kind, the oldest pending root and the history's size.
    public func statistics() -> TaskStoreStatistics {
        var statistics = TaskStoreStatistics()
        for task in state.tasks.values where task.isRoot {
            statistics.rootsByStatus[task.status.rawValue, default: 0] += 1
            statistics.rootsByKind[task.kind ?? "", default: 0] += 1
            if task.status == .pending {
                statistics.oldestPendingCreatedAt = min(statistics.oldestPendingCreatedAt ?? task.createdAt, task.createdAt)
                statistics.pendingByKind[task.kind ?? "", default: 0] += 1
            }
        }
        statistics.completedWithFailedSteps = state.tasks.values.filter { $0.isRoot && $0.status == .completed }
            .count { root in (state.byRoot[root.id] ?? []).contains { state.tasks[$0].map { !$0.isRoot && $0.status == .failed } ?? false } }
        statistics.events = state.events.count
        return statistics
    }

    // MARK: Job trees

    private static func queueTreeChanges(of batch: TaskBatch, written: (String) -> Bool, into state: inout State) {
        var (changes, finished) = batch.impliedTreeChanges(written: written)
        for id in finished where state.dependencies.contains(where: { $0.dependsOn == id }) {
            changes.append(TreeChange(id, .dependents))
        }
        queue(changes, into: &state)
    }

    private static func queue(_ changes: [TreeChange], into state: inout State) {
        for change in changes where !state.treeQueue.contains(change) { state.treeQueue.append(change) }
    }

    package func insert(_ tasks: [TaskRecord], events: [TaskEvent], dependencies: [JobDependency]) throws {
        try transaction { state in
            try Self.insert(tasks, events: events, into: &state)
            for dependency in dependencies {
                guard let target = state.tasks[dependency.dependsOn] else {
                    throw JobDependencyError.unknownJob(dependency.dependsOn)
                }
                guard target.isRoot else { throw JobDependencyError.notAJob(dependency.dependsOn) }
                if !state.dependencies.contains(dependency) { state.dependencies.append(dependency) }
            }
            let waiting = Set(dependencies.map(\.jobID))
            Self.queue(tasks.filter { waiting.contains($0.id) }.map { TreeChange($0.id, .recount) }, into: &state)
        }
    }

    package func resolveJobTrees(at now: Date, limit: Int) throws -> Int {
        try transaction { state in
            let changes = Array(state.treeQueue.prefix(max(1, limit)))
            guard !changes.isEmpty else { return 0 }
            let plan = try JobTreeKeeper.plan(changes, reader: Reader(state: state), now: now)
            state.treeQueue.removeFirst(changes.count)
            let batch = plan.batch
            for update in batch.updates {
                guard var stored = state.tasks[update.record.id] else { continue }
                update.columns.copy(from: update.record, into: &stored)
                try Self.put(stored, into: &state)
            }
            try Self.append(batch.events, to: &state)
            let present = Set(state.tasks.keys)
            Self.queueTreeChanges(of: batch, written: { present.contains($0) }, into: &state)
            return changes.count
        }
    }

    package func sendSignal(to jobID: String, name: String, payload: Data?, at date: Date) throws -> JobSignalRecord {
        try transaction { state in
            var job = try JobSignalRecord.check(state.tasks[jobID], id: jobID, name: name)
            let signal = JobSignalRecord(
                sequence: (state.signals.map(\.sequence).max() ?? 0) + 1, jobID: jobID, name: name, payload: payload,
                sentAt: date.roundedToMilliseconds)
            state.signals.append(signal)
            try Self.append([JobSignalRecord.sentEvent(to: job, name: name, at: date)], to: &state)
            if job.wait == .signal(name), job.ownerID == nil {
                job.releaseWait(at: date)
                try Self.put(job, into: &state)
            }
            return signal
        }
    }

    package func takeSignal(job jobID: String, name: String, step: String, owner: String, at date: Date) throws
        -> JobSignalRecord?
    {
        try transaction { state in
            guard state.tasks[jobID]?.ownerID == owner else {
                throw TaskStoreError(.conflict, message: "job '\(jobID)' is no longer held by owner '\(owner)'")
            }
            if let taken = state.signals.first(where: { $0.jobID == jobID && $0.name == name && $0.consumedBy == step }) {
                return taken
            }
            guard let index = state.signals.firstIndex(where: { $0.jobID == jobID && $0.name == name && $0.consumedBy == nil })
            else { return nil }
            state.signals[index].consumedBy = step
            state.signals[index].consumedAt = date.roundedToMilliseconds
            return state.signals[index]
        }
    }

    package func signals(of jobID: String) -> [JobSignalRecord] {
        state.signals.filter { $0.jobID == jobID }
    }

    package func dependencies(of jobID: String) -> [JobDependency] {
        state.dependencies.filter { $0.jobID == jobID }.sorted { $0.dependsOn < $1.dependsOn }
    }

    package func dependents(of jobID: String) -> [JobDependency] {
        state.dependencies.filter { $0.dependsOn == jobID }.sorted { $0.jobID < $1.jobID }
    }

    package func tasks(ids: [String]) -> [TaskRecord] {
        ids.compactMap { state.tasks[$0] }
    }

    /// The tree keeper's reads of the store's state.
    private struct Reader: JobTreeReading {
        let state: State

        func records(_ ids: [String]) -> [TaskRecord] { ids.compactMap { state.tasks[$0] } }

        func links(ofChildren ids: [String]) -> [TaskRecord] {
            ids.compactMap { state.links[$0].flatMap { state.tasks[$0] } }
        }

        func links(inTreesOf roots: [String]) -> [TaskRecord] {
            roots.flatMap { root in
                (state.byRoot[root] ?? []).compactMap { state.tasks[$0] }.filter(\.isLink).sorted { $0.id < $1.id }
            }
        }

        func subtrees(of ids: [String]) -> [String: [TaskRecord]] {
            var trees: [String: [TaskRecord]] = [:]
            for id in ids where state.tasks[id] != nil { trees[id] = InMemoryTaskStore.subtree(of: id, in: state) }
            return trees
        }

        func dependencies(ofJobs ids: [String]) -> [JobDependency] {
            let wanted = Set(ids)
            return state.dependencies.filter { wanted.contains($0.jobID) }
        }

        func dependents(of ids: [String]) -> [JobDependency] {
            let wanted = Set(ids)
            return state.dependencies.filter { wanted.contains($0.dependsOn) }
        }

        func awaitedLinks(of root: String) -> [(id: String, finished: Bool)] {
            (state.byRoot[root] ?? []).compactMap { state.tasks[$0] }.filter(\.awaited).sorted { $0.id < $1.id }
                .map { ($0.id, $0.status.isFinished) }
        }

        func unfinishedAwaitedLinks(of root: String, limit: Int) -> [String] {
            Array(
                (state.byRoot[root] ?? []).compactMap { state.tasks[$0] }.filter { $0.awaited && !$0.status.isFinished }
                    .map(\.id).sorted().prefix(limit))
        }

        func hasSignalToTake(job: String, name: String) -> Bool {
            state.signals.contains { $0.jobID == job && $0.name == name && $0.consumedBy == nil }
        }
    }

    // MARK: Rules

    /// Runs `body` as a transaction: when it throws, the tasks it touched are put back as they were (an undo log,
    /// so that a transaction costs what it changes, not the size of the store), and the events it added removed.
    private func transaction<T>(postsCommit: Bool = true, _ body: (inout State) throws -> T) throws -> T {
        let eventCount = state.events.count
        let controlCount = state.controls.count
        let owners = state.owners
        let (dependencies, signals, treeQueue) = (state.dependencies, state.signals, state.treeQueue)
        state.journal.removeAll(keepingCapacity: true)
        do {
            let value = try body(&state)
            state.journal.removeAll(keepingCapacity: true)
            state.changes += 1
            if postsCommit { beacons.commits.post() }
            return value
        } catch {
            let journal = state.journal
            state.journal.removeAll()
            for before in journal.reversed() {
                state.remove(before.id)
                state.sequence[before.id] = before.sequence
                if let record = before.record { Self.index(record, into: &state) }
            }
            state.journal.removeAll()
            if state.events.count > eventCount { state.events.removeSubrange(eventCount...) }
            if state.controls.count > controlCount { state.controls.removeSubrange(controlCount...) }
            state.owners = owners
            (state.dependencies, state.signals, state.treeQueue) = (dependencies, signals, treeQueue)
            throw error
        }
    }

    /// Stores a new record after checking what the SQLite schema checks (a conflict when its id exists).
    private static func insert(_ task: TaskRecord, into state: inout State) throws {
        guard state.tasks[task.id] == nil else {
            throw TaskStoreError(.conflict, message: "a task with id '\(task.id)' exists")
        }
        try check(task)
        try checkIdentity(task, in: state)
        state.journal.append((task.id, nil, nil))
        state.sequence[task.id] = state.nextSequence
        state.nextSequence += 1
        index(task.withStoredTimes, into: &state)
    }

    /// Writes a stored record again, at its place in the tasks (an update of its changeable columns: its identity and
    /// so its index entries stay), after checking what the SQLite schema checks.
    private static func replace(
        _ task: TaskRecord, at place: Dictionary<String, TaskRecord>.Index, into state: inout State
    ) throws {
        try check(task)
        let before = state.tasks.values[place]
        guard before.hasSameIndexKeys(as: task) else { return try put(task, into: &state) }
        state.journal.append((task.id, before, state.sequence[task.id]))
        state.tasks.values[place] = task.withStoredTimes
        if task.isRoot, task.status.isFinished != before.status.isFinished {
            if task.status.isFinished {
                state.unfinishedRoots.remove(task.id)
            } else {
                state.unfinishedRoots.insert(task.id)
            }
        }
    }

    /// What the SQLite schema checks of a row's values.
    private static func check(_ task: TaskRecord) throws {
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
        if let total = task.total, !(total > 0) { throw fail("total of '\(task.id)' must be positive") }
        if let rate = task.rate, !(rate >= 0) { throw fail("rate of '\(task.id)' must not be negative") }
    }

    /// The child identity and idempotency key of a row, refused when another row has them.
    private static func checkIdentity(_ task: TaskRecord, in state: State) throws {
        if let parentID = task.parentID {
            let key = ChildKey(parent: parentID, name: task.name, occurrence: task.occurrence)
            if let twin = state.children[key], twin != task.id {
                throw TaskStoreError(
                    .conflict, message: "'\(parentID)' has a child '\(task.name)' #\(task.occurrence) already")
            }
        }
        if let kind = task.kind, let key = task.idempotencyKey, let twin = state.idempotency[kind + "\u{0}" + key],
            twin != task.id
        {
            throw TaskStoreError(.conflict, message: "a '\(kind)' job with idempotency key '\(key)' exists")
        }
    }

    /// Stores a record after checking what the SQLite schema checks.
    private static func put(_ task: TaskRecord, into state: inout State) throws {
        try check(task)
        if let stored = state.tasks[task.id], stored.hasSameIndexKeys(as: task) {
            // A row written again with the same identity (an update): its index entries stay as they are.
            state.remember(task.id)
            state.tasks[task.id] = task.withStoredTimes
            if task.isRoot {
                if task.status.isFinished {
                    state.unfinishedRoots.remove(task.id)
                } else {
                    state.unfinishedRoots.insert(task.id)
                }
            }
            return
        }
        try checkIdentity(task, in: state)
        // A replaced record may have moved in the indexes; it keeps its place in the insertion order.
        let place = state.sequence[task.id]
        state.remove(task.id)
        state.sequence[task.id] = place
        let task = task.withStoredTimes
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
        if let child = task.childJobID { state.links[child] = task.id }
        state.byRoot[task.rootID, default: []].insert(task.id)
        if task.isRoot, !task.status.isFinished { state.unfinishedRoots.insert(task.id) }
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

private extension TaskRecord {
    /// Whether `other` has the same entries in the in-memory store's indexes (its parent, child identity, root,
    /// idempotency key and child job).
    func hasSameIndexKeys(as other: TaskRecord) -> Bool {
        parentID == other.parentID && rootID == other.rootID && name == other.name && occurrence == other.occurrence
            && kind == other.kind && idempotencyKey == other.idempotencyKey && childJobID == other.childJobID
    }

    /// The record with its times to the millisecond, as a store keeps them (changed, and so copied, only where a time
    /// is not: the executor's times are read to the millisecond).
    var withStoredTimes: TaskRecord {
        var task = self
        func round(_ date: Date) -> Date? {
            let rounded = date.roundedToMilliseconds
            return rounded == date ? nil : rounded
        }
        if let rounded = round(createdAt) { task.createdAt = rounded }
        if let rounded = round(updatedAt) { task.updatedAt = rounded }
        if let date = startedAt, let rounded = round(date) { task.startedAt = rounded }
        if let date = finishedAt, let rounded = round(date) { task.finishedAt = rounded }
        if let date = nextAttemptAt, let rounded = round(date) { task.nextAttemptAt = rounded }
        return task
    }
}
