import Foundation
import Progression

/// Peak resident memory (VmHWM) of a process whose executor ran 1,000,000 tasks to completion on a SQLite store.
///
/// The tasks run in a child process (`progression-bench --child rss --tasks N`) so that the other scenarios do not
/// raise the peak; its executor forgets a finished root after 100 ms (`completedTaskVisibility`), so memory must
/// not grow with the number of tasks run. The child prints one JSON line; its baseline (the peak before the
/// executor started) is reported beside the figure.
enum ResidentMemory {
    static let scenario = Scenario(
        name: "rss", keys: ["rss_mb_after_1m_tasks", "rss_mb_baseline", "rss_child_tasks_per_s", "bytes_written_per_task"]
    ) { context in
        let tasks = context.sizes.rssTasks
        // More in flight than the throughput scenario: the run is shorter (the writer batches more transitions per
        // commit) and the peak is, if anything, higher, since more tasks are in memory at once.
        let concurrency = 64
        let binary =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--child", "rss", "--tasks", String(tasks), "--concurrency", String(concurrency)] + (context.options.allowDebug ? ["--allow-debug"] : [])
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0,
            let line = String(decoding: output, as: UTF8.self).split(separator: "\n").last,
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            let peak = object["vmhwm_kb"] as? Double, let baseline = object["baseline_vmhwm_kb"] as? Double,
            let rate = object["tasks_per_s"] as? Double, let written = object["bytes_written_per_task"] as? Double
        else {
            throw BenchFailure(
                "the rss child exited \(process.terminationStatus): \(String(decoding: output, as: UTF8.self).prefix(300))")
        }
        let commits = object["commits"] as? Double ?? 0
        context.log(
            "rss child: peak \(String(format1: peak / 1024, decimals: 1)) MB, \(FigureFormat.number(rate)) tasks/s, "
                + "\(FigureFormat.number(commits)) commits (\(String(format1: Double(tasks) / max(1, commits), decimals: 1)) tasks each)")
        return [
            Figure(
                "rss_mb_after_1m_tasks", peak / 1024, unit: "MB", target: .below(100),
                note: "VmHWM of a child that ran \(FigureFormat.number(Double(tasks))) tasks (\(concurrency) in flight), SQLite"),
            Figure("rss_mb_baseline", baseline / 1024, unit: "MB", note: "VmHWM of the same child before its executor"),
            Figure(
                "rss_child_tasks_per_s", rate, unit: "tasks/s",
                note: "the child's task rate (\(concurrency) in flight; a second sample of tasks_per_s)"),
            Figure(
                "bytes_written_per_task", written, unit: "bytes",
                note: "write() bytes per task in the child (/proc/self/io wchar): WAL frames and checkpoints"),
        ]
    }

    /// The child: runs `tasks` trivial tasks and prints `{"vmhwm_kb": …, "baseline_vmhwm_kb": …, …}`.
    static func runChild(tasks: Int, concurrency: Int) async throws {
        let baseline = try status("VmHWM")
        let writtenBefore = try io("wchar")
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let store = try SQLiteTaskStore(path: scratch.file("rss.sqlite"))
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .milliseconds(100)
        configuration.maxConcurrentTasks = concurrency
        let statistics = WriterStatistics()
        configuration.metricsFactory = statistics
        let executor = TaskExecutor(store: store, configuration: configuration)
        let elapsed = try await SubmitThroughput.submitAll(count: tasks, concurrency: concurrency) { index in
            let id = try await executor.addTask(name: "task-\(index)") { context in
                try await context.report(.progress(1))
            }
            await executor.waitForTask(id)
        }
        try await executor.flush()
        let peak = try status("VmHWM")
        let written = try io("wchar") - writtenBefore
        let resident = try status("VmRSS")
        let inMemory = executor.graph().tasks.count
        await executor.shutdown()
        await store.close()
        let line =
            "{\"vmhwm_kb\": \(peak), \"vmrss_kb\": \(resident), \"baseline_vmhwm_kb\": \(baseline), "
            + "\"tasks\": \(tasks), \"bytes_written_per_task\": \(written / Double(tasks)), \"roots_in_memory_at_end\": \(inMemory), "
            + "\"tasks_per_s\": \(Double(tasks) / elapsed.inSeconds), \"commits\": \(statistics.commitCount)}"
        print(line)
    }

    /// A counter of `/proc/self/io` (`wchar`: bytes passed to write calls).
    static func io(_ field: String) throws -> Double {
        let text = try String(contentsOfFile: "/proc/self/io", encoding: .utf8)
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            if let number = Double(line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces)) {
                return number
            }
        }
        throw BenchFailure("no \(field) in /proc/self/io")
    }

    /// A `kB` field of `/proc/self/status` (`VmHWM`, `VmRSS`), in kB.
    static func status(_ field: String) throws -> Double {
        let text = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let number = line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first
                .flatMap { Double($0) }
            if let number { return number }
        }
        throw BenchFailure("no \(field) in /proc/self/status")
    }
}
