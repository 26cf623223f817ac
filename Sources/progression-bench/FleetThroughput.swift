import Foundation
import Progression
import Synchronization

/// One database a scenario runs on, each `connect()` a store connection of its own, as each process of a fleet has:
/// a SQLite file in a scratch directory, or a schema of a PostgreSQL server (`PostgresThroughput`).
struct BenchDatabase: Sendable {
    /// "SQLite", "PostgreSQL": for the figures' notes.
    let name: String
    /// A new connection, and how to close it.
    let connect: @Sendable () async throws -> (store: any TaskStore, close: @Sendable () async -> Void)
    /// Deletes the database (its file, or its schema).
    let remove: @Sendable () async -> Void

    /// A fresh SQLite file.
    static func sqlite() throws -> BenchDatabase {
        let scratch = try ScratchDirectory()
        let path = scratch.file("bench.sqlite")
        return BenchDatabase(
            name: "SQLite",
            connect: {
                let store = try SQLiteTaskStore(path: path)
                return (store, { await store.close() })
            },
            remove: { scratch.remove() })
    }

    /// Runs `body` on a fresh database made by `make`, removed after it.
    static func with<T>(
        _ make: @Sendable () async throws -> BenchDatabase, _ body: (BenchDatabase) async throws -> T
    ) async throws -> T {
        let database = try await make()
        do {
            let result = try await body(database)
            await database.remove()
            return result
        } catch {
            await database.remove()
            throw error
        }
    }
}

/// The fleet (issue 22) on one database, every process's part played by its own store connection and executor in
/// this process: what a producer that only enqueues (``JobClient``) commits per second, one job per call and 100 per
/// call; a producer and two workers end to end; and how soon a worker started beside a busy one takes its share of
/// the backlog. On SQLite here; on PostgreSQL in `PostgresThroughput`, with the keys' suffix `_postgres`.
enum FleetThroughput {
    static let keys = [
        "enqueue_per_s_batch1", "enqueue_per_s_batch100", "fleet_jobs_per_s_producer_2workers",
        "fleet_second_worker_first_job_ms",
    ]

    static let scenario = Scenario(name: "fleet", keys: keys) { context in
        try await figures(on: { try BenchDatabase.sqlite() }, suffix: "", context: context)
    }

    /// The fleet's figures on fresh databases made by `make`, their keys ending with `suffix`.
    static func figures(
        on make: @escaping @Sendable () async throws -> BenchDatabase, suffix: String, context: BenchContext
    ) async throws -> [Figure] {
        let count = context.sizes.submittedTasks
        let (single, name) = try await BenchDatabase.with(make) {
            (try await enqueue(count: count / 4, batch: 1, on: $0), $0.name)
        }
        let batched = try await BenchDatabase.with(make) { try await enqueue(count: count, batch: 100, on: $0) }
        context.log(
            "enqueue, \(name): \(FigureFormat.number(single)) jobs/s one a call, \(FigureFormat.number(batched)) 100 a call")
        let endToEnd = try await BenchDatabase.with(make) { try await producerAndTwoWorkers(count: count, on: $0) }
        context.log(
            "producer + 2 workers, \(name): \(FigureFormat.number(endToEnd.perSecond)) jobs/s, shares \(endToEnd.shares)")
        let backlog = context.options.quick ? 2_000 : 10_000
        let share = try await BenchDatabase.with(make) { try await secondWorkerShare(backlog: backlog, on: $0) }
        context.log(
            "second worker, \(name): first job \(String(format1: share.firstJob.inMilliseconds, decimals: 0)) ms after "
                + "its start, ran \(share.secondRan) of \(share.backlog)")
        return [
            Figure(
                "enqueue_per_s_batch1" + suffix, single, unit: "jobs/s",
                note: "JobClient.submit of one no-op job a call, one sequential producer, \(name), "
                    + "\(FigureFormat.number(Double(count / 4))) jobs (each call returns once its row is committed)"),
            Figure(
                "enqueue_per_s_batch100" + suffix, batched, unit: "jobs/s",
                note: "JobClient.submit(_:inputs:) of 100 jobs a call (one transaction each), one producer, \(name), "
                    + "\(FigureFormat.number(Double(count))) jobs"),
            Figure(
                "fleet_jobs_per_s_producer_2workers" + suffix, endToEnd.perSecond, unit: "jobs/s",
                note: "a producer (its own connection, batches of 100) and two workers (8 slots each, their own "
                    + "connections) on one \(name) database, \(FigureFormat.number(Double(count))) no-op jobs, from the "
                    + "first submit until all were completed; the workers ran \(endToEnd.shares)"),
            Figure(
                "fleet_second_worker_first_job_ms" + suffix, share.firstJob.inMilliseconds, unit: "ms",
                target: .below(1_000),
                note: "a worker started beside one that runs a backlog of \(FigureFormat.number(Double(share.backlog))) "
                    + "5 ms jobs (8 slots each), \(name): from its start() until its first job ran; it ran "
                    + "\(share.secondRan) of them"),
        ]
    }

    /// A no-op job.
    struct Noop: JobKind {
        struct Input: Codable, Sendable {
            var sleepMilliseconds = 0
        }
        static let name = "bench.noop"
        let ran: @Sendable () -> Void

        func run(_ input: Input, context: any TaskContext) async throws {
            if input.sleepMilliseconds > 0 { try await Task.sleep(for: .milliseconds(input.sleepMilliseconds)) }
            ran()
        }
    }

    /// Jobs committed per second by one producer, `batch` a call.
    static func enqueue(count: Int, batch: Int, on database: BenchDatabase) async throws -> Double {
        let (store, close) = try await database.connect()
        let client = try JobClient(store: store)
        let inputs = Array(repeating: Noop.Input(), count: batch)
        let start = ContinuousClock.now
        for _ in 0..<(count / batch) {
            if batch == 1 {
                try await client.submit(Noop.self, input: Noop.Input())
            } else {
                try await client.submit(Noop.self, inputs: inputs)
            }
        }
        let elapsed = ContinuousClock.now - start
        let stored = try await store.statistics().rootsByStatus["pending"] ?? 0
        await close()
        guard stored == count / batch * batch else { throw BenchFailure("\(stored) of \(count) jobs are stored") }
        return Double(stored) / elapsed.inSeconds
    }

    /// A worker executor on its own connection to `database`, and how to close that connection.
    static func worker(
        on database: BenchDatabase, slots: Int, configure: (inout TaskExecutor.Configuration) -> Void = { _ in },
        ran: @escaping @Sendable () -> Void
    ) async throws -> (TaskExecutor, @Sendable () async -> Void) {
        let (store, close) = try await database.connect()
        var configuration = TaskExecutor.Configuration()
        configuration.maxConcurrentTasks = slots
        configuration.completedTaskVisibility = .milliseconds(100)
        configure(&configuration)
        let executor = try TaskExecutor(store: store, configuration: configuration)
        try executor.register(Noop(ran: ran))
        return (executor, close)
    }

    /// A producer and two workers end to end.
    /// - Parameter configure: changes to the workers' configuration; with a retention, jobs deleted during the run
    ///   are counted by their runs, not found stored.
    static func producerAndTwoWorkers(
        count: Int, on database: BenchDatabase, configure: @escaping (inout TaskExecutor.Configuration) -> Void = { _ in }
    ) async throws -> (perSecond: Double, shares: String) {
        let done = Latch(count: count)
        let ranA = Atomic<Int>(0)
        let ranB = Atomic<Int>(0)
        var probe = TaskExecutor.Configuration()
        configure(&probe)
        let deletes = probe.retention != .keepEverything
        let (workerA, closeA) = try await worker(on: database, slots: 8, configure: configure) {
            ranA.add(1, ordering: .relaxed)
            done.arrive()
        }
        let (workerB, closeB) = try await worker(on: database, slots: 8, configure: configure) {
            ranB.add(1, ordering: .relaxed)
            done.arrive()
        }
        let (producerStore, closeProducer) = try await database.connect()
        let client = try JobClient(store: producerStore)
        try await workerA.start()
        try await workerB.start()
        let inputs = Array(repeating: Noop.Input(), count: 100)
        let start = ContinuousClock.now
        for _ in 0..<(count / 100) { try await client.submit(Noop.self, inputs: inputs) }
        await done.wait()
        try await workerA.flush()
        try await workerB.flush()
        let elapsed = ContinuousClock.now - start
        await workerA.shutdown()
        await workerB.shutdown()
        let completed = try await producerStore.statistics().rootsByStatus["completed"] ?? 0
        await closeA()
        await closeB()
        await closeProducer()
        let a = ranA.load(ordering: .relaxed)
        let b = ranB.load(ordering: .relaxed)
        guard completed == count / 100 * 100 || (deletes && a + b == count / 100 * 100) else {
            throw BenchFailure("\(completed) of \(count) jobs completed")
        }
        guard a > 0, b > 0 else { throw BenchFailure("one worker ran nothing (\(a) and \(b))") }
        return (Double(a + b) / elapsed.inSeconds, "\(a) + \(b)")
    }

    /// A second worker started beside a busy one: how long until its first job ran.
    static func secondWorkerShare(
        backlog: Int, on database: BenchDatabase
    ) async throws -> (firstJob: Duration, secondRan: Int, backlog: Int) {
        let (producerStore, closeProducer) = try await database.connect()
        try await JobClient(store: producerStore).submit(
            Noop.self, inputs: Array(repeating: Noop.Input(sleepMilliseconds: 5), count: backlog))
        let done = Latch(count: backlog)
        let firstRanA = Latch(count: 1)
        let firstRanB = Latch(count: 1)
        let ranA = Atomic<Int>(0)
        let ranB = Atomic<Int>(0)
        let (workerA, closeA) = try await worker(on: database, slots: 8) {
            if ranA.add(1, ordering: .relaxed).newValue == 1 { firstRanA.arrive() }
            done.arrive()
        }
        let (workerB, closeB) = try await worker(on: database, slots: 8) {
            if ranB.add(1, ordering: .relaxed).newValue == 1 { firstRanB.arrive() }
            done.arrive()
        }
        try await workerA.start()
        await firstRanA.wait()
        let start = ContinuousClock.now
        try await workerB.start()
        await firstRanB.wait()
        let firstJob = ContinuousClock.now - start
        await done.wait()
        await workerA.shutdown()
        await workerB.shutdown()
        await closeA()
        await closeB()
        await closeProducer()
        return (firstJob, ranB.load(ordering: .relaxed), backlog)
    }
}

/// Time (issue 23): how close to its run-at a delayed job starts, and what 10,000 schedules cost an idle worker.
enum TimeBench {
    static let scenario = Scenario(
        name: "time",
        keys: ["delay_p50_ms_sqlite", "delay_p99_ms_sqlite", "schedules_idle_cpu_pct_10k"]
    ) { context in
        let quick = context.options.quick
        var figures = try await delayFigures(on: { try BenchDatabase.sqlite() }, suffix: "_sqlite", context: context)
        let idle = try await idleSchedules(count: 10_000, measured: quick ? .seconds(5) : .seconds(60))
        context.log("10,000 schedules: \(String(format1: idle, decimals: 2)) % of a core while idle")
        figures.append(
            Figure(
                "schedules_idle_cpu_pct_10k", idle, unit: "%", target: .below(1),
                note: "CPU time of the process (user + system) over wall time while a worker with 10,000 declared "
                    + "schedules (@yearly: none due) sits idle, SQLite, after a 2 s settle"))
        return figures
    }

    /// How late delayed jobs start on a fresh database made by `make`: p50 and p99, their keys ending with `suffix`.
    static func delayFigures(
        on make: @escaping @Sendable () async throws -> BenchDatabase, suffix: String, context: BenchContext
    ) async throws -> [Figure] {
        let quick = context.options.quick
        let (delays, name) = try await BenchDatabase.with(make) {
            (try await delayPrecision(count: quick ? 1_000 : 10_000, window: quick ? .seconds(5) : .seconds(60), on: $0), $0.name)
        }
        context.log(
            "delays, \(name): p50 \(String(format1: delays.p50, decimals: 1)) ms, p99 "
                + "\(String(format1: delays.p99, decimals: 1)) ms, max \(String(format1: delays.max, decimals: 1)) ms, "
                + "\(delays.early) early")
        let spread = quick ? "5 s" : "minute"
        return [
            Figure(
                "delay_p50_ms" + suffix, delays.p50, unit: "ms",
                note: "start − run-at of \(FigureFormat.number(Double(delays.count))) delayed no-op jobs due within "
                    + "the same \(spread) (JobClient, batches of 1,000), one worker with 64 slots, \(name); none early "
                    + "(\(delays.early) were)"),
            Figure(
                "delay_p99_ms" + suffix, delays.p99, unit: "ms", target: .below(1_000),
                note: "the same runs' p99 (max \(String(format1: delays.max, decimals: 1)) ms)"),
        ]
    }

    struct Delayed: JobKind {
        struct Input: Codable, Sendable {
            var runAt: Double
        }
        static let name = "bench.delayed"
        let started: @Sendable (Double) -> Void

        func run(_ input: Input, context: any TaskContext) async throws {
            started(Date().timeIntervalSince1970 - input.runAt)
        }
    }

    static func delayPrecision(
        count: Int, window: Duration, on database: BenchDatabase
    ) async throws -> (p50: Double, p99: Double, max: Double, early: Int, count: Int) {
        let (store, close) = try await database.connect()
        var configuration = TaskExecutor.Configuration()
        configuration.maxConcurrentTasks = 64
        configuration.completedTaskVisibility = .milliseconds(100)
        let executor = try TaskExecutor(store: store, configuration: configuration)
        let lateness = Mutex<[Double]>([])
        let done = Latch(count: count)
        try executor.register(
            Delayed { late in
                lateness.withLock { $0.append(late * 1_000) }
                done.arrive()
            })
        try await executor.start()
        let (producerStore, closeProducer) = try await database.connect()
        let client = try JobClient(store: producerStore)
        // Due from 3 s after now (the submits have finished by then) across the window, evenly.
        let first = Date().addingTimeInterval(3)
        let step = window.inSeconds / Double(count)
        for chunk in stride(from: 0, to: count, by: 1_000) {
            let runAts = (chunk..<min(count, chunk + 1_000)).map { first.addingTimeInterval(Double($0) * step) }
            try await client.submit(
                Delayed.self, inputs: runAts.map { Delayed.Input(runAt: $0.timeIntervalSince1970) },
                options: { JobOptions(runAt: Date(timeIntervalSince1970: $0.runAt)) })
        }
        await done.wait()
        await executor.shutdown()
        await close()
        await closeProducer()
        let values = lateness.withLock { $0 }.sorted()
        return (
            Measurement.percentile(sorted: values, 0.5), Measurement.percentile(sorted: values, 0.99), values.last ?? 0,
            values.filter { $0 < 0 }.count, values.count
        )
    }

    /// The share of a core an idle worker with `count` schedules uses over `measured`.
    static func idleSchedules(count: Int, measured: Duration) async throws -> Double {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let store = try SQLiteTaskStore(path: scratch.file("bench.sqlite"))
        let executor = TaskExecutor(store: store)
        try executor.register(Delayed { _ in })
        for index in 0..<count {
            try executor.schedule("yearly-\(index)", Delayed.self, input: .init(runAt: 0), cron: "@yearly", timeZone: .gmt)
        }
        try await executor.start()
        try await Task.sleep(for: .seconds(2))
        let stored = try await store.schedules().count
        guard stored == count else {
            await executor.shutdown()
            await store.close()
            throw BenchFailure("\(stored) of \(count) schedules are stored")
        }
        let cpuBefore = ProcessTimes.cpu()
        let start = ContinuousClock.now
        try await Task.sleep(for: measured)
        let cpu = ProcessTimes.cpu() - cpuBefore
        let wall = ContinuousClock.now - start
        await executor.shutdown()
        await store.close()
        return 100 * cpu.inSeconds / wall.inSeconds
    }
}
