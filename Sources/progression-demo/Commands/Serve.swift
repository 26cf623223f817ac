import ArgumentParser
import Foundation
import Logging
import Progression
import ServiceLifecycle

extension ProgressionDemo {
    /// Runs every `checksum` job of the database as a long-running service.
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the database's checksum jobs as a service until SIGTERM or SIGINT.",
            discussion: """
                Runs the `checksum` jobs of the database (those of dead processes too, resumed), at most \
                --concurrency at once, and picks up jobs submitted later:
                  progressctl submit checksum --input '{"directory": "/path/to/dir"}' --retryable --pausable
                It applies progressctl's pause, resume, cancel and retry requests when it sees them (it looks every 100 ms). SIGTERM or SIGINT \
                stops it gracefully: running jobs stop at their next progress report and stay pending, to be resumed \
                by the next start; exit status 0. Logs go to stderr.

                Another live service on the same database is safe: each job is leased to one process, which alone \
                runs it; the other runs the rest.
                """)

        @OptionGroup var options: DatabaseOptions

        @Option(name: .long, help: ArgumentHelp("Also submit this directory's job at start.", valueName: "dir"))
        var data: String?

        @Option(name: .customLong("log-level"), help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.", valueName: "level"))
        var logLevel: String = "info"

        func validate() throws {
            guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
        }

        func run() async throws {
            ProgressionDemo.bootstrapLogging(level: Logger.Level(rawValue: logLevel) ?? .info)
            let logger = Logger(label: "progression-demo")
            if let data {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: data, isDirectory: &isDirectory), isDirectory.boolValue else {
                    throw DemoError("the data directory '\(data)' does not exist")
                }
            }
            let executor = try await options.makeExecutor(logger: Logger(label: "progression"), jobLogger: logger)
            try await executor.start()
            logger.info(
                "serving checksum jobs",
                metadata: [
                    "db": "\(DemoDatabase.displayName(options.databasePath))", "concurrency": "\(options.concurrency)",
                    "pid": "\(ProcessInfo.processInfo.processIdentifier)",
                ])
            if let data {
                let (id, existed) = try await JobLookup.submit(ChecksumInput(directory: data), on: executor)
                logger.info("\(existed ? "found" : "submitted") job", metadata: ["job": "\(id)", "directory": "\(data)"])
            }
            // SIGTERM and SIGINT reach the group through ShutdownSignals, which took them over when the command started.
            let group = ServiceGroup(services: [executor, JobLogger(executor: executor, logger: logger)], logger: logger)
            await ShutdownSignals.stops(group)
            try await group.run()
            logger.info("stopped")
        }
    }
}

/// Logs the jobs of the progress stream: when one starts, every quarter of its progress, and how it ended (a completed
/// checksum job logs its own end, with its summary).
struct JobLogger: Service {
    let executor: TaskExecutor
    let logger: Logger

    func run() async throws {
        var quarters: [String: Int] = [:]
        var ended: Set<String> = []
        for await graph in executor.progressStream.cancelOnGracefulShutdown() {
            for root in graph.tasks where !ended.contains(root.id) {
                let metadata: Logger.Metadata = ["job": "\(root.id)", "name": "\(root.name)"]
                if root.isFinished {
                    ended.insert(root.id)
                    quarters[root.id] = nil
                    await logEnd(root, metadata: metadata)
                    continue
                }
                guard root.status == .running else { continue }
                let quarter = Int((root.progress ?? 0) * 4)
                if quarters[root.id] == nil {
                    logger.info("job running", metadata: metadata.merging(["attempt": "\(root.attempt)"]) { $1 })
                    quarters[root.id] = quarter
                } else if let last = quarters[root.id], quarter > last {
                    quarters[root.id] = quarter
                    logger.info("job progress", metadata: metadata.merging(["progress": "\(quarter * 25)%"]) { $1 })
                }
            }
        }
    }

    private func logEnd(_ root: TaskSnapshot, metadata: Logger.Metadata) async {
        switch root.status {
        case .completed:
            // A checksum job logs its own completion, with its summary (see ChecksumJob.register); a folder's job
            // says it is done, with its parent.
            guard root.kind != ChecksumJob.kind else { return }
            if let parent = root.parentJobID {
                logger.info("folder done", metadata: metadata.merging(["parent": "\(parent)"]) { $1 })
                return
            }
            logger.info("job completed", metadata: metadata)
        default:
            logger.warning(
                "job \(root.status)",
                metadata: metadata.merging(["error": "\(root.errorDescription ?? "")"]) { $1 })
        }
    }
}
