import Foundation

/// What a call forwarded by a wrapping store does to the store it wraps.
package enum ForwardedCall: Sendable, Hashable {
    /// A read.
    case read
    /// A read of the tree of one task (its id).
    case readTree(String)
    /// A write (one transaction).
    case write
}

/// A store that wraps another (a fault injector, the operator's store) and hands every call to it through one hook,
/// instead of forwarding each of the store's methods by hand: a method added to a store's protocols reaches every
/// wrapper at once.
package protocol TaskStoreForwarding: TaskStoreBackend {
    /// Runs `body` on the wrapped store.
    func forward<T: Sendable>(_ call: ForwardedCall, _ body: @Sendable (any TaskStoreBackend) async throws -> T)
        async throws -> T
}

// MARK: TaskStore

extension TaskStoreForwarding {
    package func task(id: String) async throws -> TaskRecord? {
        try await forward(.read) { try await $0.task(id: id) }
    }
    package func tree(of id: String) async throws -> [TaskRecord] {
        try await forward(.readTree(id)) { try await $0.tree(of: id) }
    }
    package func roots(_ query: TaskQuery) async throws -> [TaskRecord] {
        try await forward(.read) { try await $0.roots(query) }
    }
    package func countRoots(_ query: TaskQuery, upTo bound: Int?) async throws -> Int {
        try await forward(.read) { try await $0.countRoots(query, upTo: bound) }
    }
    package func events(_ query: EventQuery) async throws -> [TaskEvent] {
        try await forward(.read) { try await $0.events(query) }
    }
    package func root(kind: String, idempotencyKey: String) async throws -> TaskRecord? {
        try await forward(.read) { try await $0.root(kind: kind, idempotencyKey: idempotencyKey) }
    }
    package func taskIDs(withPrefix prefix: String, rootsOnly: Bool, limit: Int) async throws -> [String] {
        try await forward(.read) { try await $0.taskIDs(withPrefix: prefix, rootsOnly: rootsOnly, limit: limit) }
    }
    package func statistics() async throws -> TaskStoreStatistics {
        try await forward(.read) { try await $0.statistics() }
    }
    package func failedSteps(ofRoots ids: [String]) async throws -> [String: Int] {
        try await forward(.read) { try await $0.failedSteps(ofRoots: ids) }
    }
}

// MARK: TaskWriting

extension TaskStoreForwarding {
    package func reserveIdentifiers(_ count: Int) async throws -> Range<Int64> {
        try await forward(.write) { try await $0.reserveIdentifiers(count) }
    }
    package func insert(_ tasks: [TaskRecord], events: [TaskEvent]) async throws {
        try await forward(.write) { try await $0.insert(tasks, events: events) }
    }
    package func apply(_ batch: TaskBatch) async throws -> TaskBatchResult {
        try await forward(.write) { try await $0.apply(batch) }
    }
    package func change(_ request: TaskChangeRequest) async throws -> TaskChangeResult {
        try await forward(.write) { try await $0.change(request) }
    }
    package func claimRoots(_ claim: RootClaim) async throws -> [ClaimedRoot] {
        try await forward(.write) { try await $0.claimRoots(claim) }
    }
    package func transferTree(
        of rootID: String, ifStatusIn statuses: Set<TaskStatus>, from owner: String?, to newOwner: String?
    ) async throws -> Bool {
        try await forward(.write) {
            try await $0.transferTree(of: rootID, ifStatusIn: statuses, from: owner, to: newOwner)
        }
    }
}

// MARK: OwnerRegistry, ControlRequestQueue, StoreHousekeeping

extension TaskStoreForwarding {
    package func saveOwner(_ owner: OwnerRecord) async throws {
        try await forward(.write) { try await $0.saveOwner(owner) }
    }
    package func owners() async throws -> [OwnerRecord] {
        try await forward(.read) { try await $0.owners() }
    }
    package func addControlRequest(_ request: ControlRequest) async throws -> Int64 {
        try await forward(.write) { try await $0.addControlRequest(request) }
    }
    package func pendingControlRequests(for ownerID: String?) async throws -> [ControlRequest] {
        try await forward(.read) { try await $0.pendingControlRequests(for: ownerID) }
    }
    package func controlRequest(id: Int64) async throws -> ControlRequest? {
        try await forward(.read) { try await $0.controlRequest(id: id) }
    }
    package func completeControlRequest(id: Int64, outcome: String, at date: Date) async throws {
        try await forward(.write) { try await $0.completeControlRequest(id: id, outcome: outcome, at: date) }
    }
    package func prune(finishedBefore date: Date, statuses: Set<TaskStatus>, dryRun: Bool, limit: Int?) async throws
        -> PruneResult
    {
        try await forward(.write) {
            try await $0.prune(finishedBefore: date, statuses: statuses, dryRun: dryRun, limit: limit)
        }
    }
    package func gaugeCounts(at now: Date) async throws -> (unfinished: [UnfinishedRootGroup], failedByKind: [String: Int]) {
        try await forward(.read) { try await $0.gaugeCounts(at: now) }
    }
    package func takeDutyTurn(_ duty: String, owner: String, now: Date, nextAt: Date) async throws -> Bool {
        try await forward(.write) { try await $0.takeDutyTurn(duty, owner: owner, now: now, nextAt: nextAt) }
    }
    package func changeCounter() async throws -> Int64 {
        try await forward(.read) { try await $0.changeCounter() }
    }
    package func maintain(_ work: StoreMaintenance) async throws {
        try await forward(.write) { try await $0.maintain(work) }
    }
}

// MARK: FleetStore

extension TaskStoreForwarding {

    package func saveKinds(_ kinds: [String: StoredKind], at date: Date) async throws {
        try await forward(.write) { try await $0.saveKinds(kinds, at: date) }
    }
    package func registeredKinds() async throws -> [String: StoredKind] {
        try await forward(.read) { try await $0.registeredKinds() }
    }
    package func setKindPaused(_ kind: String, paused: Bool, at date: Date) async throws -> Bool {
        try await forward(.write) { try await $0.setKindPaused(kind, paused: paused, at: date) }
    }
    package func pausedKinds() async throws -> [String: Date] {
        try await forward(.read) { try await $0.pausedKinds() }
    }
    package func nextWaitingTime(after date: Date) async throws -> Date? {
        try await forward(.read) { try await $0.nextWaitingTime(after: date) }
    }
    package func saveSchedules(_ schedules: [ScheduleRecord], at date: Date) async throws -> [ScheduleRecord] {
        try await forward(.write) { try await $0.saveSchedules(schedules, at: date) }
    }
    package func schedules() async throws -> [ScheduleRecord] {
        try await forward(.read) { try await $0.schedules() }
    }
    package func dueSchedules(at date: Date, limit: Int) async throws -> [ScheduleRecord] {
        try await forward(.read) { try await $0.dueSchedules(at: date, limit: limit) }
    }
    package func earliestScheduleTick(after date: Date) async throws -> Date? {
        try await forward(.read) { try await $0.earliestScheduleTick(after: date) }
    }
    package func fireSchedule(_ fire: ScheduleFire) async throws -> Bool {
        try await forward(.write) { try await $0.fireSchedule(fire) }
    }
    package func setSchedulePaused(
        _ name: String, paused: Bool, nextFireAt: Date?, at date: Date
    ) async throws -> ScheduleRecord? {
        try await forward(.write) {
            try await $0.setSchedulePaused(name, paused: paused, nextFireAt: nextFireAt, at: date)
        }
    }
    package func removeSchedule(_ name: String) async throws -> Bool {
        try await forward(.write) { try await $0.removeSchedule(name) }
    }

    package func forgetIdleOwners(_ ids: [String]) async throws -> Int {
        try await forward(.write) { try await $0.forgetIdleOwners(ids) }
    }
}

// MARK: JobTreeStore

extension TaskStoreForwarding {
    package func insert(_ tasks: [TaskRecord], events: [TaskEvent], dependencies: [JobDependency]) async throws {
        try await forward(.write) { try await $0.insert(tasks, events: events, dependencies: dependencies) }
    }
    package func resolveJobTrees(at now: Date, limit: Int) async throws -> Int {
        try await forward(.write) { try await $0.resolveJobTrees(at: now, limit: limit) }
    }
    package func sendSignal(to jobID: String, name: String, payload: Data?, at date: Date) async throws
        -> JobSignalRecord
    {
        try await forward(.write) { try await $0.sendSignal(to: jobID, name: name, payload: payload, at: date) }
    }
    package func takeSignal(job: String, name: String, step: String, owner: String, at date: Date) async throws
        -> JobSignalRecord?
    {
        try await forward(.write) { try await $0.takeSignal(job: job, name: name, step: step, owner: owner, at: date) }
    }
    package func signals(of jobID: String) async throws -> [JobSignalRecord] {
        try await forward(.read) { try await $0.signals(of: jobID) }
    }
    package func dependencies(of jobID: String) async throws -> [JobDependency] {
        try await forward(.read) { try await $0.dependencies(of: jobID) }
    }
    package func dependents(of jobID: String) async throws -> [JobDependency] {
        try await forward(.read) { try await $0.dependents(of: jobID) }
    }
    package func tasks(ids: [String]) async throws -> [TaskRecord] {
        try await forward(.read) { try await $0.tasks(ids: ids) }
    }
}
