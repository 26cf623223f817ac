import Foundation
import ProgressionTestSupport
import Synchronization
import Testing

@testable import Progression

/// An executor's claim starts, in its own transaction, the jobs it takes from no owner that it has a slot for
/// (``ClaimStarts``): a claimed job runs after one commit (the claim's) instead of two (the claim's, then its start's).
struct ClaimStartsTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// The stores whose claims start jobs: those that read the claimed trees in the claim. The in-memory store leaves
    /// every start to the executor.
    static let starting: [StoreKind] = StoreKind.allCases.filter { $0 != .memory }

    /// Claims every root of `owners` for "me", with `slots` slots to start them in.
    static func claim(
        _ store: any TaskStoreBackend, from owners: [String?] = [nil], slots: Int = 8, kinds: Set<String> = ["export"],
        versions: [String: JobVersion] = [:]
    ) async throws -> (claimed: [ClaimedRoot], starts: ClaimStarts) {
        let free = Mutex(slots)
        let starts = ClaimStarts(kinds: kinds, versions: versions, clock: { now }) { _, _ in
            free.withLock { free in
                guard free > 0 else { return false }
                free -= 1
                return true
            }
        }
        let claimed = try await store.claimRoots(
            RootClaim(
                fromOwners: owners, kinds: kinds, newOwner: "me", limit: 10, now: now, readsTrees: true,
                versions: versions, starts: starts))
        return (claimed, starts)
    }

    @Test(arguments: starting)
    func aJobTakenFromNoOwnerStartsInTheClaimsTransaction(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        try await store.insert([makeRecord(id: "job", kind: "export")], events: [])
        let (claimed, starts) = try await Self.claim(store, versions: ["export": JobVersion("2")])
        #expect(claimed.map(\.started) == [true])
        #expect(starts.slotsTaken == 1)
        let stored = try #require(try await store.task(id: "job"))
        #expect(claimed.first?.tree == [stored], "the tree returned is the one committed")
        #expect(stored.status == .running)
        #expect(stored.ownerID == "me")
        #expect(stored.startedAt == Self.now)
        #expect(stored.updatedAt == Self.now)
        #expect(stored.version == "2", "the version its kind's code begins it under")
        #expect(stored.attempt == 1)
        let events = try await store.events(of: "job")
        #expect(events.map(\.kind) == [.started])
        #expect(events.first?.at == Self.now)
        await close(store)
    }

    /// A delayed job whose time came starts too (the start clears its time).
    @Test(arguments: starting)
    func aDelayedJobWhoseTimeCameStartsInTheClaim(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        var job = makeRecord(id: "job", kind: "export")
        job.nextAttemptAt = Self.now.addingTimeInterval(-1)
        try await store.insert([job], events: [])
        let (claimed, _) = try await Self.claim(store)
        #expect(claimed.map(\.started) == [true])
        let stored = try #require(try await store.task(id: "job"))
        #expect(stored.status == .running)
        #expect(stored.nextAttemptAt == nil)
        await close(store)
    }

    /// SQLite's and PostgreSQL's claims read, in their transaction, the next time a root they left waits for (the
    /// executor asks the store for it otherwise: on SQLite a call that would hold the store's queue while the jobs
    /// it started run, on PostgreSQL a round trip of its own).
    @Test(arguments: starting) func aClaimReadsTheNextWaitingTimeOfWhatItLeft(_ kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let (_, none) = try await Self.claim(store)
        #expect(none.nextWaitingTime == .some(nil))
        var later = makeRecord(id: "later", kind: "export")
        later.nextAttemptAt = Self.now.addingTimeInterval(60)
        var sooner = makeRecord(id: "sooner", kind: "export")
        sooner.nextAttemptAt = Self.now.addingTimeInterval(30)
        try await store.insert([later, sooner, makeRecord(id: "job", kind: "export")], events: [])
        let (claimed, starts) = try await Self.claim(store)
        #expect(claimed.map(\.id) == ["job"])
        #expect(starts.nextWaitingTime == .some(Self.now.addingTimeInterval(30)))
        await close(store)
    }

    /// Roots a claim takes and leaves for the executor to start (or not), each for its reason.
    struct Unstarted: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let records: [TaskRecord]
        var owners: [String?] = [nil]
        var slots = 8
        var versions: [String: JobVersion] = [:]
    }

    static let unstarted: [Unstarted] = {
        let job = makeRecord(id: "job", kind: "export")
        var retry = job
        retry.nextAttemptAt = now.addingTimeInterval(-1)
        retry.errorType = "Failure"
        retry.errorDescription = "it failed"
        var versioned = job
        versioned.version = "1"
        versioned.startedAt = now.addingTimeInterval(-60)
        var givenOptions = job
        givenOptions.options.givenFields = [.priority]
        return [
            Unstarted(testDescription: "no slot is free", records: [job], slots: 0),
            Unstarted(testDescription: "a closure task (no kind)", records: [makeRecord(id: "job")]),
            Unstarted(
                testDescription: "it ran before: it has subtasks",
                records: [job, makeRecord(id: "job.1", parent: job, name: "step", status: .completed)]),
            Unstarted(testDescription: "a retry: it begins a new attempt first", records: [retry]),
            Unstarted(
                testDescription: "a version the claimer cannot continue began it", records: [versioned],
                versions: ["export": JobVersion("3", otherwise: .fail)]),
            Unstarted(testDescription: "its kind's options are to be filled in", records: [givenOptions]),
            Unstarted(
                testDescription: "a dead owner held it (recovery)",
                records: [makeRecord(id: "job", status: .running, owner: "dead", kind: "export")], owners: ["dead"]),
        ]
    }()

    @Test(arguments: starting, unstarted)
    func aRootTheClaimDoesNotStartIsTakenAsItWas(kind: StoreKind, row: Unstarted) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        try await store.insert(row.records, events: [])
        let before = try #require(try await store.task(id: "job"))
        let (claimed, starts) = try await Self.claim(
            store, from: row.owners, slots: row.slots, kinds: ["export"], versions: row.versions)
        #expect(claimed.map(\.id) == ["job"])
        #expect(claimed.map(\.started) == [false])
        #expect(starts.slotsTaken == 0)
        var expected = before
        expected.ownerID = "me"
        #expect(try await store.task(id: "job") == expected, "the claim changed its owner only")
        #expect(try await store.events(of: "job").isEmpty)
        await close(store)
    }

    /// A store that counts the executor's batches.
    final class CountedBatches: TaskStoreForwarding {
        let inner: any TaskStoreBackend
        let batches = Mutex(0)

        init(_ inner: any TaskStoreBackend) { self.inner = inner }

        func forward<T: Sendable>(
            _ call: ForwardedCall, _ body: @Sendable (any TaskStoreBackend) async throws -> T
        ) async throws -> T {
            try await body(inner)
        }

        func apply(_ batch: TaskBatch) async throws -> TaskBatchResult {
            batches.withLock { $0 += 1 }
            return try await inner.apply(batch)
        }
    }

    struct Echo: JobKind {
        static let name = "echo"
        func run(_ input: Int, context: any TaskContext) async throws -> Int { input }
    }

    /// A job a producer queues and a worker claims runs after the claim's commit: the worker's writer commits its end
    /// alone (it committed its start too, before).
    @Test func aJobAWorkerClaimsRunsAfterTheClaimsCommitAndItsWriterCommitsOnlyItsEnd() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("tasks.sqlite")
        let store = CountedBatches(try SQLiteTaskStore(path: path))
        let worker = try TaskExecutor(store: store)
        try worker.register(Echo())
        try await worker.start()
        let client = try JobClient(store: try SQLiteTaskStore(path: path))
        let id = try await client.submit(Echo.self, input: 7)
        #expect(try await client.result(of: id, as: Echo.self, timeout: .seconds(120)) == 7)
        try await worker.flush()
        #expect(store.batches.withLock { $0 } == 1, "the end alone")
        let reader = try SQLiteTaskStore(path: path)
        #expect(try await reader.events(of: id).map(\.kind) == [.created, .started, .completed])
        await worker.shutdown()
    }
}
