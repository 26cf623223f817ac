import ArgumentParser
import Foundation
import Logging

/// `progression-demo`: the example batch service of Progression. It checksums a directory tree as a resumable job
/// whose tasks live in a SQLite file, drawing a live tree of progress bars.
@main
struct ProgressionDemo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "progression-demo",
        abstract: "Checksum a directory tree as a crash-resumable Progression job, with live nested progress.",
        discussion: """
            With no arguments it generates a sample data set (once; it is reused) and runs one `checksum` job over \
            it: one child job per folder (any `serve` on the database may run it), in it one step per file (named \
            by its path, weighted by its size), each file read in 1 MiB chunks with a checkpoint every 8 MiB; then \
            it writes a manifest and prints a summary.

            Kill it (Ctrl-C, or kill -9) and run the same command again: it resumes, skipping the files it had \
            finished, and says how many. Watch or inspect it from another terminal with progressctl:
              progressctl watch
              progressctl list
              progressctl show <id>
              progressctl history <id>

            As a service (`serve`), it runs every `checksum` job in the database, including ones submitted later:
              progressctl submit checksum --input '{"directory": "/path/to/dir"}'
            The job's input is JSON: "directory" (required), "manifest" (default <directory>.manifest.tsv), \
            "parallelFiles" (default 2), "fileDelayMilliseconds" (default 0).
            """,
        subcommands: [Run.self, Serve.self, Generate.self],
        defaultSubcommand: Run.self
    )

    /// Parses and runs the command. Failures are one line `progression-demo: error: …` on stderr and a non-zero
    /// status; help goes to stdout with status 0.
    static func main() async {
        let command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            exit(withError: error)
        }
        ignoreBrokenPipes()
        if command is Serve { ShutdownSignals.install() }
        do {
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                var command = command
                try command.run()
            }
        } catch let error as ExitCode {
            Foundation.exit(error.rawValue)
        } catch let error as DemoError {
            fail(error.message)
        } catch {
            if exitCode(for: error) == .success { exit(withError: error) }
            fail(error is any LocalizedError ? error.localizedDescription : message(for: error))
        }
    }

    /// Lets the demo outlive a reader of its output that went away (`serve 2>&1 | tee log`, then Ctrl-C, which ends
    /// `tee` first): SIGPIPE is ignored, so a write to the closed pipe fails with `EPIPE` instead of killing the
    /// process, and it goes on to stop gracefully on SIGINT or SIGTERM (or, for `run`, to finish its job). `serve`
    /// writes only its log, through swift-log's stdio stream, which drops a failed write; `run`'s display writes with
    /// `write(2)` and stops writing on `EPIPE` (``TerminalOutput``).
    static func ignoreBrokenPipes() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// Writes `message` as one line on stderr and exits with status 1.
    static func fail(_ message: String) -> Never {
        let oneLine = message.split(whereSeparator: \.isNewline).joined(separator: " ")
        FileHandle.standardError.write(Data("progression-demo: error: \(oneLine)\n".utf8))
        Foundation.exit(1)
    }

    /// Sends log lines to stderr at `level` (once per process).
    static func bootstrapLogging(level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}

/// An error for people: printed as one line on stderr.
struct DemoError: Error, CustomStringConvertible {
    var message: String

    init(_ message: String) {
        self.message = message
    }

    var description: String { message }
}
