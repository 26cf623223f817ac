import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Resumed and retrying jobs use the fleet (issue 37): a job resumed, or due for its retry, while the worker that held
/// it has no free slot is taken by another worker with one — from its checkpoint — rather than waiting for the first.
/// Two `progression-fleet-test` workers of one slot each, on SQLite and PostgreSQL.
@Suite(.serialized) struct ReleaseProcessTests {
    typealias Database = FleetProcessTests.Database
    typealias Hang = StallProcessTests.Hang

    @Test(arguments: Database.allCases)
    func aJobResumedOrDueForItsRetryWhileItsWorkerIsBusyRunsOnAnIdleOne(database: Database) async throws {
        let directory = try TemporaryDirectory()
        let db = try database.location(in: directory)
        let store = try await database.store(db)
        let ledger = LedgerFile(path: directory.file("ledger"))
        let jobs = try JobClient(store: store)
        let options = ["--kinds", "hang", "--concurrency", "1"]
        let a = try await FleetProcessTests.worker("A", db: db, ledger: ledger, in: directory, options)
        func progressctl(_ arguments: [String]) async throws {
            let run = try await ChildProcess.run("progressctl", ["--db", db] + arguments, in: directory)
            #expect(run.status == 0, "\(arguments): \(run.stderr)")
        }

        // A's job is paused mid-way: A's slot frees.
        let resumed = try await jobs.submit(Hang.self, input: .init(moves: 200, moveMilliseconds: 50, hangingAttempts: 0))
        try await poll("A to run the first job", timeout: .seconds(60)) { ledger.contains(prefix: "hang-moved \(resumed) 2") }
        try await progressctl(["pause", resumed])
        try await poll("the first job to pause", timeout: .seconds(60)) {
            try await store.task(id: resumed)?.status == .paused
        }
        // A runs a job that fails its first attempt (stalled) and waits a minute for its retry, released meanwhile; A
        // then takes a job that never ends: A has no free slot from there on.
        let retried = try await jobs.submit(
            Hang.self, input: .init(),
            options: JobOptions(
                options: Hang.options.stallLimit(.milliseconds(500), then: .retry)
                    .retryPolicy(.exponential(maxAttempts: 2, initialBackoff: .seconds(60), jitter: 0))))
        try await poll("the retried job's first attempt to fail", timeout: .seconds(60)) {
            try await store.task(id: retried).map { $0.status == .pending && $0.errorType != nil } ?? false
        }
        let waiting = try #require(try await store.task(id: retried))
        #expect(waiting.ownerID == nil, "released while it waits for its retry: \(waiting)")
        #expect(ledger.lines.filter { $0.hasPrefix("hang-begin \(retried) ") } == ["hang-begin \(retried) 1 A"])
        let busy = try await jobs.submit(Hang.self, input: .init(hangingAttempts: 1))
        try await poll("A to run the job that never ends", timeout: .seconds(60)) {
            ledger.contains(prefix: "hang-begin \(busy) 1 A")
        }
        let b = try await FleetProcessTests.worker("B", db: db, ledger: ledger, in: directory, options)
        // Its retry comes due (now, rather than in a minute) while A is busy; the paused job is resumed.
        try await progressctl(["run-now", retried])
        try await progressctl(["resume", resumed])

        // B runs both: the retry's second attempt, and the resumed job from its checkpoint.
        #expect(try await jobs.result(of: retried, as: Hang.self, timeout: .seconds(120)) == "B")
        #expect(try await jobs.result(of: resumed, as: Hang.self, timeout: .seconds(120)) == "B")
        #expect(ledger.contains(prefix: "hang-begin \(retried) 2 B"))
        #expect(ledger.contains(prefix: "hang-begin \(resumed) 2 B"), "B began it again from its checkpoint")
        #expect(try await store.task(id: busy)?.status == .running, "A was busy throughout")
        #expect(!ledger.contains(prefix: "hang-done \(resumed) A"))

        try await progressctl(["cancel", busy])
        try await FleetProcessTests.stop(a)
        try await FleetProcessTests.stop(b)
    }
}
