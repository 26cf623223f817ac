import ArgumentParser
import Foundation

/// `progressctl`: the operator's tool for a Progression database — read what runs and what failed, and change tasks
/// whether or not the service that runs them is up.
@main
struct Progressctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "progressctl",
        abstract: "Inspect and control the tasks of a Progression database.",
        discussion: """
            The database is --db PATH, else $PROGRESSION_DB, else \
            $XDG_STATE_HOME/progression/progression.sqlite (~/.local/state/progression/progression.sqlite). \
            progressctl never creates it. A task id may be shortened to any unique prefix.

            Reading needs no cooperation from the service. A change (pause, resume, cancel, retry, remove --force) \
            goes to the executor that holds the task as a control request when that executor is alive, and is \
            written directly (one transaction with a state check) when none is.

            Examples:
              progressctl list --status failed,running --since 12h
              progressctl show 3f2a
              progressctl watch
              progressctl retry --all-failed --kind import --dry-run
              progressctl submit import --input '{"file": "a.csv"}' --retryable
            """,
        subcommands: [
            List.self, Show.self, History.self, Watch.self, Stats.self, Doctor.self,
            Submit.self, Retry.self, Pause.self, Resume.self, Cancel.self, Remove.self, Prune.self,
        ]
    )

    /// `--db`, `--json` and `--busy-timeout` given before the subcommand's name.
    @OptionGroup var globals: GlobalOptions

    /// Parses the command line and runs the command. Help goes to stdout with status 0; every failure is one line
    /// `progressctl: error: …` on stderr and a non-zero status.
    static func main() async {
        let command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            if exitCode(for: error) == .success { exit(withError: error) }
            fail(message(for: error), code: exitCode(for: error).rawValue)
        }
        do {
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                var command = command
                try command.run()
            }
        } catch let error as CLIError {
            fail(error.message, code: error.exitCode)
        } catch let error as ExitCode {
            Foundation.exit(error.rawValue)
        } catch {
            if exitCode(for: error) == .success { exit(withError: error) }
            let code = error is any LocalizedError ? 1 : exitCode(for: error).rawValue
            fail(error is any LocalizedError ? "\(error)" : message(for: error), code: code == 0 ? 1 : code)
        }
    }

    /// Writes `message` as one line on stderr and exits with `code`.
    static func fail(_ message: String, code: Int32) -> Never {
        let oneLine = message.split(whereSeparator: \.isNewline).joined(separator: " ")
        Terminal.standardError("progressctl: error: \(oneLine)")
        Foundation.exit(code == 0 ? 1 : code)
    }
}
