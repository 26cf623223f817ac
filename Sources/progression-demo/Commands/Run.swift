import ArgumentParser
import Foundation
import Logging
import Progression
import ServiceLifecycle
import UnixSignals

extension ProgressionDemo {
    /// Runs the checksum job of one directory to its end in the foreground, with a live progress tree.
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Checksum a directory (default: a generated sample) as a resumable job, drawing live progress.",
            discussion: """
                Submits the directory's `checksum` job (its idempotency key is the directory's absolute path, so a \
                run after a crash or Ctrl-C finds the same job), runs it to the end, writes the manifest and prints \
                a summary, including how many files were skipped because an earlier run had finished them.

                Exit status: 0 when every file was read; 1 when some file could not be read (the job still \
                completes: each failure is in the manifest and the summary) or on an error; 130 when stopped by \
                Ctrl-C or SIGTERM before the end (run again to resume).

                The job also runs other unfinished `checksum` jobs of the database nobody else runs, up to \
                --concurrency at once. When a live `serve` on the same database holds this directory's job, `run` \
                waits for it to finish (leases keep two processes from running one job).
                """)

        @OptionGroup var options: DatabaseOptions

        @Option(
            name: .long,
            help: ArgumentHelp(
                "The directory to checksum (default: the sample data set, generated under .build/progression-demo or the temporary directory when missing).",
                valueName: "dir"))
        var data: String?

        @Option(
            name: .long,
            help: ArgumentHelp("Where to write the manifest (default: <dir>.manifest.tsv, next to the directory).", valueName: "path"))
        var manifest: String?

        @Option(name: .customLong("sample-size-mb"), help: ArgumentHelp("Size of the generated sample data set.", valueName: "mb"))
        var sampleSizeMB: Int = 300

        @Option(name: .customLong("file-delay-ms"), help: .hidden)
        var fileDelayMilliseconds: Int?

        func validate() throws {
            guard sampleSizeMB >= 1 else { throw ValidationError("--sample-size-mb must be 1 or more") }
        }

        func run() async throws {
            ProgressionDemo.bootstrapLogging(level: .warning)
            let invocationStart = Date()
            let output = TerminalOutput()
            let directory = try dataDirectory(output)
            // Absolute, canonical paths are stored: a relative one would be read from whichever directory the worker
            // that resumes the job runs in (issue 22, defect 9).
            let input = ChecksumInput(
                directory: ChecksumInput.canonical(directory), manifest: manifest.map(ChecksumInput.canonical),
                fileDelayMilliseconds: fileDelayMilliseconds)

            let executor = try await options.makeExecutor()
            try await executor.start()
            let (jobID, existed) = try await JobLookup.submit(input, on: executor)
            output.line("Database: \(DemoDatabase.displayName(options.databasePath))")
            output.line(
                existed
                    ? "Resuming job \(jobID): an earlier run left it unfinished; files it finished are skipped."
                    : "Job \(jobID): checksum of \(input.directoryPath)")

            let driver = JobDriver(executor: executor, jobID: jobID)
            let logger = Logger(label: "progression-demo")
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    services: [
                        .init(service: executor),
                        .init(service: driver, successTerminationBehavior: .gracefullyShutdownGroup),
                    ],
                    gracefulShutdownSignals: [.sigterm, .sigint],
                    logger: logger))
            try await group.run()

            guard let status = driver.outcome.status else {
                output.line(
                    "Stopped before the end; the job is left pending. Run the same command again to resume it: "
                        + "files already done are not read again.")
                throw ExitCode(130)
            }
            let record = try await executor.store.task(id: jobID)
            switch status {
            case .completed:
                let summary = try record?.checkpoint.map { try JSONDecoder().decode(JobSummary.self, from: $0) }
                try report(summary, jobID: jobID, existed: existed, since: invocationStart, output: output)
            case .failed:
                throw DemoError("job \(jobID) failed: \(record?.errorDescription ?? "unknown error")")
            default:
                throw DemoError("job \(jobID) was \(status)")
            }
        }

        /// `--data`, checked, or the sample data set (generated when missing).
        func dataDirectory(_ output: TerminalOutput) throws -> String {
            if let data {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: data, isDirectory: &isDirectory) else {
                    throw DemoError("the data directory '\(data)' does not exist")
                }
                guard isDirectory.boolValue else { throw DemoError("'\(data)' is not a directory") }
                return data
            }
            let target = SampleDataSet.directory(megabytes: sampleSizeMB)
            if !FileManager.default.fileExists(atPath: target.path) {
                output.line("Generating the sample data set (\(sampleSizeMB) MB of text) in \(target.path) …")
            }
            let clock = ContinuousClock()
            var lastShown = -1
            var result: (directory: URL, generated: Bool)!
            let elapsed = try clock.measure {
                result = try SampleDataSet.ensure(megabytes: sampleSizeMB) { written, total in
                    let percent = written * 100 / max(total, 1)
                    guard output.isTerminal, percent / 5 != lastShown else { return }
                    lastShown = percent / 5
                    output.redraw(["  " + Format.bar(Double(written) / Double(max(total, 1)), width: 24) + " \(percent)%"])
                }
            }
            output.endBlock()
            if result.generated {
                output.line("Generated the sample in \(Format.duration(elapsed / .seconds(1))).")
            } else {
                output.line("Sample data: \(result.directory.path) (generated earlier, reused)")
            }
            return result.directory.path
        }

        func report(
            _ summary: JobSummary?, jobID: String, existed: Bool, since invocationStart: Date, output: TerminalOutput
        ) throws {
            guard let summary else {
                output.line("Job \(jobID) completed.")
                return
            }
            let rate = summary.seconds > 0 ? Double(summary.bytes) / 1_000_000 / summary.seconds : 0
            output.line(
                "Done: \(summary.files) files, \(Format.megabytes(summary.bytes)) in \(Format.duration(summary.seconds))"
                    + String(format: " (%.1f MB/s)", rate) + ".")
            // Files done by an earlier run: those of folders whose job finished before this run began, and those
            // that a folder's job found done when it ran again.
            let skipped = (summary.folders ?? []).reduce(0) { total, folder in
                total + ((folder.finishedAt ?? .distantFuture) < invocationStart ? folder.files : folder.skipped)
            }
            if existed || skipped > 0 {
                var text = "Resumed: skipped \(skipped) of \(summary.files) files already done by an earlier run"
                if summary.continuedFromCheckpoint > 0 {
                    text += "; \(summary.continuedFromCheckpoint) continued from a checkpoint inside the file"
                }
                output.line(text + ".")
            }
            output.line("Manifest: \(summary.manifest)")
            // A resumed job keeps the manifest path it was submitted with; one asked for now gets a copy.
            if let manifest {
                let requested = ChecksumInput.canonical(manifest)
                if requested != summary.manifest {
                    do {
                        // Written as the job writes it (a device or a pipe at that path is refused, not replaced).
                        let text = try Data(contentsOf: URL(fileURLWithPath: summary.manifest))
                        try Manifest.checkWritable(requested)
                        try text.write(to: URL(fileURLWithPath: requested), options: .atomic)
                        output.line("Manifest copied to \(requested), as --manifest asked (the job was submitted with the path above).")
                    } catch {
                        throw DemoError("cannot write the manifest to '\(requested)': \(ProgressionError.describe(error))")
                    }
                }
            }
            output.line("Inspect: progressctl --db '\(options.databasePath)' show \(jobID)")
            if !summary.failures.isEmpty {
                output.line("Failed: \(summary.failures.count) file\(summary.failures.count == 1 ? "" : "s") could not be read:")
                for failure in summary.failures {
                    output.line("  \(failure.path): \(failure.error ?? "")")
                }
                throw DemoError(
                    "\(summary.failures.count) file\(summary.failures.count == 1 ? "" : "s") could not be read: "
                        + summary.failures.map(\.path).joined(separator: ", "))
            }
        }
    }
}
