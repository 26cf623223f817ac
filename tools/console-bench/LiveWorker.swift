#if Console
import Foundation
import Logging
import Progression
import ProgressionConsole

/// The worker of the live-update scenario, run as a child process: an executor running `jobs` jobs of `children`
/// subtasks each (all reporting, so `jobs × (children + 1)` live tasks), and the console mounted in the same
/// process, on its store, served on a free port whose URL it prints first. Every task reports its step as
/// `t=<milliseconds since 1970>` (with its progress) every `reportInterval`: a page's update shows how old the newest
/// report in it is. Runs until SIGTERM.
enum LiveWorker {
    static func run(database: String, jobs: Int, children: Int, reportInterval: Duration) async throws {
        var configuration = TaskExecutor.Configuration()
        configuration.maxConcurrentTasks = jobs
        configuration.logger.logLevel = .warning
        let executor = TaskExecutor(store: try SQLiteTaskStore(path: database), configuration: configuration)
        try await executor.start()
        for job in 0..<jobs {
            _ = try await executor.addTask(name: "live job \(job)", id: "live-\(job)", options: .interactive) { context in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for child in 0..<children {
                        group.addTask {
                            try await context.push("part \(child)") { part in try await report(part, every: reportInterval) }
                        }
                    }
                    group.addTask { try await report(context, every: reportInterval) }
                    try await group.waitForAll()
                }
            }
        }
        var logger = Logger(label: "console-bench.worker")
        logger.logLevel = .warning
        let console = try ProgressionConsole(executor: executor, configuration: .init(path: ""), logger: logger)
        try await console.serve(host: "127.0.0.1", port: 0) { url in
            FileHandle.standardOutput.write(Data((url + "\n").utf8))
        }
        await executor.shutdown(gracePeriod: .seconds(2))
    }

    /// Reports `t=<now>` and a moving progress until the task is stopped.
    static func report(_ context: any TaskContext, every interval: Duration) async throws {
        var value = 0.0
        // Reports of different tasks spread over the interval.
        try await Task.sleep(for: interval * Double.random(in: 0..<1))
        while true {
            value = value >= 0.99 ? 0 : value + 0.001
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            try await context.report(.named("t=\(now)").progress(value))
            try await Task.sleep(for: interval)
        }
    }
}
#endif
