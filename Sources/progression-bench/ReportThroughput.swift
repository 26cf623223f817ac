import Progression

/// `report()` throughput on the SQLite store against the in-memory store, measured side by side.
///
/// Each run uses a fresh executor on a fresh store. Every task is added and waits at a start line; the clock starts
/// when the line opens and stops once every task has made its reports *and* `flush()` has committed them, so the
/// SQLite figure includes the durable write of the last state. Runs alternate memory/SQLite, then SQLite/memory
/// (ABBA), and the ratio is the median of the ratios of adjacent pairs.
enum ReportThroughput {
    /// What one run measured.
    struct Run: Sendable {
        var reports: Int
        var elapsed: Duration
        /// The part of `elapsed` spent in the final `flush()`.
        var flush: Duration
        /// Commits the lag watcher saw while the reports ran (a lower bound; only when watched). The store's
        /// `changeCounter()` cannot count them: it is SQLite's `data_version`, which moves only for other connections'
        /// commits.
        var commits: Int?
        /// The largest write-behind lag seen, in ms, and the number of samples, when watched (``CommitLagWatcher``).
        var worstLag: Double?
        var lagSamples = 0
        var reportsPerSecond: Double { Double(reports) / elapsed.inSeconds }
    }

    static let oneTask = Scenario(
        name: "reports_1task",
        keys: [
            "reports_per_s_1task", "memory_reports_per_s_1task", "ratio_sqlite_vs_memory_1task",
            "ratio_sqlite_vs_memory",
        ]
    ) { context in
        try await compare(context, tasks: 1, reportsPerTask: context.sizes.reportsOneTask, suffix: "1task")
    }

    static let manyTasks = Scenario(
        name: "reports_100tasks",
        keys: [
            "reports_per_s_100tasks", "memory_reports_per_s_100tasks", "ratio_sqlite_vs_memory_100tasks",
            "ratio_sqlite_vs_memory",
        ]
    ) { context in
        try await compare(
            context, tasks: context.sizes.manyTasks, reportsPerTask: context.sizes.reportsPerManyTask,
            suffix: "\(context.sizes.manyTasks)tasks")
    }

    /// Runs the scenario on both stores, alternating, and returns the SQLite rate, the memory rate and their ratio.
    static func compare(_ context: BenchContext, tasks: Int, reportsPerTask: Int, suffix: String) async throws
        -> [Figure]
    {
        // Warm-up: the first run of a process pays for page faults and lazy initialisation.
        for kind in StoreKind.allCases {
            _ = try await run(kind, tasks: tasks, reportsPerTask: max(1, reportsPerTask / 10))
        }
        var sqlite: [Double] = []
        var memory: [Double] = []
        var ratios: [Double] = []
        for repetition in 0..<context.sizes.repetitions {
            let order: [StoreKind] = repetition % 2 == 0 ? [.memory, .sqlite] : [.sqlite, .memory]
            var pair: [StoreKind: Double] = [:]
            for kind in order {
                let result = try await run(kind, tasks: tasks, reportsPerTask: reportsPerTask)
                pair[kind] = result.reportsPerSecond
                context.log(
                    "\(suffix) #\(repetition + 1) \(kind): \(FigureFormat.number(result.reportsPerSecond)) reports/s "
                        + "(\(String(format1: result.elapsed.inMilliseconds, decimals: 1)) ms, final flush "
                        + "\(String(format1: result.flush.inMilliseconds, decimals: 1)) ms"
                        + (result.commits.map { ", \($0) commits" } ?? "") + ")")
            }
            sqlite.append(pair[.sqlite]!)
            memory.append(pair[.memory]!)
            ratios.append(pair[.sqlite]! / pair[.memory]!)
        }
        let shape = "\(tasks) task\(tasks == 1 ? "" : "s") × \(FigureFormat.number(Double(reportsPerTask))) reports"
        return [
            Figure(
                "reports_per_s_\(suffix)", Measurement.median(sqlite), unit: "reports/s", target: .atLeast(1_000_000),
                note: "\(shape), SQLite store, flushed; median of \(sqlite.count)"),
            Figure(
                "memory_reports_per_s_\(suffix)", Measurement.median(memory), unit: "reports/s",
                note: "\(shape), in-memory store (baseline)"),
            Figure(
                "ratio_sqlite_vs_memory_\(suffix)", Measurement.median(ratios), unit: "ratio", target: .atLeast(0.8),
                note: "median of adjacent-pair ratios \(ratios.map { String(format1: $0, decimals: 3) })"),
        ]
    }

    /// One run: `tasks` tasks, each reporting `reportsPerTask` increasing fractions, on a fresh store of `kind`.
    ///
    /// - Throws: ``BenchFailure`` when a task did not complete or the store does not hold the last progress.
    /// - Parameters:
    ///   - yieldEvery: when positive, the task code calls `Task.yield()` after every `yieldEvery` reports (a
    ///     diagnostic: it lets the writer run while more tasks than cooperative threads report without suspending).
    ///   - watchLag: watch the write-behind lag with a ``CommitLagWatcher`` (SQLite only).
    static func run(
        _ kind: StoreKind, tasks: Int, reportsPerTask: Int, yieldEvery: Int = 0, watchLag: Bool = false
    ) async throws -> Run {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let opened = try kind.makeStore(in: scratch)
        var configuration = TaskExecutor.Configuration()
        configuration.maxConcurrentTasks = tasks  // every reporter runs at once
        let executor = try TaskExecutor(store: opened.store, configuration: configuration)
        let ready = Latch(count: tasks)
        let start = Latch(count: 1)
        let finished = Latch(count: tasks)
        var ids: [String] = []
        for index in 0..<tasks {
            ids.append(
                try await executor.addTask(name: "reporter-\(index)") { context in
                    ready.arrive()
                    await start.wait()
                    defer { finished.arrive() }
                    let total = Double(reportsPerTask)
                    for report in 1...reportsPerTask {
                        try await context.report(.progress(Double(report) / total))
                        if yieldEvery > 0, report % yieldEvery == 0 { await Task.yield() }
                    }
                })
        }
        await ready.wait()
        let watcher = watchLag ? CommitLagWatcher(path: scratch.file("bench.sqlite")) : nil
        watcher?.start()
        let begin = ContinuousClock.now
        start.arrive()
        await finished.wait()
        let lag = await watcher?.stop()
        let flushBegin = ContinuousClock.now
        try await executor.flush()
        let end = ContinuousClock.now
        let elapsed = end - begin
        try await verify(executor, store: opened.store, ids: ids)
        await executor.shutdown()
        await opened.close()
        return Run(reports: tasks * reportsPerTask, elapsed: elapsed, flush: end - flushBegin, commits: lag?.commits,
            worstLag: lag?.worst, lagSamples: lag?.samples ?? 0)
    }

    /// Checks that every task completed and the store holds its final progress.
    static func verify(_ executor: TaskExecutor, store: any TaskStore, ids: [String]) async throws {
        for id in ids {
            await executor.waitForTask(id)
            try await executor.flush()
            guard let stored = try await store.task(id: id) else { throw BenchFailure("task \(id) is not stored") }
            guard stored.status == .completed, stored.progress == 1 else {
                throw BenchFailure("task \(id) is stored as \(stored.status) at \(stored.progress ?? -1)")
            }
        }
    }
}
