#if PostgreSQL
import Foundation
import Progression
import ProgressionPostgres
import ProgressionPostgresTestSupport

/// The job-throughput and recovery scenarios on PostgreSQL: a server given by `--postgres-url` (started by the caller
/// with the settings to measure), or a throwaway one the bench starts on this machine (`initdb` + `pg_ctl` in a
/// temporary directory, a Unix socket) with PostgreSQL's stock settings (`fsync=on`, `synchronous_commit=on`, the
/// defaults `initdb` writes): a commit that returned survives a crash of the server. Each measurement uses a schema
/// of its own, dropped after it.
enum PostgresThroughput {
    /// The scenarios, each on a server of its own; `--only postgres` selects them all.
    static let scenarios = [jobsScenario, recoveryScenario, fleetScenario, fanoutScenario, soakScenario, latencyScenario]

    /// The latency of one job, as on SQLite (``JobLatency``).
    static let latencyScenario = Scenario(
        name: "postgres-latency", group: "postgres", keys: JobLatency.keys("_postgres")
    ) { context in
        try await withServer(context) { base in
            try await JobLatency.figures(on: { database(base: base) }, suffix: "_postgres", p50Target: 3, context: context)
        }
    }

    /// Running for months, as on SQLite (``SoakBench``).
    static let soakScenario = Scenario(name: "postgres-soak", group: "postgres", keys: SoakBench.keys("_postgres")) {
        context in
        try await withServer(context) { base in
            try await SoakBench.figures(on: { database(base: base) }, suffix: "_postgres", context: context)
        }
    }

    /// Job trees, as on SQLite (``FanoutBench``).
    static let fanoutScenario = Scenario(
        name: "postgres-fanout", group: "postgres", keys: FanoutBench.keys("_postgres")
    ) { context in
        try await withServer(context) { base in
            try await FanoutBench.figures(
                on: { database(base: base) }, suffix: "_postgres", target: 1_500, context: context)
        }
    }

    /// Jobs per second at 1, 8 and 64 in flight; `--only jobs_per_s_postgres_8` runs that one alone.
    static let jobsKeys = [
        "jobs_per_s_postgres_1", "jobs_per_s_postgres_8", "jobs_per_s_postgres_64", "jobs_per_s_postgres_8_ungathered",
    ]
    static let jobsScenario = Scenario(name: "postgres-jobs", group: "postgres", keys: jobsKeys) { context in
        try await withServer(context) { base in
            let count = context.sizes.submittedTasks
            var figures: [Figure] = []
            for concurrency in [1, 8, 64] where context.runs("jobs_per_s_postgres_\(concurrency)", among: jobsKeys) {
                // Fewer jobs at 1 in flight: each waits for its own commits.
                let jobs = concurrency == 1 ? max(200, count / 10) : count
                let rate = try await Self.jobs(base: base, count: jobs, concurrency: concurrency)
                context.log("jobs, \(concurrency) in flight: \(FigureFormat.number(rate)) jobs/s")
                figures.append(
                    Figure(
                        "jobs_per_s_postgres_\(concurrency)", rate, unit: "jobs/s",
                        target: concurrency == 64 ? .atLeast(5_000) : nil,
                        note: "submit + run + complete of no-op jobs, PostgreSQL (synchronous_commit=on), \(concurrency) "
                            + "submitter\(concurrency == 1 ? "" : "s") and maxConcurrentTasks \(concurrency), "
                            + "\(FigureFormat.number(Double(jobs))) jobs"))
            }
            if context.runs("jobs_per_s_postgres_8_ungathered", among: jobsKeys) {
                let rate = try await Self.jobs(base: base, count: count, concurrency: 8, gathering: .zero)
                context.log("jobs, 8 in flight, no gathering pause: \(FigureFormat.number(rate)) jobs/s")
                figures.append(
                    Figure(
                        "jobs_per_s_postgres_8_ungathered", rate, unit: "jobs/s",
                        note: "as jobs_per_s_postgres_8, with commitGatheringWindow = 0 (the writer takes its next batch "
                            + "as soon as a commit returns), the same run"))
            }
            return figures
        }
    }

    /// 100,000 running jobs of a dead owner: the first recovered job, and every one claimed.
    static let recoveryScenario = Scenario(
        name: "postgres-recovery", group: "postgres",
        keys: [
            "recovery_all_claimed_ms_100k_postgres", "recovery_claim_floor_ms_100k_postgres",
            "recovery_first_running_ms_100k_postgres", "recovery_dead_worker_claimed_ms_100k_postgres",
        ]
    ) { context in
        try await withServer(context) { base in
            let jobsCount = context.sizes.recoveryJobs
            let recovery = try await recover(
                base: base, jobs: jobsCount, wait: context.sizes.recoveryClaimWait, context: context)
            var allClaimed = Figure(
                "recovery_all_claimed_ms_100k_postgres", recovery.allClaimed?.inMilliseconds, unit: "ms",
                target: .below(1_000),
                note: "\(FigureFormat.number(Double(jobsCount))) running jobs of a dead owner: claimRoots in chunks of "
                    + "10,000 back to back until none is held by it (an executor claims only as many as its free slots)")
            if recovery.allClaimed == nil { allClaimed.notReachedWithin = context.sizes.recoveryClaimWait.inMilliseconds }
            return [
                allClaimed,
                Figure(
                    "recovery_claim_floor_ms_100k_postgres", recovery.floor.inMilliseconds, unit: "ms",
                    note: "the roots just claimed given another owner again by the claim's UPDATE alone (10,000 ids a "
                        + "statement, each in its transaction, no read or lock), after a VACUUM: the server's cost of "
                        + "the rows, the same run"),
                Figure(
                    "recovery_first_running_ms_100k_postgres", recovery.firstRunning.inMilliseconds, unit: "ms",
                    note: "register + start() until the first recovered job body runs, PostgreSQL"),
                try await deadWorker(base: base, backlog: jobsCount, wait: context.sizes.recoveryClaimWait, context: context),
            ]
        }
    }

    /// What a dead worker of a fleet leaves: the jobs its slots ran, held by it, and a backlog that is nobody's. A
    /// worker holds what its slots run, and the jobs it paused or that wait for a retry; a job submitted by a producer
    /// or by a worker's own `submit` waits unowned (`aWorkersOwnSubmitsWaitUnownedAndItHoldsOnlyWhatItRuns`). So 64
    /// running jobs of a dead owner (the oldest, as its claims took them) in front of `backlog` pending ones. A new
    /// worker with 64 slots starts: the time until the dead owner holds nothing.
    static func deadWorker(
        base: PostgresTaskStore.Configuration, backlog: Int, wait: Duration, context: BenchContext
    ) async throws -> Figure {
        var configuration = base
        configuration.schema = schema()
        let builder = try await PostgresTaskStore.started(configuration: configuration)
        do {
            let figure = try await deadWorker(builder: builder, configuration: configuration, backlog: backlog, wait: wait, context: context)
            try? await builder.dropSchema()
            await builder.close()
            return figure
        } catch {
            try? await builder.dropSchema()
            await builder.close()
            throw error
        }
    }

    private static func deadWorker(
        builder: PostgresTaskStore, configuration: PostgresTaskStore.Configuration, backlog: Int, wait: Duration,
        context: BenchContext
    ) async throws -> Figure {
        let slots = 64
        try await insertJobsOfADeadOwner(into: builder, count: backlog + slots, running: slots)
        guard try await builder.countUnfinishedRoots(heldBy: RecoveryLatency.deadOwner) == slots else {
            throw BenchFailure("the dead worker does not hold its \(slots) jobs")
        }

        let store = try await PostgresTaskStore.started(configuration: configuration)
        var executorConfiguration = TaskExecutor.Configuration()
        executorConfiguration.maxConcurrentTasks = slots
        let executor = TaskExecutor(store: store, configuration: executorConfiguration)
        var claimed: Duration?
        do {
            try executor.register(RecoveryLatency.kind, input: RecoveryLatency.RecoveredInput.self) { _, _ in }
            let start = ContinuousClock.now
            try await executor.start()
            while ContinuousClock.now < start + wait {
                if try await builder.countUnfinishedRoots(heldBy: RecoveryLatency.deadOwner) == 0 {
                    claimed = ContinuousClock.now - start
                    break
                }
                // A count is a round trip; a short pause leaves the cores to the claim being timed.
                try await Task.sleep(for: .milliseconds(1))
            }
        } catch {
            await executor.shutdown()
            await store.close()
            throw error
        }
        await executor.shutdown()
        await store.close()
        context.log(
            "dead worker: its \(slots) jobs "
                + (claimed.map { "all claimed \(String(format1: $0.inMilliseconds, decimals: 1)) ms after start()" }
                    ?? "not all claimed within \(String(format1: wait.inSeconds, decimals: 0)) s")
                + " (\(FigureFormat.number(Double(backlog))) unowned behind them)")
        var figure = Figure(
            "recovery_dead_worker_claimed_ms_100k_postgres", claimed?.inMilliseconds, unit: "ms", target: .below(1_000),
            note: "a dead 64-slot worker's 64 running jobs in front of \(FigureFormat.number(Double(backlog))) unowned "
                + "pending ones: start() of a new 64-slot worker until the dead owner holds nothing, PostgreSQL")
        if claimed == nil { figure.notReachedWithin = wait.inMilliseconds }
        return figure
    }

    /// `count` jobs of the registered kind, created a millisecond apart an hour ago: the first `running` of them
    /// running and held by a dead owner (this host, a pid that does not exist), the others pending and unowned. In
    /// chunks of 10,000, then vacuumed.
    static func insertJobsOfADeadOwner(into builder: PostgresTaskStore, count: Int, running: Int) async throws {
        let base = Date().addingTimeInterval(-3_600)
        try await builder.saveOwner(
            OwnerRecord(id: RecoveryLatency.deadOwner, host: OwnerRecord.currentHost, pid: 999_999_999, startedAt: base, heartbeatAt: base))
        let input = try JSONEncoder().encode(RecoveryLatency.RecoveredInput())
        for first in stride(from: 0, to: count, by: 10_000) {
            var records: [TaskRecord] = []
            var events: [TaskEvent] = []
            for job in first..<min(count, first + 10_000) {
                let id = ListDatabase.id(root: job, node: 0)
                let created = base.addingTimeInterval(Double(job) / 1000)
                let started = created.addingTimeInterval(0.005)
                let ran = job < running
                records.append(
                    TaskRecord(
                        id: id, name: "job \(job)", kind: RecoveryLatency.kind, input: input,
                        status: ran ? .running : .pending, progress: ran ? 0.25 : 0,
                        ownerID: ran ? RecoveryLatency.deadOwner : nil, createdAt: created, startedAt: ran ? started : nil))
                events.append(TaskEvent(taskID: id, rootID: id, kind: .created, at: created, attempt: 1))
                if ran { events.append(TaskEvent(taskID: id, rootID: id, kind: .started, at: started, attempt: 1)) }
            }
            try await builder.insert(records, events: events)
        }
        try await builder.maintain(.vacuum)
    }

    /// The fleet and delayed jobs, as on SQLite: each process's store a connection pool of its own.
    static let fleetScenario = Scenario(
        name: "postgres-fleet", group: "postgres",
        keys: ["delay_p50_ms_postgres", "delay_p99_ms_postgres"] + FleetThroughput.keys.map { $0 + "_postgres" }
    ) { context in
        try await withServer(context) { base in
            let make: @Sendable () async throws -> BenchDatabase = { database(base: base) }
            return try await FleetThroughput.figures(on: make, suffix: "_postgres", context: context)
                + TimeBench.delayFigures(on: make, suffix: "_postgres", context: context)
        }
    }

    /// Runs `body` on the server of `--postgres-url` (started by the caller with the settings to measure), or on a
    /// throwaway one started on this machine with PostgreSQL's stock settings (it says which).
    static func withServer(
        _ context: BenchContext, _ body: (PostgresTaskStore.Configuration) async throws -> [Figure]
    ) async throws -> [Figure] {
        if let url = context.options.postgresURL {
            let base = try PostgresTaskStore.Configuration(url: url)
            context.log("PostgreSQL server: \(base.displayURL) (started by the caller)")
            return try await body(base)
        }
        let server = try LocalPostgresServer(durable: true, stock: true)
        defer { server.stop() }
        context.log(
            "PostgreSQL server started in \(server.directory), stock settings (initdb's defaults) but: "
                + server.settings.joined(separator: " "))
        return try await body(server.configuration(schema: "progression"))
    }

    static func schema() -> String { "bench_\(UInt32.random(in: 0...UInt32.max))" }

    /// A schema of its own on the server of `base`: each connection a store (with its pool), the first one migrating it.
    static func database(base: PostgresTaskStore.Configuration) -> BenchDatabase {
        var configuration = base
        configuration.schema = schema()
        return BenchDatabase(
            name: "PostgreSQL",
            connect: { [configuration] in
                let store = try await PostgresTaskStore.started(configuration: configuration)
                return (store, { await store.close() })
            },
            remove: { [configuration] in
                guard let store = try? await PostgresTaskStore.started(configuration: configuration) else { return }
                try? await store.dropSchema()
                await store.close()
            })
    }

    /// No-op jobs submitted by `concurrency` submitters and run `concurrency` at a time, until every completion is
    /// committed; jobs per second.
    static func jobs(
        base: PostgresTaskStore.Configuration, count: Int, concurrency: Int,
        gathering: Duration = TaskExecutor.Configuration().commitGatheringWindow
    ) async throws -> Double {
        var storeConfiguration = base
        storeConfiguration.schema = schema()
        storeConfiguration.maximumConnections = 8
        let store = try await PostgresTaskStore.started(configuration: storeConfiguration)
        let rate: Result<Double, any Error>
        do {
            rate = .success(try await jobs(on: store, count: count, concurrency: concurrency, gathering: gathering))
        } catch {
            rate = .failure(error)
        }
        // The schema is dropped before the process ends (a server given by --postgres-url keeps no leftovers).
        try? await store.dropSchema()
        await store.close()
        return try rate.get()
    }

    private static func jobs(
        on store: PostgresTaskStore, count: Int, concurrency: Int, gathering: Duration
    ) async throws -> Double {
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .milliseconds(100)
        configuration.maxConcurrentTasks = concurrency
        configuration.commitGatheringWindow = gathering
        let executor = TaskExecutor(store: store, configuration: configuration)
        let done = Latch(count: count)
        try executor.register("noop", input: SubmitThroughput.NoopInput.self) { _, _ in done.arrive() }
        let start = ContinuousClock.now
        _ = try await SubmitThroughput.submitAll(count: count, concurrency: concurrency) { _ in
            _ = try await executor.submit("noop", input: SubmitThroughput.NoopInput())
        }
        await done.wait()
        while executor.graph().tasks.contains(where: { !$0.isFinished }) {
            try await Task.sleep(for: .milliseconds(1))
        }
        try await executor.flush()
        let total = ContinuousClock.now - start
        let stored = try await store.statistics().rootsByStatus["completed"] ?? 0
        await executor.shutdown()
        guard stored == count else { throw BenchFailure("\(stored) of \(count) jobs are stored as completed") }
        return Double(count) / total.inSeconds
    }

    /// `jobs` running jobs of a dead owner (this host, a pid that does not exist); a new executor starts on them.
    static func recover(
        base: PostgresTaskStore.Configuration, jobs: Int, wait: Duration, context: BenchContext
    ) async throws -> (firstRunning: Duration, allClaimed: Duration?, floor: Duration) {
        var configuration = base
        configuration.schema = schema()
        let builder = try await PostgresTaskStore.started(configuration: configuration)
        let built = ContinuousClock.now
        try await insertJobsOfADeadOwner(into: builder, count: jobs, running: jobs)
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
        let deadline = start + wait
        while firstRun.value == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        await executor.shutdown()
        await store.close()
        // An executor claims only what it can start (a slot each): the claim of all of them is measured on the store,
        // as a fleet of workers with that many free slots would take them, in the executor's largest chunks
        // (10,000), back to back: one set-wise statement per chunk. What the executor above claimed and handed back
        // is unowned now, and claimed with them.
        var allClaimed: Duration?
        let claimStart = ContinuousClock.now
        var claimed = 0
        var claimedIDs: [String] = []
        while ContinuousClock.now < claimStart + wait {
            let chunk = try await builder.claimRoots(
                RootClaim(
                    fromOwners: [nil, RecoveryLatency.deadOwner], kinds: [RecoveryLatency.kind], newOwner: "bench-fleet",
                    limit: 10_000, now: Date()))
            claimed += chunk.count
            claimedIDs += chunk.map(\.id)
            if chunk.count < 10_000 {
                if try await builder.countUnfinishedRoots(heldBy: RecoveryLatency.deadOwner) == 0 {
                    allClaimed = ContinuousClock.now - claimStart
                }
                break
            }
        }
        context.log("claimed \(FigureFormat.number(Double(claimed))) roots in chunks of 10,000")
        // The floor: the roots just claimed given to another owner again by the claim's last statement alone, in chunks
        // of 10,000 ids, each in its transaction: what the server needs to change those rows, without the claim's
        // reads, checks and locks. The claim's old row versions are vacuumed first: the floor runs on rows rewritten
        // once (by the claim), the claim ran on rows as built; each on a vacuumed table.
        try await builder.maintain(.vacuum)
        let floorStart = ContinuousClock.now
        var reassigned = 0
        for first in stride(from: 0, to: claimedIDs.count, by: 10_000) {
            reassigned += try await builder.reassignRoots(
                Array(claimedIDs[first..<min(claimedIDs.count, first + 10_000)]), to: "floor")
        }
        let floor = ContinuousClock.now - floorStart
        guard reassigned == claimedIDs.count else {
            throw BenchFailure("the floor's statements changed \(reassigned) of the \(claimedIDs.count) roots claimed")
        }
        context.log(
            "floor: the claim's UPDATE alone gave the \(FigureFormat.number(Double(reassigned))) roots claimed another "
                + "owner in \(String(format1: floor.inMilliseconds, decimals: 0)) ms")
        try? await builder.dropSchema()
        await builder.close()
        guard let first = firstRun.value else { throw BenchFailure("no recovered job ran within the wait") }
        context.log(
            "recovery: first job running after \(String(format1: (first - start).inMilliseconds, decimals: 1)) ms, "
                + (allClaimed.map { "all claimed after \(String(format1: $0.inMilliseconds, decimals: 0)) ms" } ?? "not all claimed"))
        return (first - start, allClaimed, floor)
    }
}
#endif
