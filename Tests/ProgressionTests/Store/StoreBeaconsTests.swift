import Foundation
import Progression
import Synchronization
import ProgressionTestSupport
import Testing

/// The beacons that stores of one database in a process share (``StoreBeacons``): alone, then between a producer,
/// a worker and a waiter whose polls are an hour apart, so that only the beacons can make the job run and its result
/// be read within the test's minute.
struct StoreBeaconsTests {
    @Test func aWaiterReturnsAtOnceForAnEarlierGenerationAndAPostWakesEveryWaiter() async throws {
        let broadcast = Broadcast()
        let seen = broadcast.generation
        broadcast.post()
        // Posted since it looked: no wait.
        try await within(.seconds(30), "a wait after an earlier generation") { await broadcast.wait(after: seen) }
        let now = broadcast.generation
        #expect(now == seen &+ 1)
        try await within(.seconds(60), "three waiters woken by one post") {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<3 { group.addTask { await broadcast.wait(after: now) } }
                // Posted until every waiter has returned (one posted before a waiter parked wakes it at once too).
                group.addTask {
                    while !Task.isCancelled {
                        broadcast.post()
                        try? await Task.sleep(for: .milliseconds(20))
                    }
                }
                for _ in 0..<3 { await group.next() }
                group.cancelAll()
            }
        }
    }

    @Test func aCancelledWaitReturns() async throws {
        let broadcast = Broadcast()
        let seen = broadcast.generation
        let waiter = Task { await broadcast.wait(after: seen) }
        waiter.cancel()
        try await within(.seconds(30), "the cancelled wait") { await waiter.value }
        #expect(broadcast.generation == seen)
    }

    @Test func storesOfOneFileShareTheirBeaconsAndOtherFilesDoNot() throws {
        let directory = try TemporaryDirectory()
        let a = try SQLiteTaskStore(path: directory.file("a.sqlite"))
        let sameFile = try SQLiteTaskStore(path: directory.file("a.sqlite"))
        let other = try SQLiteTaskStore(path: directory.file("b.sqlite"))
        let seen = sameFile.beacons.commits.generation
        let otherSeen = other.beacons.commits.generation
        a.beacons.commits.post()
        #expect(sameFile.beacons.commits.generation != seen)
        #expect(other.beacons.commits.generation == otherSeen)
    }

    enum Stores: String, CaseIterable, Sendable {
        /// Two instances of SQLiteTaskStore on one file, as two processes have.
        case sqliteTwoInstances
        /// The producer on the worker's own SQLite store (whose own commits do not move its change counter).
        case sqliteOneInstance
        case memory
    }

    /// A JobClient's submit wakes the worker's claims, and the worker's commit wakes the JobClient's wait; every poll
    /// and recovery pass is an hour away.
    @Test(arguments: Stores.allCases)
    func aJobSubmittedInTheProcessRunsAndItsResultIsReadWithoutAPoll(stores: Stores) async throws {
        let directory = try TemporaryDirectory()
        let workerStore: any TaskStoreBackend
        let producerStore: any TaskStoreBackend
        switch stores {
        case .sqliteTwoInstances:
            workerStore = try SQLiteTaskStore(path: directory.file("jobs.sqlite"))
            producerStore = try SQLiteTaskStore(path: directory.file("jobs.sqlite"))
        case .sqliteOneInstance:
            workerStore = try SQLiteTaskStore(path: directory.file("jobs.sqlite"))
            producerStore = workerStore
        case .memory:
            workerStore = InMemoryTaskStore()
            producerStore = workerStore
        }
        var configuration = TaskExecutor.Configuration()
        configuration.recoveryInterval = .seconds(3_600)
        configuration.controlPollInterval = .seconds(3_600)
        let worker = try TaskExecutor(store: workerStore, configuration: configuration)
        try worker.register(Echo())
        try await worker.start()
        var clientConfiguration = JobClient.Configuration()
        clientConfiguration.pollInterval = .seconds(3_600)
        let client = try JobClient(store: producerStore, configuration: clientConfiguration)
        for n in 1...3 {
            let id = try await client.submit(Echo.self, input: .init(n: n))
            let result = try await within(.seconds(60), "job \(n)'s result") {
                try await client.result(of: id, as: Echo.self)
            }
            #expect(result == n)
        }
        await worker.shutdown()
    }

    struct Echo: JobKind {
        struct Input: Codable, Sendable { var n: Int }
        static let name = "echo"
        func run(_ input: Input, context: any TaskContext) async throws -> Int { input.n }
    }

    @Test func aListenerIsCalledAtEveryPostUntilItStops() {
        let broadcast = Broadcast()
        let calls = Mutex(0)
        let token = broadcast.listen { calls.withLock { $0 += 1 } }
        broadcast.post()
        broadcast.post()
        broadcast.stopListening(token)
        broadcast.post()
        #expect(calls.withLock { $0 } == 2)
    }

    /// A claim ends no job and removes none: a JobClient waiting in this process is not woken by it. A submit is.
    @Test func aClaimDoesNotWakeWaitersOfItsDatabaseAndASubmitDoes() async throws {
        let directory = try TemporaryDirectory()
        let worker = try SQLiteTaskStore(path: directory.file("jobs.sqlite"))
        let producer = try SQLiteTaskStore(path: directory.file("jobs.sqlite"))
        let seen = producer.beacons.commits.generation
        let id = try await JobClient(store: producer).submit(Echo.self, input: .init(n: 1))
        let submitted = producer.beacons.commits.generation
        #expect(submitted != seen)
        let claimed = try await worker.claimRoots(RootClaim(fromOwners: [nil], kinds: [Echo.name], newOwner: "w", limit: 1))
        #expect(claimed.map(\.id) == [id])
        #expect(producer.beacons.commits.generation == submitted)
        await worker.close()
        await producer.close()
    }

    /// Reports, waits for its gate (or its cancellation), then returns or fails; a parent also starts a child job.
    struct Gated: JobKind {
        struct Input: Codable, Sendable {
            var fails = false
            var startsChild = false
        }
        static let name = "gated"
        let gate: Gate

        func run(_ input: Input, context: any TaskContext) async throws -> String {
            if input.startsChild { _ = try await context.startChild(Echo.self, input: .init(n: 7)) }
            try await context.report(.total(4))
            try await context.report(.named("halfway"))
            try await context.report(.completed(2))
            await withTaskCancellationHandler { await gate.wait() } onCancel: { gate.open() }
            try Task.checkCancellation()
            if input.fails { throw GatedFailure() }
            return "done"
        }
    }

    struct GatedFailure: Error {}

    enum Ending: String, CaseIterable, Sendable { case completes, fails, isCancelled, parentCompletes }

    /// An executor tells the end of a job it committed with the row as committed, the one the store has then; for a
    /// parent of a child job (whose row the tree keeper writes too) it tells the end alone. And a JobClient waiting for
    /// the job returns that row.
    @Test(arguments: Ending.allCases)
    func anEndIsToldWithTheRowAsCommittedAndAWaiterReturnsIt(ending: Ending) async throws {
        let directory = try TemporaryDirectory()
        let gate = Gate()
        let (worker, workerStore, clientStore, client) = try await Self.workerAndClient(in: directory, gate: gate)
        let id = try await client.submit(
            Gated.self, input: .init(fails: ending == .fails, startsChild: ending == .parentCompletes))
        let ends = workerStore.beacons.ends
        let token = ends.watch(id)
        defer { ends.unwatch(id, token: token) }
        let waiter = Task { try await client.wait(for: id) }
        try await poll("the job running") { try await workerStore.task(id: id)?.status == .running }
        if ending == .isCancelled { try await worker.cancel(taskID: id) } else { gate.open() }
        try await within(.seconds(60), "the end told") { await ends.wait(id, token: token) }
        let told = try #require(ends.takeEnd(id, token: token))
        let returned = try await within(.seconds(60), "the wait") { try await waiter.value }
        let stored = try #require(try await workerStore.task(id: id))
        let expected: TaskStatus = switch ending {
        case .completes, .parentCompletes: .completed
        case .fails: .failed
        case .isCancelled: .cancelled
        }
        #expect(stored.status == expected)
        #expect(returned == stored)
        if ending == .parentCompletes {
            #expect(told.record == nil)
        } else {
            #expect(told.record == stored)
        }
        await worker.shutdown()
        await workerStore.close()
        await clientStore.close()
    }

    /// A JobClient waiting for a job that an executor of its process runs waits for the end that executor tells: the
    /// other commits of the process (30 jobs submitted and run meanwhile, the job's own reports) do not make it read
    /// the job, nor does the wait's beginning, nor its read at least every second (the client's clock, the test's,
    /// moves two seconds before the other jobs come), and it returns the row told with the end: no read at all. (Its
    /// poll, hourly here, stays.)
    @Test func aWaiterOfAJobRunHereReadsItNotAtOtherCommitsAndReturnsTheEndTold() async throws {
        let directory = try TemporaryDirectory()
        let gate = Gate()
        let clock = ManualClock()
        var counted: CountedReads?
        let (worker, workerStore, clientStore, client) = try await Self.workerAndClient(
            in: directory, gate: gate, clientClock: clock
        ) {
            let reads = CountedReads($0)
            counted = reads
            return reads
        }
        let reads = try #require(counted)
        let id = try await client.submit(Gated.self, input: .init())
        // Its row says running once the claim committed; the executor says so once it has loaded the job.
        try await poll("the executor to say it will tell the job's end") { workerStore.beacons.ends.willBeTold(id) }
        let waiter = Task { try await client.wait(for: id) }
        try await poll("the waiter to wait for the end told") { workerStore.beacons.ends.isAwaited(id) }
        clock.advance(by: .seconds(2))
        for n in 0..<30 {
            let echo = try await client.submit(Echo.self, input: .init(n: n))
            #expect(try await client.result(of: echo, as: Echo.self, timeout: .seconds(60)) == n)
        }
        gate.open()
        let returned = try await within(.seconds(60), "the wait") { try await waiter.value }
        #expect(returned.status == .completed)
        #expect(returned == (try await workerStore.task(id: id)))
        #expect(reads.readsOf(id) == 0)
        await worker.shutdown()
        await workerStore.close()
        await clientStore.close()
    }

    /// A waiter of a job run here is not left waiting for an end that executor will no longer tell: the worker stops
    /// while the job runs (its code is cancelled, the job goes back to no owner), an operator then cancels the job
    /// through a store of the process (a commit that tells no end), and the wait returns that end, woken by the commit.
    /// (The client's clock is the test's: it moves a millisecond at a time, half a second in all, so that the wait's
    /// least spacing between reads passes but neither its hourly poll nor its read at least every second comes.)
    @Test func aWaiterWhoseJobLeavesItsExecutorUnendedReturnsTheEndCommittedElsewhere() async throws {
        let directory = try TemporaryDirectory()
        let gate = Gate()
        let clock = ManualClock()
        let (worker, workerStore, clientStore, client) = try await Self.workerAndClient(
            in: directory, gate: gate, clientClock: clock)
        let id = try await client.submit(Gated.self, input: .init())
        try await poll("the executor to say it will tell the job's end") { workerStore.beacons.ends.willBeTold(id) }
        let waiter = Task { try await client.wait(for: id) }
        try await poll("the waiter to wait for the end told") { workerStore.beacons.ends.isAwaited(id) }
        await worker.shutdown()
        #expect(!workerStore.beacons.ends.willBeTold(id))
        #expect(try await clientStore.task(id: id)?.status == .pending)
        _ = try await clientStore.change(
            TaskChangeRequest(taskID: id, transition: .cancel, requester: .user, at: Date()))
        let returned = Mutex<TaskRecord?>(nil)
        let returning = Task {
            let record = try await waiter.value
            returned.withLock { $0 = record }
        }
        var moved = 0
        try await poll("the wait to return", timeout: .seconds(60)) {
            if moved < 500 {
                clock.advance(by: .milliseconds(1))
                moved += 1
            }
            return returned.withLock { $0 != nil }
        }
        try await returning.value
        #expect(returned.withLock { $0?.status } == .cancelled)
        await workerStore.close()
        await clientStore.close()
    }

    /// A worker executor (the gated and echo kinds) on a store of a new database in `directory`, started, and a
    /// JobClient on a second store of that database (as `client` wraps it), which polls only hourly: the worker's
    /// commits are what wakes it.
    static func workerAndClient(
        in directory: TemporaryDirectory, gate: Gate, clientClock: (any Clock<Duration>)? = nil,
        client wrap: (SQLiteTaskStore) -> any TaskStoreBackend = { $0 }
    ) async throws -> (TaskExecutor, SQLiteTaskStore, SQLiteTaskStore, JobClient) {
        let workerStore = try SQLiteTaskStore(path: directory.file("jobs.sqlite"))
        let clientStore = try SQLiteTaskStore(path: directory.file("jobs.sqlite"))
        var configuration = TaskExecutor.Configuration()
        configuration.controlPollInterval = .seconds(3_600)
        let worker = try TaskExecutor(store: workerStore, configuration: configuration)
        try worker.register(Gated(gate: gate))
        try worker.register(Echo())
        try await worker.start()
        var clientConfiguration = JobClient.Configuration()
        clientConfiguration.pollInterval = .seconds(3_600)
        if let clientClock { clientConfiguration.clock = clientClock }
        let client = JobClient(backend: wrap(clientStore), configuration: clientConfiguration)
        return (worker, workerStore, clientStore, client)
    }

    /// Reads of jobs through a store, by id.
    final class CountedReads: TaskStoreForwarding, BroadcastingChanges {
        let inner: SQLiteTaskStore
        let reads = Mutex<[String: Int]>([:])

        init(_ inner: SQLiteTaskStore) { self.inner = inner }

        var beacons: StoreBeacons { inner.beacons }

        func forward<T: Sendable>(
            _ call: ForwardedCall, _ body: @Sendable (any TaskStoreBackend) async throws -> T
        ) async throws -> T {
            try await body(inner)
        }

        func task(id: String) async throws -> TaskRecord? {
            reads.withLock { $0[id, default: 0] += 1 }
            return try await inner.task(id: id)
        }

        func readsOf(_ id: String) -> Int { reads.withLock { $0[id] ?? 0 } }
    }

    /// A JobClient returns the row told with a job's end after its read, without reading the job again (here the store
    /// still has it pending: no executor runs it). Told without the row, it reads the job, and waits on.
    @Test func aWaiterReturnsTheRowToldWithoutReadingTheJobAgain() async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteTaskStore(path: directory.file("jobs.sqlite"))
        let counted = CountedReads(store)
        var clientConfiguration = JobClient.Configuration()
        clientConfiguration.pollInterval = .seconds(3_600)
        let client = try JobClient(store: counted, configuration: clientConfiguration)
        let id = try await client.submit(Echo.self, input: .init(n: 1))
        let waiter = Task { try await client.wait(for: id) }
        try await poll("the waiter's first read") { counted.readsOf(id) >= 1 }
        var row = try #require(try await store.task(id: id))
        row.status = .completed
        row.result = Data("1".utf8)
        row.finishedAt = row.createdAt
        store.beacons.ends.post([RootEnd(id: id, record: row)])
        #expect(try await within(.seconds(60), "the wait") { try await waiter.value } == row)
        #expect(counted.readsOf(id) == 1)
        #expect(try await store.task(id: id)?.status == .pending)
        let second = Task { try await client.wait(for: id, timeout: .seconds(3_600)) }
        try await poll("the second waiter's first read") { counted.readsOf(id) >= 2 }
        store.beacons.ends.post([RootEnd(id: id, record: nil)])
        try await poll("the second waiter's read after the end told") { counted.readsOf(id) >= 3 }
        second.cancel()
        await #expect(throws: (any Error).self) { try await second.value }
        await store.close()
    }
}
