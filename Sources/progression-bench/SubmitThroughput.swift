import Progression

/// Durable submissions per second: add a trivial task, let it run and complete, with a fixed number in flight.
///
/// `tasks_per_s` measures closure tasks (`addTask`, whose return means the row is committed; the run's start and
/// completion are committed before ``TaskExecutor/waitForTask(_:)`` returns). `jobs_per_s` submits registered no-op
/// jobs instead and lets the executor's queue run them, 8 at a time: see ``jobsPerSecond(_:)``.
enum SubmitThroughput {
    static let scenario = Scenario(name: "submit", keys: ["tasks_per_s", "jobs_per_s"]) { context in
        let sizes = context.sizes
        let tasks = try await tasksPerSecond(count: sizes.submittedTasks, concurrency: sizes.submitConcurrency)
        context.log("tasks: \(FigureFormat.number(tasks)) tasks/s")
        return [
            Figure(
                "tasks_per_s", tasks, unit: "tasks/s", target: .atLeast(20_000),
                note: "addTask + run + complete of empty closure tasks, SQLite store, "
                    + "\(sizes.submitConcurrency) in flight, \(FigureFormat.number(Double(sizes.submittedTasks))) tasks"),
            try await jobsPerSecond(context),
        ]
    }

    /// Closure tasks per second, on a fresh SQLite store.
    static func tasksPerSecond(count: Int, concurrency: Int) async throws -> Double {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let opened = try StoreKind.sqlite.makeStore(in: scratch)
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .milliseconds(100)
        configuration.maxConcurrentTasks = concurrency
        let executor = TaskExecutor(store: opened.store, configuration: configuration)
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
    /// Bodies are counted from inside the job (a ``Latch``) rather than by polling the executor; once all have run,
    /// the few completions still being recorded are awaited through `graph()`, which is small by then.
    static func jobsPerSecond(_ context: BenchContext) async throws -> Figure {
        let count = context.sizes.submittedTasks
        let concurrency = context.sizes.submitConcurrency
        let result = try await jobs(count: count, concurrency: concurrency)
        context.log(
            "jobs: \(FigureFormat.number(result.perSecond)) jobs/s (submits alone took "
                + "\(String(format1: result.submitted.inMilliseconds, decimals: 0)) ms, "
                + "all done and flushed after \(String(format1: result.total.inMilliseconds, decimals: 0)) ms)")
        return Figure(
            "jobs_per_s", result.perSecond, unit: "jobs/s", target: .atLeast(20_000),
            note: "submit + run + complete of no-op jobs, SQLite store, \(concurrency) submitters, "
                + "maxConcurrentTasks \(concurrency), \(FigureFormat.number(Double(count))) jobs, until all ran "
                + "and flush() returned (submits alone: \(FigureFormat.number(Double(count) / result.submitted.inSeconds)) /s)")
    }

    /// One run of the jobs loop: the rate, how long the submits took, and how long everything took.
    static func jobs(count: Int, concurrency: Int) async throws -> (perSecond: Double, submitted: Duration, total: Duration) {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let opened = try StoreKind.sqlite.makeStore(in: scratch)
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .milliseconds(100)
        configuration.maxConcurrentTasks = concurrency
        let executor = TaskExecutor(store: opened.store, configuration: configuration)
        let done = Latch(count: count)
        try executor.register("noop", input: NoopInput.self) { _, _ in done.arrive() }
        let start = ContinuousClock.now
        let submitted = try await submitAll(count: count, concurrency: concurrency) { _ in
            _ = try await executor.submit("noop", input: NoopInput(), idempotencyKey: nil)
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
        let stored = try await opened.store.statistics().rootsByStatus["completed"] ?? 0
        await executor.shutdown()
        await opened.close()
        guard stored == count else { throw BenchFailure("\(stored) of \(count) jobs are stored as completed") }
        return (Double(count) / total.inSeconds, submitted, total)
    }
}
