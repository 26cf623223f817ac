import Foundation
import Progression
import Synchronization

/// A store that fails on purpose: it passes every call to the store it wraps, except the ones its ``FaultPlan`` says
/// to fail, which throw a storage error (a full disk, an I/O error, a lock held too long) before anything is written.
/// The fault-injection suite and the executor's fault tests run the executor on it.
///
/// ```swift
/// let store = FaultInjectingStore(wrapping: try SQLiteTaskStore(path: path))
/// store.plan.failNextWrites(3, with: .diskFull)
/// ```
package final class FaultInjectingStore: TaskStoreBackend, FleetStoreForwarding {
    /// The errors a storage fault throws: what SQLite reports for them, as `TaskStoreError`s.
    package enum Fault: String, Sendable, CaseIterable {
        case diskFull, ioError, busy

        package var error: TaskStoreError {
            switch self {
            case .diskFull:
                TaskStoreError(.storageFailure, message: "database or disk is full (injected)", sqliteCode: 13)
            case .ioError:
                TaskStoreError(.storageFailure, message: "disk I/O error (injected)", sqliteCode: 10)
            case .busy:
                TaskStoreError(.busy, message: "database is locked (injected)", sqliteCode: 5)
            }
        }
    }

    /// Which calls fail.
    package final class FaultPlan: Sendable {
        private struct State {
            var failingWrites = 0
            var failingReads = 0
            var fault = Fault.diskFull
            var failingTrees: [String: Int] = [:]
            var outage: (until: ContinuousClock.Instant, fault: Fault)?
            var random: (generator: SplitMix64, probability: Double, length: Duration)?
            var injected = 0
        }

        private let state = Mutex(State())

        /// The next `count` calls that write fail with `fault`.
        package func failNextWrites(_ count: Int, with fault: Fault = .diskFull) {
            state.withLock {
                $0.failingWrites = count
                $0.fault = fault
            }
        }

        /// The next `count` calls that read fail with `fault`.
        package func failNextReads(_ count: Int, with fault: Fault = .ioError) {
            state.withLock {
                $0.failingReads = count
                $0.fault = fault
            }
        }

        /// Loading the tree of `id` fails `count` times.
        package func failTree(of id: String, times count: Int) {
            state.withLock { $0.failingTrees[id] = count }
        }

        /// Every call fails with `fault` for `duration` from now (a full disk until space is freed).
        package func outage(_ fault: Fault, for duration: Duration) {
            state.withLock { $0.outage = (.now + duration, fault) }
        }

        /// From now on, each write starts an outage of `length` with probability `probability` (reproducible for a
        /// seed), of a fault chosen at random.
        package func randomOutages(seed: UInt64, probability: Double, length: Duration) {
            state.withLock { $0.random = (SplitMix64(seed: seed), probability, length) }
        }

        /// Stops failing.
        package func heal() {
            state.withLock {
                $0.failingWrites = 0
                $0.failingReads = 0
                $0.failingTrees = [:]
                $0.outage = nil
                $0.random = nil
            }
        }

        /// How many calls failed on purpose so far.
        package var injected: Int { state.withLock { $0.injected } }

        /// The error for a call, or `nil` to let it through.
        func fault(writes: Bool, tree: String? = nil) -> TaskStoreError? {
            state.withLock { state in
                let now = ContinuousClock.now
                if let outage = state.outage {
                    if now < outage.until {
                        state.injected += 1
                        return outage.fault.error
                    }
                    state.outage = nil
                }
                if let tree, let left = state.failingTrees[tree], left > 0 {
                    state.failingTrees[tree] = left - 1
                    state.injected += 1
                    return Fault.ioError.error
                }
                if writes, state.failingWrites > 0 {
                    state.failingWrites -= 1
                    state.injected += 1
                    return state.fault.error
                }
                if !writes, state.failingReads > 0 {
                    state.failingReads -= 1
                    state.injected += 1
                    return state.fault.error
                }
                if writes, var random = state.random {
                    let draw = Double(random.generator.next() % 1_000_000) / 1_000_000
                    let pick = Fault.allCases[Int(random.generator.next() % UInt64(Fault.allCases.count))]
                    state.random = random
                    if draw < random.probability {
                        state.outage = (now + random.length, pick)
                        state.injected += 1
                        return pick.error
                    }
                }
                return nil
            }
        }
    }

    package let inner: any TaskStoreBackend
    package let plan = FaultPlan()

    package init(wrapping inner: any TaskStoreBackend) {
        self.inner = inner
    }

    private func write<T>(_ body: () async throws -> T) async throws -> T {
        if let error = plan.fault(writes: true) { throw error }
        return try await body()
    }

    private func read<T>(tree: String? = nil, _ body: () async throws -> T) async throws -> T {
        if let error = plan.fault(writes: false, tree: tree) { throw error }
        return try await body()
    }

    // MARK: Reading

    package func task(id: String) async throws -> TaskRecord? { try await read { try await inner.task(id: id) } }
    package func tree(of id: String) async throws -> [TaskRecord] {
        try await read(tree: id) { try await inner.tree(of: id) }
    }
    package func roots(_ query: TaskQuery) async throws -> [TaskRecord] { try await read { try await inner.roots(query) } }
    package func countRoots(_ query: TaskQuery, upTo bound: Int?) async throws -> Int {
        try await read { try await inner.countRoots(query, upTo: bound) }
    }
    package func events(_ query: EventQuery) async throws -> [TaskEvent] { try await read { try await inner.events(query) } }
    package func root(kind: String, idempotencyKey: String) async throws -> TaskRecord? {
        try await read { try await inner.root(kind: kind, idempotencyKey: idempotencyKey) }
    }
    package func taskIDs(withPrefix prefix: String, rootsOnly: Bool, limit: Int) async throws -> [String] {
        try await read { try await inner.taskIDs(withPrefix: prefix, rootsOnly: rootsOnly, limit: limit) }
    }
    package func statistics() async throws -> TaskStoreStatistics { try await read { try await inner.statistics() } }
    package func owners() async throws -> [OwnerRecord] { try await read { try await inner.owners() } }
    package func pendingControlRequests(for ownerID: String?) async throws -> [ControlRequest] {
        try await read { try await inner.pendingControlRequests(for: ownerID) }
    }
    package func controlRequest(id: Int64) async throws -> ControlRequest? {
        try await read { try await inner.controlRequest(id: id) }
    }
    package func changeCounter() async throws -> Int64 { try await read { try await inner.changeCounter() } }
    package func failedSteps(ofRoots ids: [String]) async throws -> [String: Int] {
        try await read { try await inner.failedSteps(ofRoots: ids) }
    }

    // MARK: Writing

    package func reserveIdentifiers(_ count: Int) async throws -> Range<Int64> {
        try await write { try await inner.reserveIdentifiers(count) }
    }
    package func insert(_ tasks: [TaskRecord], events: [TaskEvent]) async throws {
        try await write { try await inner.insert(tasks, events: events) }
    }
    package func apply(_ batch: TaskBatch) async throws -> TaskBatchResult {
        try await write { try await inner.apply(batch) }
    }
    package func change(_ request: TaskChangeRequest) async throws -> TaskChangeResult {
        try await write { try await inner.change(request) }
    }
    package func claimRoots(_ claim: RootClaim) async throws -> [ClaimedRoot] {
        try await write { try await inner.claimRoots(claim) }
    }
    package func transferTree(
        of rootID: String, ifStatusIn statuses: Set<TaskStatus>, from owner: String?, to newOwner: String?
    ) async throws -> Bool {
        try await write { try await inner.transferTree(of: rootID, ifStatusIn: statuses, from: owner, to: newOwner) }
    }
    package func prune(finishedBefore date: Date, statuses: Set<TaskStatus>, dryRun: Bool) async throws -> PruneResult {
        try await write { try await inner.prune(finishedBefore: date, statuses: statuses, dryRun: dryRun) }
    }
    package func saveOwner(_ owner: OwnerRecord) async throws { try await write { try await inner.saveOwner(owner) } }
    package func addControlRequest(_ request: ControlRequest) async throws -> Int64 {
        try await write { try await inner.addControlRequest(request) }
    }
    package func completeControlRequest(id: Int64, outcome: String, at date: Date) async throws {
        try await write { try await inner.completeControlRequest(id: id, outcome: outcome, at: date) }
    }
    package func maintain(_ work: StoreMaintenance) async throws { try await write { try await inner.maintain(work) } }
    package func forwardFleet<T: Sendable>(
        writes: Bool, _ body: @Sendable (any FleetStore) async throws -> T
    ) async throws -> T {
        let inner = inner
        if writes { return try await write { try await body(inner) } }
        return try await read { try await body(inner) }
    }
}
