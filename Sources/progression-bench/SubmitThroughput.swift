import Progression

/// Durable submissions per second: add a trivial task, let it run and complete, with a fixed number in flight.
///
/// `tasks_per_s` measures closure tasks (`addTask`, whose return means the row is committed; the run's start and
/// completion are committed before ``TaskExecutor/waitForTask(_:)`` returns). `jobs_per_s` is the same loop over the
/// jobs API once it lands: see ``jobsPerSecond(_:)``.
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

    /// TODO(jobs): the jobs API (register a kind, `submit` a Codable input) is being written on another branch. When
    /// it lands, replace this with:
    ///
    ///     let executor = TaskExecutor(store: …, configuration: …)   // concurrency 8
    ///     executor.register(TrivialJob.self)
    ///     let elapsed = try await submitAll(count: sizes.submittedTasks, concurrency: 8) { index in
    ///         let id = try await executor.submit(TrivialJob.self, input: index)
    ///         await executor.waitForTask(id)
    ///     }
    ///     return Figure("jobs_per_s", Double(count) / elapsed.inSeconds, …, target: .atLeast(20_000))
    ///
    /// Until then the figure is reported as pending (`null`), never estimated.
    static func jobsPerSecond(_ context: BenchContext) async throws -> Figure {
        .pending(
            "jobs_per_s", unit: "jobs/s", target: .atLeast(20_000),
            reason: "needs the jobs API (TODO(jobs) in SubmitThroughput.swift); see tasks_per_s")
    }
}
