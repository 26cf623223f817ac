import ArgumentParser
import Foundation
import ProgressionOperator

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
            written directly (one transaction with a state check) when none is. A change of a job reaches its \
            child jobs (wherever they run), and a change aimed at a link (ROOT/NAME of a child job) acts on that \
            child job.

            A change of many tasks takes filters instead of an id (--status, --kind, --since, --until, --name, --input), \
            shows what it would do with --dry-run, asks before it acts on a terminal (--yes to skip the question) \
            and ends with one line counting what it changed.

            Colour is used on a terminal unless NO_COLOR is set (--color always|never overrides both). JSON \
            documents (--json) give times in ISO 8601 with milliseconds and null for every absent value.

            Examples:
              progressctl list --status failed,running --since 12h
              progressctl show 8k3fq2xa
              progressctl watch
              progressctl retry --all-failed --kind import --dry-run
              progressctl cancel --status pending --kind import --until 2h --yes
              progressctl submit import --input '{"file": "a.csv"}' --retryable --name "import a.csv"
              progressctl submit report --input '{}' --delay 10m
              progressctl run-now 8k3fq2xa
              progressctl submit report --input '{}' --after 8k3fq2xa
              progressctl signal 8k3fq2xa approve --payload '{"by": "ops"}'
              progressctl kinds; progressctl pause-kind import
              progressctl schedules
              progressctl prune --older-than 7d --vacuum
            """,
        version: ProgressionVersion.current,
        subcommands: [
            List.self, Show.self, History.self, Watch.self, Stats.self, Doctor.self, Console.self,
            Submit.self, Signal.self, Retry.self, Pause.self, Resume.self, Cancel.self, RunNow.self, Remove.self,
            Prune.self,
            Kinds.self, PauseKind.self, ResumeKind.self, Schedules.self,
        ]
    )

    /// `--db`, `--json`, `--busy-timeout` and `--color` given before the subcommand's name.
    @OptionGroup var globals: GlobalOptions

    /// Parses the command line and runs the command. Help goes to stdout with status 0; every failure is one line
    /// `progressctl: error: …` on stderr and a non-zero status. A reader of stdout that went away ends it quietly
    /// (SIGPIPE is ignored; see ``Terminal``).
    static func main() async {
        Terminal.ignoreBrokenPipes()
        let command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            if exitCode(for: error) == .success { exit(withError: error) }
            fail(message(for: error), code: exitCode(for: error).rawValue)
        }
        if let command = command as? any GlobalOptionsCommand { Terminal.setColor(command.options.color) }
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

/// A command that takes the ``GlobalOptions``: `main` reads its `--color` before running it. (`SendableMetatype`: no
/// conformance is isolated to an actor, so the cast in `main` leaves the command free to run anywhere.)
protocol GlobalOptionsCommand: SendableMetatype {
    var options: GlobalOptions { get }
}

extension Progressctl: GlobalOptionsCommand {
    var options: GlobalOptions { globals }
}

extension Progressctl.List: GlobalOptionsCommand {}
extension Progressctl.Show: GlobalOptionsCommand {}
extension Progressctl.History: GlobalOptionsCommand {}
extension Progressctl.Watch: GlobalOptionsCommand {}
extension Progressctl.Stats: GlobalOptionsCommand {}
extension Progressctl.Doctor: GlobalOptionsCommand {}
extension Progressctl.Submit: GlobalOptionsCommand {}
extension Progressctl.Signal: GlobalOptionsCommand {}
extension Progressctl.Retry: GlobalOptionsCommand {}
extension Progressctl.Pause: GlobalOptionsCommand {}
extension Progressctl.Resume: GlobalOptionsCommand {}
extension Progressctl.Cancel: GlobalOptionsCommand {}
extension Progressctl.Remove: GlobalOptionsCommand {}
extension Progressctl.Prune: GlobalOptionsCommand {}
extension Progressctl.RunNow: GlobalOptionsCommand {}
extension Progressctl.Kinds: GlobalOptionsCommand {}
extension Progressctl.PauseKind: GlobalOptionsCommand {}
extension Progressctl.ResumeKind: GlobalOptionsCommand {}
extension Progressctl.ListSchedules: GlobalOptionsCommand {}
extension Progressctl.PauseSchedule: GlobalOptionsCommand {}
extension Progressctl.ResumeSchedule: GlobalOptionsCommand {}
extension Progressctl.TriggerSchedule: GlobalOptionsCommand {}
extension Progressctl.RemoveSchedule: GlobalOptionsCommand {}
