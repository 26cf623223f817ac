#if PostgreSQL
import Foundation
import Progression
import ProgressionPostgres
import ProgressionPostgresTestSupport

/// The job-throughput and recovery scenarios on PostgreSQL: a server on this machine, started by the bench
/// (`initdb` + `pg_ctl` in a temporary directory, a Unix socket), with PostgreSQL's durability settings
/// (`fsync=on`, `synchronous_commit=on`): a commit that returned survives a crash of the server.
enum PostgresThroughput {
    static let scenario = Scenario(
        name: "postgres",
        keys: [
            "jobs_per_s_postgres", "jobs_per_s_postgres_8", "recovery_all_claimed_ms_100k_postgres",
            "recovery_first_running_ms_100k_postgres",
        ]
    ) { context in
        let server = try LocalPostgresServer(durable: true)
        defer { server.stop() }
        context.log("PostgreSQL server started in \(server.directory) (fsync=on, synchronous_commit=on)")
        let count = context.sizes.submittedTasks
        // The writer commits every transition of the jobs in flight together (group commit): with more of them in
        // flight, each commit (and its WAL flush) carries more jobs.
        let wide = try await jobs(server: server, count: count, concurrency: 64)
        context.log("jobs, 64 in flight: \(FigureFormat.number(wide)) jobs/s")
        let narrow = try await jobs(server: server, count: count, concurrency: 8)
        context.log("jobs, 8 in flight: \(FigureFormat.number(narrow)) jobs/s")
        let jobsCount = context.sizes.recoveryJobs
        let recovery = try await recover(server: server, jobs: jobsCount, wait: context.sizes.recoveryClaimWait, context: context)
        var allClaimed = Figure(
            "recovery_all_claimed_ms_100k_postgres", recovery.allClaimed?.inMilliseconds, unit: "ms",
            target: .below(2_000),
            note: "start() until no root is held by the dead owner, \(FigureFormat.number(Double(jobsCount))) running "
                + "jobs of a dead owner, default configuration, PostgreSQL")
        if recovery.allClaimed == nil { allClaimed.notReachedWithin = context.sizes.recoveryClaimWait.inMilliseconds }
        return [
            Figure(
                "jobs_per_s_postgres", wide, unit: "jobs/s", target: .atLeast(5_000),
                note: "submit + run + complete of no-op jobs, PostgreSQL (synchronous_commit=on, Unix socket), 64 "
                    + "submitters and maxConcurrentTasks 64 (group commit), \(FigureFormat.number(Double(count))) jobs"),
            Figure(
                "jobs_per_s_postgres_8", narrow, unit: "jobs/s",
                note: "the same with 8 in flight, as jobs_per_s measures SQLite"),
            allClaimed,
            Figure(
                "recovery_first_running_ms_100k_postgres", recovery.firstRunning.inMilliseconds, unit: "ms",
                note: "register + start() until the first recovered job body runs, PostgreSQL"),
        ]
    }

    static func schema() -> String { "bench_\(UInt32.random(in: 0...UInt32.max))" }

    /// No-op jobs submitted by `concurrency` submitters and run `concurrency` at a time, until every completion is
    /// committed; jobs per second.
    static func jobs(server: LocalPostgresServer, count: Int, concurrency: Int) async throws -> Double {
        var storeConfiguration = server.configuration(schema: schema())
        storeConfiguration.maximumConnections = 8
        let store = try await PostgresTaskStore.started(configuration: storeConfiguration)
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .milliseconds(100)
        configuration.maxConcurrentTasks = concurrency
        let executor = TaskExecutor(store: store, configuration: configuration)
        let done = Latch(count: count)
        try executor.register("noop", input: SubmitThroughput.NoopInput.self) { _, _ in done.arrive() }
        let start = ContinuousClock.now
        _ = try await SubmitThroughput.submitAll(count: count, concurrency: concurrency) { _ in
            _ = try await executor.submit("noop", input: SubmitThroughput.NoopInput(), idempotencyKey: nil)
        }
        await done.wait()
        while await executor.graph().tasks.contains(where: { !$0.isFinished }) {
            try await Task.sleep(for: .milliseconds(1))
        }
        try await executor.flush()
        let total = ContinuousClock.now - start
        let stored = try await store.statistics().rootsByStatus["completed"] ?? 0
        await executor.shutdown()
        await store.close()
        guard stored == count else { throw BenchFailure("\(stored) of \(count) jobs are stored as completed") }
        return Double(count) / total.inSeconds
    }

    /// `jobs` running jobs of a dead owner (this host, a pid that does not exist); a new executor starts on them.
    static func recover(
        server: LocalPostgresServer, jobs: Int, wait: Duration, context: BenchContext
    ) async throws -> (firstRunning: Duration, allClaimed: Duration?) {
        let configuration = server.configuration(schema: schema())
        let builder = try await PostgresTaskStore.started(configuration: configuration)
        let base = Date().addingTimeInterval(-3_600)
        try await builder.saveOwner(
            OwnerRecord(id: RecoveryLatency.deadOwner, host: OwnerRecord.currentHost, pid: 999_999_999, startedAt: base, heartbeatAt: base))
        let input = try JSONEncoder().encode(RecoveryLatency.RecoveredInput())
        let built = ContinuousClock.now
        for first in stride(from: 0, to: jobs, by: 10_000) {
            var records: [TaskRecord] = []
            var events: [TaskEvent] = []
            for job in first..<min(jobs, first + 10_000) {
                let id = ListDatabase.id(root: job, node: 0)
                let created = base.addingTimeInterval(Double(job) / 1000)
                records.append(
                    TaskRecord(
                        id: id, name: "recovered \(job)", kind: RecoveryLatency.kind, input: input, status: .running,
                        progress: 0.25, ownerID: RecoveryLatency.deadOwner, createdAt: created,
                        startedAt: created.addingTimeInterval(0.005)))
                events.append(TaskEvent(taskID: id, rootID: id, kind: .created, at: created, attempt: 1))
                events.append(TaskEvent(taskID: id, rootID: id, kind: .started, at: created.addingTimeInterval(0.005), attempt: 1))
            }
            try await builder.insert(records, events: events)
        }
        try await builder.maintain(.vacuum)
        context.log(
            "built \(FigureFormat.number(Double(jobs))) running jobs of a dead owner in "
                + "\(String(format1: (ContinuousClock.now - built).inSeconds, decimals: 1)) s")
        guard try await builder.countUnfinishedRoots(heldBy: RecoveryLatency.deadOwner) == jobs else {
            throw BenchFailure("the dead owner does not hold \(jobs) jobs")
        }

        let store = try await PostgresTaskStore.started(configuration: configuration)
        let executor = TaskExecutor(store: store)
        let firstRun = SharedValue<ContinuousClock.Instant?>(nil)
        try executor.register(RecoveryLatency.kind, input: RecoveryLatency.RecoveredInput.self) { _, _ in
            let now = ContinuousClock.now
            firstRun.update { if $0 == nil { $0 = now } }
        }
        let start = ContinuousClock.now
        try await executor.start()
        var allClaimed: Duration?
        let deadline = start + wait
        while ContinuousClock.now < deadline {
            if try await builder.countUnfinishedRoots(heldBy: RecoveryLatency.deadOwner) == 0 {
                allClaimed = ContinuousClock.now - start
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        while firstRun.value == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        await executor.shutdown()
        await store.close()
        await builder.close()
        guard let first = firstRun.value else { throw BenchFailure("no recovered job ran within the wait") }
        context.log(
            "recovery: first job running after \(String(format1: (first - start).inMilliseconds, decimals: 1)) ms, "
                + (allClaimed.map { "all claimed after \(String(format1: $0.inMilliseconds, decimals: 0)) ms" } ?? "not all claimed"))
        return (first - start, allClaimed)
    }
}
#endif
