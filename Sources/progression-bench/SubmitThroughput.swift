import Progression

/// Durable submissions per second: add a trivial task, let it run and complete, with a fixed number in flight.
///
/// `tasks_per_s` measures closure tasks (`addTask`, whose return means the row is committed; the run's start and
/// completion are committed before ``TaskExecutor/waitForTask(_:)`` returns). `jobs_per_s` submits registered no-op
/// jobs instead and lets the executor's queue run them, 8 at a time: see ``jobsPerSecond(_:)``.
enum SubmitThroughput {
    static let scenario = Scenario(
        name: "submit",
        keys: [
            "tasks_per_s", "jobs_per_s", "jobs_per_s_memory", "ratio_jobs_sqlite_vs_memory", "cpu_us_per_job",
            "cpu_us_per_job_memory", "jobs_per_s_serial",
        ]
    ) { context in
        let sizes = context.sizes
        let tasks = try await tasksPerSecond(count: sizes.submittedTasks, concurrency: sizes.submitConcurrency)
        context.log("tasks: \(FigureFormat.number(tasks)) tasks/s")
        return [
            Figure(
                "tasks_per_s", tasks, unit: "tasks/s", target: .atLeast(20_000),
                note: "addTask + run + complete of empty closure tasks, SQLite store, "
                    + "\(sizes.submitConcurrency) in flight, \(FigureFormat.number(Double(sizes.submittedTasks))) tasks"),
        ] + (try await jobsPerSecond(context))
    }

    /// Closure tasks per second, on a fresh SQLite store.
    static func tasksPerSecond(count: Int, concurrency: Int) async throws -> Double {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let opened = try StoreKind.sqlite.makeStore(in: scratch)
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .milliseconds(100)
        configuration.maxConcurrentTasks = concurrency
        let executor = try TaskExecutor(store: opened.store, configuration: configuration)
        let elapsed = try await submitAll(count: count, concurrency: concurrency) { index in
            let id = try await executor.addTask(name: "trivial-\(index)") { _ in }
            await executor.waitForTask(id)
        }
        let stored = try await opened.store.statistics().rootsByStatus["completed"] ?? 0
        await executor.shutdown()
        await opened.close()
        guard stored == count else { throw BenchFailure("\(stored) of \(count) tasks are stored as completed") }
        return Double(count) / elapsed.inSeconds
    }

    /// Runs `submitAndWait` for indexes `0..<count`, `concurrency` at a time, and returns how long it took.
    /// `submitAndWait` returns once its task (or job) has completed durably.
    static func submitAll(
        count: Int, concurrency: Int, _ submitAndWait: @escaping @Sendable (Int) async throws -> Void
    ) async throws -> Duration {
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    for index in stride(from: worker, to: count, by: concurrency) {
                        try await submitAndWait(index)
                    }
                }
            }
            try await group.waitForAll()
        }
        return ContinuousClock.now - start
    }

    /// A trivial job's input (the kind ignores it).
    struct NoopInput: Codable, Sendable {}

    /// `jobs_per_s`: `count` trivial jobs of a registered kind submitted by `concurrency` submitters, run
    /// `concurrency` at a time (`maxConcurrentTasks`; the others wait in the executor's queue), on a fresh SQLite
    /// store. The clock runs from the first `submit` until every job's completion is committed and
    /// ``TaskExecutor/flush()`` has returned; the store is then checked to hold `count` completed roots.
    ///
    /// The same run on the in-memory store gives the executor's own ceiling: runs alternate between the stores (ABBA
    /// over the repetitions) and the ratio is the median of adjacent pairs, so that the machine's drift hits both.
    /// `jobs_per_s_serial` is the same loop with one submitter and one job at a time: each `submit` waits for its
    /// commit, which also carries the previous job's completion.
    static func jobsPerSecond(_ context: BenchContext) async throws -> [Figure] {
        let count = context.sizes.submittedTasks
        let concurrency = context.sizes.submitConcurrency
        var rates: [StoreKind: [Double]] = [:]
        var cpu: [StoreKind: [Double]] = [:]
        var submitted: [Duration] = []
        for repetition in 0..<context.sizes.repetitions {
            for kind in StoreKind.allCases.rotated(by: repetition) {
                let result = try await jobs(count: count, concurrency: concurrency, store: kind)
                rates[kind, default: []].append(result.perSecond)
                cpu[kind, default: []].append(result.cpuPerJob.inMicroseconds)
                if kind == .sqlite {
                    submitted.append(result.submitted)
                    context.log(
                        "  SQLite run: \(FigureFormat.number(result.perSecond)) jobs/s, \(result.commits) commits "
                            + "(\(String(format1: Double(count) / Double(max(1, result.commits)), decimals: 1)) jobs each), "
                            + "writer busy \(String(format1: 100 * result.commitTime.inSeconds / result.total.inSeconds, decimals: 0)) %, "
                            + "CPU \(String(format1: result.cpuPerJob.inMicroseconds, decimals: 1)) µs a job")
                }
            }
        }
        let sqlite = Measurement.median(rates[.sqlite]!)
        let memory = Measurement.median(rates[.memory]!)
        let ratio = Measurement.median(zip(rates[.sqlite]!, rates[.memory]!).map { $0 / $1 })
        let serialCount = max(1, count / 4)
        let serial = try await jobs(count: serialCount, concurrency: 1, store: .sqlite)
        let submits = Measurement.median(submitted.map { Double(count) / $0.inSeconds })
        context.log(
            "jobs: \(FigureFormat.number(sqlite)) jobs/s on SQLite, \(FigureFormat.number(memory)) in memory "
                + "(ratio \(String(format1: ratio, decimals: 3))), \(FigureFormat.number(serial.perSecond)) one at a time")
        let runs = "median of \(context.sizes.repetitions)"
        return [
            Figure(
                "jobs_per_s", sqlite, unit: "jobs/s", target: .atLeast(20_000),
                note: "submit + run + complete of no-op jobs, SQLite store, \(concurrency) submitters, "
                    + "maxConcurrentTasks \(concurrency), \(FigureFormat.number(Double(count))) jobs, until all ran "
                    + "and flush() returned, \(runs) (submits alone: \(FigureFormat.number(submits)) /s)"),
            Figure(
                "jobs_per_s_memory", memory, unit: "jobs/s",
                note: "the same on the in-memory store (the executor's ceiling), \(runs), interleaved with the SQLite runs"),
            Figure(
                "ratio_jobs_sqlite_vs_memory", ratio, unit: "ratio", target: .atLeast(0.7),
                note: "jobs_per_s on SQLite / on the in-memory store, median of \(context.sizes.repetitions) adjacent pairs"),
            Figure(
                "cpu_us_per_job", Measurement.median(cpu[.sqlite]!), unit: "µs",
                note: "CPU time of the process (all threads, user + system) per job in the jobs_per_s runs, median"),
            Figure(
                "cpu_us_per_job_memory", Measurement.median(cpu[.memory]!), unit: "µs", target: .atMost(40),
                note: "the same on the in-memory store: the executor's own cost"),
            Figure(
                "jobs_per_s_serial", serial.perSecond, unit: "jobs/s", target: .atLeast(3_000),
                note: "the same with 1 submitter and maxConcurrentTasks 1 (each submit waits for its commit), "
                    + "\(FigureFormat.number(Double(serialCount))) jobs, SQLite store, one run"),
        ]
    }

    /// One run of the jobs loop: the rate, how long the submits took, and how long everything took.
    /// - Parameter configure: changes to the executor's configuration (the housekeeping scenario's); with a
    ///   retention, jobs deleted during the run are not found stored, so only the bodies' runs are counted.
    static func jobs(
        count: Int, concurrency: Int, store kind: StoreKind,
        configure: (inout TaskExecutor.Configuration) -> Void = { _ in }
    ) async throws -> JobsRun {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let opened = try kind.makeStore(in: scratch)
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .milliseconds(100)
        configuration.maxConcurrentTasks = concurrency
        let statistics = WriterStatistics()
        configuration.metricsFactory = statistics
        configure(&configuration)
        let deletes = configuration.retention != .keepEverything
        let executor = try TaskExecutor(store: opened.store, configuration: configuration)
        let done = Latch(count: count)
        try executor.register("noop", input: NoopInput.self) { _, _ in done.arrive() }
        let start = ContinuousClock.now
        let cpuBefore = ProcessTimes.cpu()
        let submitted = try await submitAll(count: count, concurrency: concurrency) { _ in
            _ = try await executor.submit("noop", input: NoopInput())
        }
        await done.wait()
        // The last bodies have returned, but their completions may not be recorded yet (a flush now could miss
        // them): wait until no root left in memory is unfinished (the graph shows committed transitions, and only
        // finished roots leave memory), then flush.
        while executor.graph().tasks.contains(where: { !$0.isFinished }) {
            try await Task.sleep(for: .milliseconds(1))
        }
        try await executor.flush()
        let total = ContinuousClock.now - start
        let cpu = ProcessTimes.cpu() - cpuBefore
        let stored = try await opened.store.statistics().rootsByStatus["completed"] ?? 0
        await executor.shutdown()
        await opened.close()
        guard stored == count || (deletes && stored <= count) else {
            throw BenchFailure("\(stored) of \(count) jobs are stored as completed")
        }
        return JobsRun(
            perSecond: Double(count) / total.inSeconds, submitted: submitted, total: total,
            commits: statistics.commitCount, commitTime: statistics.commitTime,
            cpuPerJob: cpu / count)
    }

    /// What one run of the jobs loop measured.
    struct JobsRun {
        /// Jobs per second, from the first submit until all were committed as completed.
        var perSecond: Double
        /// How long the submits took, and everything.
        var submitted, total: Duration
        /// Batches the writer committed, and the time it spent in them (writing, committing).
        var commits: Int
        var commitTime: Duration
        /// The process's CPU time (user and system, all threads) per job: steadier than rates on a shared machine.
        var cpuPerJob: Duration
    }
}
