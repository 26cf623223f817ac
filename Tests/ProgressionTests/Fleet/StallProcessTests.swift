import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Stalled jobs across processes (issue 37): a job whose code hangs in a `progression-bench fleet-test` worker, while
/// that worker's heartbeat stays healthy, is shown as stalled by `progressctl list` and `show` and counted in the
/// fleet's gauges once it has not moved for its limit; its kind's action retries or cancels it. On SQLite and
/// PostgreSQL.
@Suite(.serialized) struct StallProcessTests {
    typealias Database = FleetProcessTests.Database

    /// The fleet tool's hanging kind, as a producer names it (its code runs in the worker).
    struct Hang: JobKind {
        struct Input: Codable, Sendable {
            var moves = 0
            var moveMilliseconds = 100
            var hangingAttempts = 1
            var laterMoves: Int?
        }
        static let name = "fleet.hang"
        static let options = TaskOptions.interactive.retryable()
        func run(_ input: Input, context: any TaskContext) async throws -> String { fatalError("run by the workers") }
    }

    @Test(arguments: Database.allCases)
    func aHungJobIsShownStalledPastItsLimitAndItsActionRetriesOrCancelsIt(database: Database) async throws {
        let directory = try TemporaryDirectory()
        let db = try database.location(in: directory)
        let store = try await database.store(db)
        let backend = try #require(store as? any TaskStoreBackend)
        let ledger = LedgerFile(path: directory.file("ledger"))
        let jobs = try JobClient(store: store)
        let worker = try await FleetProcessTests.worker(
            "w1", db: db, ledger: ledger, in: directory, ["--kinds", "hang", "--concurrency", "4"])
        let limit = Duration.seconds(1)

        // Flag only: it moves three times, then hangs; every read agrees with the rule on the row's last change, and
        // it is flagged once that is older than the limit (not before: the limit plus the time of one read). Its
        // reports are written behind: under load (CI's whole suite), a report can be stored more than the limit after
        // the one before it, and the row is then flagged, as the rule says, until the next is stored. So the wait is
        // for the row that holds the last report (0.75) to be flagged, whatever the lag of the writer.
        let submitted = Date()
        let flagged = try await jobs.submit(
            Hang.self, input: .init(moves: 3, moveMilliseconds: 200),
            options: JobOptions(options: Hang.options.stallLimit(limit)))
        try await poll("the hung job to be shown stalled after its last report", timeout: .seconds(60)) {
            guard let record = try await store.task(id: flagged), record.status == .running else { return false }
            let now = Date()
            let stalled = record.stalledFor(at: now) != nil
            #expect(stalled == (now.timeIntervalSince(record.updatedAt) > limit.seconds), "\(record.updatedAt) at \(now)")
            if !stalled { #expect(record.displayStatus(at: now) == "running") }
            guard record.progress.map({ $0 >= 0.75 }) == true else { return false }
            // Its last report counts as movement: the row's last change is that report's, made three moves of
            // 200 ms after the submit at the earliest.
            #expect(record.updatedAt.timeIntervalSince(submitted) >= 0.55, "\(record.updatedAt), submitted \(submitted)")
            return stalled
        }
        #expect(ledger.contains(prefix: "hang-moved \(flagged) 3"), "it moved before it hung")

        let listed = try await ChildProcess.run("progressctl", ["--db", db, "list", "--json"], in: directory)
        #expect(listed.status == 0, "\(listed.stderr)")
        let row = try JobTreeProcessTests.root(flagged, in: listed.stdout)
        #expect(row["state"] as? String == "stalled", "\(row)")
        #expect((row["stalledSeconds"] as? Double).map { $0 > limit.seconds } == true, "\(row)")
        #expect(row["status"] as? String == "running")
        let table = try await ChildProcess.run("progressctl", ["--db", db, "list"], in: directory)
        #expect(table.stdout.contains("stalled"), "\(table.stdout)")
        let shown = try await ChildProcess.run("progressctl", ["--db", db, "show", flagged], in: directory)
        #expect(shown.status == 0 && shown.stdout.contains("(limit 1 s)"), "\(shown.stdout)")
        let gauges = try await FleetGauges.read(from: backend, at: Date(), ownerStaleAfter: .seconds(3600))
        #expect(gauges.kinds[Hang.name]?.stalled == 1, "\(gauges)")
        #expect(gauges.prometheusText.contains("progression_jobs_stalled{kind=\"fleet.hang\"} 1"))
        #expect(try await store.task(id: flagged)?.status == .running, "a flag does not stop it")

        // Retry: the first attempt fails as stalled, the second completes.
        let retried = try await jobs.submit(
            Hang.self, input: .init(),
            options: JobOptions(
                options: Hang.options.stallLimit(limit, then: .retry)
                    .retryPolicy(.exponential(maxAttempts: 2, initialBackoff: .milliseconds(50), jitter: 0))))
        #expect(try await jobs.result(of: retried, as: Hang.self, timeout: .seconds(120)) == "w1")
        #expect(ledger.lines.filter { $0.hasPrefix("hang-begin \(retried) ") } == ["hang-begin \(retried) 1 w1", "hang-begin \(retried) 2 w1"])
        #expect(try await store.task(id: retried)?.attempt == 2)
        let failure = try await store.events(EventQuery(taskID: retried)).first { $0.kind == .failed }
        #expect(failure?.message?.contains("stalled") == true, "\(String(describing: failure))")

        // Cancel: the job ends cancelled, saying why; its code did not finish.
        let cancelled = try await jobs.submit(
            Hang.self, input: .init(), options: JobOptions(options: Hang.options.stallLimit(limit, then: .cancel)))
        try await poll("the stalled job to be cancelled", timeout: .seconds(60)) {
            try await store.task(id: cancelled)?.status == .cancelled
        }
        #expect(!ledger.contains(prefix: "hang-done \(cancelled) "))

        _ = try await ChildProcess.run("progressctl", ["--db", db, "cancel", flagged], in: directory)
        try await FleetProcessTests.stop(worker)
    }
}
