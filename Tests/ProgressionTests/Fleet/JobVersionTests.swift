import Foundation
import ProgressionTestSupport
import Testing

@testable import Progression

/// Versions across deploys (issue 37): a job records the version of its kind's code it began under, and a worker
/// continues it only under a version that can — otherwise it leaves it for one that can, or fails it, as the kind says.
struct JobVersionTests {
    // MARK: The rule alone

    struct Case: Sendable, CustomTestStringConvertible {
        var worker: JobVersion
        var job: String?
        var continues: Bool
        var testDescription: String { "\(worker) with a job of \(job ?? "no version"): \(continues)" }
    }

    @Test(arguments: [
        Case(worker: JobVersion("2"), job: nil, continues: true),
        Case(worker: JobVersion("2"), job: "2", continues: true),
        Case(worker: JobVersion("2"), job: "1", continues: false),
        Case(worker: JobVersion("3", continues: ["2"]), job: "2", continues: true),
        Case(worker: JobVersion("3", continues: ["2"]), job: "1", continues: false),
        Case(worker: JobVersion("1"), job: "2", continues: false),
    ])
    func aVersionContinuesItsOwnJobsThoseItNamesAndThoseThatRecordedNone(_ test: Case) {
        #expect(test.worker.canContinue(test.job) == test.continues)
    }

    @Test func theClaimLeavesOnlyJobsOfKindsThatSayLeave() {
        let claim = RootClaim(
            fromOwners: [nil], kinds: nil, newOwner: "w", limit: 1,
            versions: ["a": JobVersion("2", continues: ["1"]), "b": JobVersion("2", otherwise: .fail)])
        #expect(claim.versionsLeft.map(\.kind) == ["a"])
        #expect(claim.versionsLeft.first?.accepted == ["1", "2"])
        #expect(claim.mayTake(kind: "a", version: "1") && claim.mayTake(kind: "a", version: nil))
        #expect(!claim.mayTake(kind: "a", version: "0"))
        #expect(claim.mayTake(kind: "b", version: "0"), "a kind that fails them takes them, to fail them")
        #expect(claim.mayTake(kind: "c", version: "0") && claim.mayTake(kind: nil, version: "0"))
    }

    @Test func badVersionsAndPoliciesAreRefusedAndRegisterNothing() throws {
        let executor = try TaskExecutor(store: InMemoryTaskStore())
        for bad in [JobVersion(""), JobVersion(String(repeating: "v", count: 101)), JobVersion("2", continues: [""])] {
            #expect(throws: ProgressionError.self) {
                try executor.register("versioned", input: Int.self, version: bad) { _, _ in }
            }
        }
        #expect(executor.registeredOptions(of: "versioned") == nil)
        #expect {
            try JobVersion.Otherwise(parsing: "skip")
        } throws: { error in
            guard case .invalidArgument(let message)? = error as? ProgressionError else { return false }
            return message == "unknown version policy 'skip': use leave, fail"
        }
        #expect(try JobVersion.Otherwise(parsing: "fail") == .fail)
    }

    // MARK: Across workers, on every store

    /// The `versioned` kind as a producer names it: its code, which returns the version of the worker that ran it, is
    /// registered by each worker with that worker's version (``worker(_:version:runs:)``).
    struct Versioned: JobKind {
        typealias Input = Int
        typealias Output = String
        static let name = "versioned"
        func run(_ input: Int, context: any TaskContext) async throws -> String { fatalError("run by the workers") }
    }

    /// A worker that registered the `versioned` kind with `version`.
    static func worker(
        _ database: SharedDatabase, version: JobVersion?, runs: Runs
    ) throws -> TaskExecutor {
        let worker = try database.worker(slots: 2)
        let name = version?.name ?? "none"
        try worker.register("versioned", input: Int.self, output: String.self, version: version) { n, _ in
            runs.started(n, by: name)
            runs.ended()
            return name
        }
        return worker
    }

    /// A job as a worker of `version` that began it and died leaves it: pending, unowned, its version recorded.
    static func jobBegunBy(_ version: String, n: Int, in store: any TaskStoreBackend) async throws -> String {
        var record = TaskRecord(
            id: "v\(version)-\(n)", name: "versioned", kind: "versioned", input: Data("\(n)".utf8),
            options: .interactive, status: .pending, createdAt: Date(timeIntervalSinceNow: -60))
        record.version = version
        return try await JobInserter(store: store).insert([record])[0]
    }

    @Test(arguments: StoreKind.allCases)
    func aWorkerLeavesAJobItsVersionCannotContinueRunsTheOthersAndAVersionThatCanContinuesIt(kind: StoreKind)
        async throws
    {
        let database = try SharedDatabase(kind)
        let producer = try database.producer()
        let runs = Runs()
        let old = try await Self.jobBegunBy("1", n: 1, in: try database.open())

        // Version 2 leaves it: a producer's later job (no version recorded) runs, and records version 2 as it
        // starts; the worker's own submit does too.
        let second = try Self.worker(database, version: JobVersion("2"), runs: runs)
        try await second.start()
        let fresh = try await producer.submit(Versioned.self, input: 2)
        #expect(try await producer.result(of: fresh, as: Versioned.self, timeout: .seconds(120)) == "2")
        let own = try await second.submit("versioned", input: 3)
        #expect(try await producer.result(of: own, as: Versioned.self, timeout: .seconds(120)) == "2")
        // Both slots were free for the claim that took the later job, and the older one came first in its order:
        // left, not taken.
        let left = try #require(try await producer.store.task(id: old))
        #expect(left.status == .pending && left.ownerID == nil && left.version == "1", "\(left)")
        #expect(try await producer.store.task(id: fresh)?.version == "2")
        #expect(try await producer.store.task(id: own)?.version == "2")
        await second.shutdown()
        #expect(try await producer.store.task(id: old)?.status == .pending)

        // Version 3, which declares it continues version 1, runs it; the job keeps the version it began under.
        let third = try Self.worker(database, version: JobVersion("3", continues: ["1"]), runs: runs)
        try await third.start()
        #expect(try await producer.result(of: old, as: Versioned.self, timeout: .seconds(120)) == "3")
        #expect(try await producer.store.task(id: old)?.version == "1")
        await third.shutdown()
        #expect(runs.byWorker["2"]?.sorted() == [2, 3] && runs.byWorker["3"] == [1], "\(runs.byWorker)")
        await database.closeAll()
    }

    @Test(arguments: StoreKind.allCases)
    func aKindThatFailsJobsItCannotContinueFailsThemSayingWhyAndRunsNoneOfTheirCode(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let producer = try database.producer()
        let runs = Runs()
        let old = try await Self.jobBegunBy("1", n: 1, in: try database.open())
        let worker = try Self.worker(database, version: JobVersion("4", continues: ["2", "3"], otherwise: .fail), runs: runs)
        try await worker.start()
        let record = try await producer.wait(for: old, timeout: .seconds(120))
        #expect(record.status == .failed)
        #expect(record.attempt == 1, "no retry")
        #expect(record.errorType?.contains("IncompatibleJobVersionError") == true, "\(record)")
        #expect(
            record.errorDescription
                == "Version 1 of 'versioned' began this job; this worker runs version 4 (continues 2, 3), "
                + "which cannot continue it")
        // A job that recorded no version runs (and records 4).
        let fresh = try await producer.submit(Versioned.self, input: 2)
        #expect(try await producer.result(of: fresh, as: Versioned.self, timeout: .seconds(120)) == "4")
        await worker.shutdown()
        #expect(runs.byWorker == ["4": [2]], "the old job's code never ran: \(runs.byWorker)")
        await database.closeAll()
    }

    /// A retry asked of a worker whose version cannot continue the job is made in the store, for a worker that can.
    @Test(arguments: StoreKind.allCases)
    func aRetryAskedOfAWorkerThatCannotContinueTheJobIsLeftForOneThatCan(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let producer = try database.producer()
        let runs = Runs()
        let ended = Date(timeIntervalSinceNow: -30)
        var failed = TaskRecord(
            id: "v1-failed", name: "versioned", kind: "versioned", input: Data("5".utf8),
            options: TaskOptions.interactive.retryable(), status: .failed, errorType: "E", errorDescription: "boom",
            createdAt: Date(timeIntervalSinceNow: -60), startedAt: ended, updatedAt: ended, finishedAt: ended)
        failed.version = "1"
        _ = try await JobInserter(store: try database.open()).insert([failed])
        let second = try Self.worker(database, version: JobVersion("2"), runs: runs)
        try await second.start()
        try await second.retry(taskID: "v1-failed")
        let left = try #require(try await producer.store.task(id: "v1-failed"))
        #expect(left.status == .pending && left.ownerID == nil && left.attempt == 2 && left.version == "1", "\(left)")
        await second.shutdown()
        let third = try Self.worker(database, version: JobVersion("3", continues: ["1"]), runs: runs)
        try await third.start()
        #expect(try await producer.result(of: "v1-failed", as: Versioned.self, timeout: .seconds(120)) == "3")
        await third.shutdown()
        #expect(runs.byWorker == ["3": [5]], "\(runs.byWorker)")
        await database.closeAll()
    }

    @Test func anUnversionedKindContinuesAnyJobAndAVersionedOneContinuesThoseThatRecordedNone() async throws {
        let database = try SharedDatabase(.memory)
        let producer = try database.producer()
        let runs = Runs()
        let old = try await Self.jobBegunBy("7", n: 1, in: try database.open())
        let worker = try Self.worker(database, version: nil, runs: runs)
        try await worker.start()
        #expect(try await producer.result(of: old, as: Versioned.self, timeout: .seconds(120)) == "none")
        let fresh = try await producer.submit(Versioned.self, input: 2)
        #expect(try await producer.result(of: fresh, as: Versioned.self, timeout: .seconds(120)) == "none")
        #expect(try await producer.store.task(id: fresh)?.version == nil, "an unversioned worker records none")
        await worker.shutdown()
    }

    @Test(arguments: StoreKind.allCases)
    func ownersRecordTheirKindsVersions(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let worker = try Self.worker(database, version: JobVersion("2", continues: ["1"]), runs: Runs())
        try await worker.start()
        let owner = try #require(try await database.open().owners().first { $0.id == worker.ownerID })
        #expect(owner.versions == ["versioned": JobVersion("2", continues: ["1"])])
        #expect(owner.continues(kind: "versioned", version: "1") && !owner.continues(kind: "versioned", version: "0"))
        #expect(!owner.continues(kind: "other", version: nil), "a kind it did not register")
        await worker.shutdown()
        await database.closeAll()
    }
}
