import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Resumed jobs use the fleet, across processes (issue 37's reproduction): with two `progression-bench fleet-test`
/// workers of one slot each, a job paused on the first, whose slot then runs another job, is continued by the second —
/// idle — once resumed with `progressctl resume`, from its checkpoint; the first never runs it again. On SQLite and
/// PostgreSQL.
@Suite(.serialized) struct HandOffProcessTests {
    typealias Database = FleetProcessTests.Database
    typealias Hang = StallProcessTests.Hang

    @Test(arguments: Database.allCases)
    func aJobResumedWhileItsWorkerIsBusyIsRunByTheIdleOne(database: Database) async throws {
        let directory = try TemporaryDirectory()
        let db = try database.location(in: directory)
        let store = try await database.store(db)
        let ledger = LedgerFile(path: directory.file("ledger"))
        let jobs = try JobClient(store: store)
        func progressctl(_ arguments: [String]) async throws -> ChildProcess.Outcome {
            let result = try await ChildProcess.run("progressctl", ["--db", db] + arguments, in: directory)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            return result
        }

        let a = try await FleetProcessTests.worker(
            "a", db: db, ledger: ledger, in: directory, ["--kinds", "hang", "--concurrency", "1"])
        // Its first attempt moves every 50 ms (a pause holds it at its next report) for 100,000 moves (83 minutes), so
        // that it is still running when the pause lands however long the machine takes to send it; the attempt after
        // the resume completes at once.
        let job = try await jobs.submit(
            Hang.self, input: .init(moves: 100_000, moveMilliseconds: 50, hangingAttempts: 0, laterMoves: 0))
        try await poll("the job to move on a", timeout: .seconds(60)) { ledger.contains(prefix: "hang-moved \(job) 1") }
        _ = try await progressctl(["pause", job])
        try await poll("the job to be paused", timeout: .seconds(60)) { try await store.task(id: job)?.status == .paused }
        // A's freed slot takes a job that hangs.
        let busy = try await jobs.submit(Hang.self, input: .init(hangingAttempts: 1))
        try await poll("a to run the hanging job", timeout: .seconds(60)) {
            ledger.contains(prefix: "hang-begin \(busy) 1 a")
        }
        let b = try await FleetProcessTests.worker(
            "b", db: db, ledger: ledger, in: directory, ["--kinds", "hang", "--concurrency", "1"])

        _ = try await progressctl(["resume", job])
        #expect(try await jobs.result(of: job, as: Hang.self, timeout: .seconds(120)) == "b")
        // B went on from the checkpoint a stored (its attempt count): the second begin is b's.
        #expect(
            ledger.lines.filter { $0.hasPrefix("hang-begin \(job) ") } == ["hang-begin \(job) 1 a", "hang-begin \(job) 2 b"])
        #expect(!ledger.contains(prefix: "hang-done \(job) a"))
        #expect(try await store.task(id: busy)?.status == .running, "a still runs the other job")

        _ = try await progressctl(["cancel", busy])
        try await FleetProcessTests.stop(a)
        try await FleetProcessTests.stop(b)
    }
}
