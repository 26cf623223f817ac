/// How stale the store gets while tasks report as fast as they can. DESIGN.md §3 promises that progress is committed
/// within tens of milliseconds; this runs the report scenarios on SQLite (three times longer) with a
/// ``CommitLagWatcher`` polling the file from its own thread, and reports the worst lag and the commits it saw.
///
/// It runs each shape twice: as the throughput scenarios do (task code that never suspends), and with task code that
/// calls `Task.yield()` every 1,000 reports. The difference separates two causes of lag: a writer starved of
/// cooperative threads (fixed by yielding) from a writer that is never woken (not fixed by yielding). The yielding
/// 100-task shape is also run on the in-memory store, so its ratio shows what durability costs when the writer runs.
enum WriteBehindLag {
    static let yieldEvery = 1_000

    static let scenario = Scenario(
        name: "write_lag",
        keys: [
            "write_lag_ms_max_1task", "write_lag_ms_max_100tasks", "write_lag_ms_max_1task_yielding",
            "write_lag_ms_max_100tasks_yielding", "ratio_sqlite_vs_memory_100tasks_yielding",
        ]
    ) { context in
        let sizes = context.sizes
        var figures: [Figure] = []
        let shapes = [
            (1, sizes.reportsOneTask * 3, "1task"), (sizes.manyTasks, sizes.reportsPerManyTask * 3, "100tasks"),
        ]
        for (tasks, reports, suffix) in shapes {
            for yieldEvery in [0, Self.yieldEvery] {
                let run = try await ReportThroughput.run(
                    .sqlite, tasks: tasks, reportsPerTask: reports, yieldEvery: yieldEvery, watchLag: true)
                let worst = run.worstLag ?? .nan
                let key = "write_lag_ms_max_\(suffix)" + (yieldEvery > 0 ? "_yielding" : "")
                context.log(
                    "\(key): worst lag \(String(format1: worst, decimals: 1)) ms over a "
                        + "\(String(format1: run.elapsed.inMilliseconds, decimals: 1)) ms run, \(run.commits ?? -1) "
                        + "commits seen, \(run.lagSamples) samples, \(FigureFormat.number(run.reportsPerSecond)) reports/s")
                figures.append(
                    Figure(
                        key, worst, unit: "ms",
                        note: "oldest committed progress, \(tasks) task(s) × \(FigureFormat.number(Double(reports))) "
                            + "reports\(yieldEvery > 0 ? ", Task.yield() every \(yieldEvery)" : ""), "
                            + "\(String(format1: run.elapsed.inMilliseconds, decimals: 0)) ms run, "
                            + "\(run.commits ?? -1) commits seen; DESIGN §3: tens of ms"))
            }
        }
        // What durability costs when the writer does run during the reports (yielding task code), side by side.
        var ratios: [Double] = []
        for repetition in 0..<max(3, sizes.repetitions) {
            var rates: [StoreKind: Double] = [:]
            for kind in repetition % 2 == 0 ? [StoreKind.memory, .sqlite] : [.sqlite, .memory] {
                rates[kind] =
                    try await ReportThroughput.run(
                        kind, tasks: sizes.manyTasks, reportsPerTask: sizes.reportsPerManyTask,
                        yieldEvery: Self.yieldEvery
                    ).reportsPerSecond
            }
            ratios.append(rates[.sqlite]! / rates[.memory]!)
        }
        figures.append(
            Figure(
                "ratio_sqlite_vs_memory_100tasks_yielding", Measurement.median(ratios), unit: "ratio",
                note: "as ratio_sqlite_vs_memory_100tasks with Task.yield() every \(Self.yieldEvery) reports "
                    + "(the writer runs): \(ratios.map { String(format1: $0, decimals: 3) })"))
        return figures
    }
}
