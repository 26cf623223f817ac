import Foundation
import Progression
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
}
