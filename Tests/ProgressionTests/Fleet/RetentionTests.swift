import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// A job that fails with its message.
struct Refuser: JobKind {
    struct Refused: Error, CustomStringConvertible { var description: String }
    static let name = "refuse"

    func run(_ input: String, context: any TaskContext) async throws -> Int { throw Refused(description: input) }
}

/// Retention (issue 37): finished jobs are deleted by the fleet past their status's period, one executor per turn, in
/// small batches; the policy alone, the store's share, and executors on a manual clock.
struct RetentionTests {
    // MARK: The policy

    @Test(arguments: [
        (TaskStatus.completed, 86_400.0 as Double?), (.cancelled, 86_400), (.failed, 604_800), (.pending, nil),
        (.running, nil), (.paused, nil),
    ])
    func theDefaultKeepsADayAndFailedJobsAWeek(status: TaskStatus, seconds: Double?) {
        #expect(RetentionPolicy.default.period(for: status).map { Double($0.components.seconds) } == seconds)
        #expect(RetentionPolicy.keepEverything.period(for: status) == nil)
    }

    @Test func cutoffsAreTheFinishedBeforeTimeOfEachStatusItDeletes() throws {
        let now = Date(timeIntervalSince1970: 2_000_000_000)
        let policy = try RetentionPolicy(completed: .seconds(60), failed: nil, cancelled: .seconds(3_600))
        let cutoffs = policy.cutoffs(at: now)
        #expect(cutoffs.map(\.status) == [.completed, .cancelled])
        #expect(cutoffs.map(\.finishedBefore) == [now.addingTimeInterval(-60), now.addingTimeInterval(-3_600)])
        #expect(RetentionPolicy.keepEverything.cutoffs(at: now).isEmpty)
        #expect(!RetentionPolicy.keepEverything.deletesAnything && RetentionPolicy.default.deletesAnything)
    }

    @Test(arguments: [
        (Duration.zero, Duration.seconds(60), 500), (.seconds(-1), .seconds(60), 500), (.seconds(1), .zero, 500),
        (.seconds(1), .seconds(60), 0),
    ])
    func aPeriodIntervalOrBatchThatIsNotPositiveIsRefused(period: Duration, interval: Duration, batch: Int) {
        #expect(throws: ProgressionError.self) {
            try RetentionPolicy(completed: period, failed: nil, cancelled: nil, interval: interval, batchSize: batch)
        }
    }

    // MARK: The store's share

    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func finishedJob(_ id: String, _ status: TaskStatus, finishedAt: Date, parentJob: String? = nil) -> [TaskRecord] {
        var job = makeRecord(id: id, status: status, createdAt: t0, kind: "k")
        job.finishedAt = finishedAt
        job.parentJobID = parentJob
        var step = makeRecord(id: "\(id).1", parent: job, status: status, createdAt: t0)
        step.finishedAt = finishedAt
        return [job, step]
    }

    @Test(arguments: StoreKind.allCases)
    func aPruneTakesAtMostItsLimitOldestFirstWithSignalsAndKeepsChildJobsUntilTheirParentHasGone(kind: StoreKind)
        async throws
    {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        var records: [TaskRecord] = []
        for (index, id) in ["a", "b", "c"].enumerated() {
            records += finishedJob(id, .completed, finishedAt: t0.addingTimeInterval(Double(10 + index)))
        }
        let parent = makeRecord(id: "parent", status: .running, owner: "w", kind: "k")
        records.append(parent)
        records += finishedJob("child", .completed, finishedAt: t0.addingTimeInterval(1), parentJob: "parent")
        try await store.insert(records, events: [])
        _ = try await store.sendSignal(to: "parent", name: "go", payload: nil, at: t0)

        let cutoff = t0.addingTimeInterval(100)
        let first = try await store.prune(finishedBefore: cutoff, statuses: [.completed], dryRun: false, limit: 2)
        #expect(first.roots == 2 && first.tasks == 4)
        for gone in ["a", "a.1", "b", "b.1"] { #expect(try await store.task(id: gone) == nil, "\(gone)") }
        #expect(try await store.task(id: "c") != nil, "the newest waits for the next batch")
        #expect(try await store.task(id: "child") != nil, "a child job stays while its parent is there")
        let second = try await store.prune(finishedBefore: cutoff, statuses: [.completed], dryRun: false, limit: 2)
        #expect(second.roots == 1)
        #expect(try await store.task(id: "c") == nil)

        // The parent ends: it goes with its signal, and its child once it has gone (a retried parent would run its
        // failed children again, and find them).
        var ended = try #require(try await store.task(id: "parent"))
        ended.status = .cancelled
        ended.finishedAt = t0.addingTimeInterval(20)
        ended.ownerID = nil
        _ = try await store.apply(
            TaskBatch(updates: [TaskUpdate(ended, columns: [.status, .finishedAt, .owner])], owner: nil))
        let parentGone = try await store.prune(
            finishedBefore: cutoff, statuses: [.completed, .cancelled], dryRun: false, limit: 10)
        #expect(parentGone.roots == 1)
        #expect(try await store.task(id: "parent") == nil)
        #expect(try await store.task(id: "child") != nil)
        #expect(try await store.signals(of: "parent").isEmpty)
        let childGone = try await store.prune(
            finishedBefore: cutoff, statuses: [.completed, .cancelled], dryRun: false, limit: 10)
        #expect(childGone.roots == 1)
        #expect(try await store.task(id: "child") == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func aJobThatAnUnfinishedJobWaitsForIsKeptUntilThatOneEnds(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        let dependency = finishedJob("dependency", .completed, finishedAt: t0.addingTimeInterval(1))
        var waiting = makeRecord(id: "waiting", createdAt: t0, kind: "k")
        waiting.wait = .jobs
        waiting.nextAttemptAt = JobWait.untilReleased
        try await store.insert(
            dependency + [waiting], events: [],
            dependencies: [JobDependency(jobID: "waiting", dependsOn: "dependency", onFailure: .cancel)])
        let cutoff = t0.addingTimeInterval(100)
        #expect(try await store.prune(finishedBefore: cutoff, statuses: [.completed], dryRun: false, limit: 10).roots == 0)
        #expect(try await store.task(id: "dependency") != nil, "the waiting job reads its end (and result) later")
        var ended = try #require(try await store.task(id: "waiting"))
        ended.status = .cancelled
        ended.finishedAt = t0.addingTimeInterval(2)
        _ = try await store.apply(TaskBatch(updates: [TaskUpdate(ended, columns: [.status, .finishedAt])], owner: nil))
        #expect(try await store.prune(finishedBefore: cutoff, statuses: [.completed], dryRun: false, limit: 10).roots == 1)
        #expect(try await store.task(id: "dependency") == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func aDutysTurnGoesToOneExecutorWhichMayRenewItUntilItIsDueForOthers(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        let next = t0.addingTimeInterval(60)
        #expect(try await store.takeDutyTurn("retention", owner: "a", now: t0, nextAt: next))
        #expect(try await store.takeDutyTurn("retention", owner: "b", now: t0, nextAt: next) == false)
        #expect(
            try await store.takeDutyTurn("retention", owner: "a", now: t0.addingTimeInterval(59), nextAt: next),
            "its holder renews its turn")
        #expect(try await store.takeDutyTurn("other", owner: "b", now: t0, nextAt: next), "each duty has its own turn")
        #expect(try await store.takeDutyTurn("retention", owner: "b", now: next, nextAt: next.addingTimeInterval(60)))
        #expect(try await store.takeDutyTurn("retention", owner: "a", now: next, nextAt: next.addingTimeInterval(60)) == false)
    }

    // MARK: Executors

    @Test(arguments: StoreKind.allCases)
    func finishedJobsAreDeletedByTheFleetPastTheirStatusesPeriod(kind: StoreKind) async throws {
        let clock = ManualClock()
        let database = try SharedDatabase(kind)
        var workers: [TaskExecutor] = []
        for name in ["a", "b"] {
            let worker = try database.worker(slots: 2, clock: clock)
            try worker.register(Doubler(worker: name))
            try worker.register(Refuser())
            try await worker.start()
            workers.append(worker)
        }
        let producer = try database.producer(clock: clock)
        let completed = try await producer.submit(Doubler.self, input: .init(n: 1))
        let failed = try await producer.submit(Refuser.self, input: "no")
        // The producer's waits poll on the manual clock: the test moves it.
        try await poll("the jobs to finish") {
            clock.advance(by: .milliseconds(100))
            guard try await producer.job(completed)?.status == .completed else { return false }
            return try await producer.job(failed)?.status == .failed
        }

        // A day and a turn later the completed job is gone; the failed one stays its week.
        clock.advance(by: .seconds(86_400))
        try await poll("the completed job to be deleted") {
            clock.advance(by: .seconds(5))
            return try await producer.job(completed) == nil
        }
        #expect(try await producer.job(failed)?.status == .failed)
        clock.advance(by: .seconds(6 * 86_400))
        try await poll("the failed job to be deleted") {
            clock.advance(by: .seconds(5))
            return try await producer.job(failed) == nil
        }
        for worker in workers { await worker.shutdown() }
        await database.closeAll()
    }

    @Test func keepEverythingDeletesNothing() async throws {
        let clock = ManualClock()
        let database = try SharedDatabase(.sqlite)
        let worker = try database.worker(slots: 1, clock: clock) { $0.retention = .keepEverything }
        try worker.register(Doubler(worker: "a"))
        try await worker.start()
        let producer = try database.producer(clock: clock)
        let id = try await producer.submit(Doubler.self, input: .init(n: 1))
        try await poll("the job to complete") {
            clock.advance(by: .milliseconds(100))
            return try await producer.job(id)?.status == .completed
        }
        // A year later, and turns had there been any: the job is still there.
        clock.advance(by: .seconds(365 * 86_400))
        let deleted = await eventually(timeout: .seconds(1)) {
            clock.advance(by: .seconds(60))
            return (try? await producer.job(id)) == nil
        }
        #expect(!deleted)
        #expect(try await producer.job(id)?.status == .completed)
        await worker.shutdown()
        await database.closeAll()
    }
}
