import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Versions across deploys, across processes (issue 37): a `progression-bench fleet-test` worker of version 1 begins a
/// job and is killed; a worker of version 2 leaves the job (and runs others) while `progressctl doctor` says which
/// version waits for which workers; once a worker of a version that declares it continues version 1 starts, that one
/// finishes it from its checkpoint. On SQLite and PostgreSQL.
@Suite(.serialized) struct JobVersionProcessTests {
    typealias Database = FleetProcessTests.Database
    typealias Hang = StallProcessTests.Hang

    @Test(arguments: Database.allCases)
    func aJobBegunByAKilledVersionWaitsForAWorkerThatCanContinueIt(database: Database) async throws {
        let directory = try TemporaryDirectory()
        let db = try database.location(in: directory)
        let store = try await database.store(db)
        let ledger = LedgerFile(path: directory.file("ledger"))
        let jobs = try JobClient(store: store)

        // Version 1 begins the job (its first attempt hangs) and dies.
        let first = try await FleetProcessTests.worker(
            "a", db: db, ledger: ledger, in: directory, ["--kinds", "hang", "--job-version", "1"])
        let job = try await jobs.submit(Hang.self, input: .init(hangingAttempts: 1))
        try await poll("version 1 to begin the job", timeout: .seconds(60)) {
            ledger.contains(prefix: "hang-begin \(job) 1 a")
        }
        #expect(try await store.task(id: job)?.version == "1", "a producer's job records its first claimer's version")
        first.signal(SIGKILL)
        _ = try await first.waitForExit(timeout: .seconds(60))

        // Version 2 leaves it, and says so through doctor; it runs a later job of the same kind.
        let second = try await FleetProcessTests.worker(
            "b", db: db, ledger: ledger, in: directory, ["--kinds", "hang", "--job-version", "2"])
        let later = try await jobs.submit(Hang.self, input: .init(hangingAttempts: 0))
        #expect(try await jobs.result(of: later, as: Hang.self, timeout: .seconds(120)) == "b")
        try await poll("doctor to say version 1 waits", timeout: .seconds(60)) {
            let doctor = try await ChildProcess.run("progressctl", ["--db", db, "doctor", "--json"], in: directory)
            let report = try JSONSerialization.jsonObject(with: Data(doctor.stdout.utf8)) as? [String: Any]
            let waiting = report?["versionsWithoutWorker"] as? [[String: Any]] ?? []
            return waiting.contains {
                $0["kind"] as? String == Hang.name && $0["version"] as? String == "1" && $0["jobs"] as? Int == 1
                    && $0["workerVersions"] as? [String] == ["2"]
            }
        }
        let text = try await ChildProcess.run("progressctl", ["--db", db, "doctor"], in: directory)
        #expect(
            text.stdout.contains("1 job of 'fleet.hang' begun by version 1 wait for a worker that continues it"),
            "\(text.stdout)")
        let shown = try await ChildProcess.run("progressctl", ["--db", db, "show", job], in: directory)
        #expect(shown.stdout.contains("began under version 1"), "\(shown.stdout)")
        #expect(!ledger.contains(prefix: "hang-begin \(job) 2"), "version 2 did not run it")
        try await FleetProcessTests.stop(second)

        // Version 3, which continues version 1, finishes it: its second attempt, from the checkpoint of the first.
        let third = try await FleetProcessTests.worker(
            "c", db: db, ledger: ledger, in: directory,
            ["--kinds", "hang", "--job-version", "3", "--continues", "1,2"])
        #expect(try await jobs.result(of: job, as: Hang.self, timeout: .seconds(120)) == "c")
        #expect(ledger.lines.filter { $0.hasPrefix("hang-begin \(job) ") } == ["hang-begin \(job) 1 a", "hang-begin \(job) 2 c"])
        #expect(try await store.task(id: job)?.version == "1", "it keeps the version it began under")
        try await FleetProcessTests.stop(third)

        // A worker told an unknown policy refuses to start, saying why.
        let refused = try FleetProcessTests.start(
            ["worker", "--db", db, "--ledger", ledger.path, "--job-version", "4", "--otherwise", "skip"], in: directory)
        #expect(try await refused.waitForExit(timeout: .seconds(60)) != 0)
        #expect(refused.stderr.contains("unknown version policy 'skip'"), "\(refused.stderr)")
    }
}
