import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Retention across processes (issue 37): two `progression-bench fleet-test` worker processes with a retention of a
/// second delete the jobs they finished — the fleet's turn taken by one of them at a time in the store — while they
/// keep running new ones; unfinished jobs are never deleted. On SQLite and PostgreSQL.
@Suite(.serialized) struct RetentionProcessTests {
    typealias Database = FleetProcessTests.Database
    typealias Hang = StallProcessTests.Hang

    @Test(arguments: Database.allCases)
    func twoWorkerProcessesDeleteWhatFinishedPastItsPeriodAndKeepTheRest(database: Database) async throws {
        let directory = try TemporaryDirectory()
        let db = try database.location(in: directory)
        let store = try await database.store(db)
        let ledger = LedgerFile(path: directory.file("ledger"))
        let jobs = try JobClient(store: store)
        let options = ["--kinds", "hang", "--concurrency", "4", "--retention", "1"]
        let a = try await FleetProcessTests.worker("a", db: db, ledger: ledger, in: directory, options)
        let b = try await FleetProcessTests.worker("b", db: db, ledger: ledger, in: directory, options)
        // One job that never finishes, and forty that complete at once.
        let hanging = try await jobs.submit(Hang.self, input: .init(hangingAttempts: 1))
        let quick = try await jobs.submit(Hang.self, inputs: Array(repeating: .init(hangingAttempts: 0), count: 40))
        try await poll("the quick jobs to run", timeout: .seconds(120)) {
            ledger.lines.filter { $0.hasPrefix("hang-done ") }.count == 40
        }
        try await poll("the finished jobs to be deleted", timeout: .seconds(120)) {
            var left = 0
            for id in quick where try await store.task(id: id) != nil { left += 1 }
            return left == 0
        }
        #expect(try await store.task(id: hanging)?.status == .running, "an unfinished job is kept")
        #expect(ledger.lines.filter { $0.hasPrefix("hang-begin ") }.count == 41, "each job ran once")
        _ = try await ChildProcess.run("progressctl", ["--db", db, "cancel", hanging], in: directory)
        try await FleetProcessTests.stop(a)
        try await FleetProcessTests.stop(b)
    }
}
