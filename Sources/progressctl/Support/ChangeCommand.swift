import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

/// The shared body of `pause`, `resume`, `cancel`, `retry` and `remove`: one task by id, or every root the filters
/// choose.
///
/// By filters it reads the matching roots first, asks before it changes them when stdin and stdout are a terminal
/// (`--yes` skips the question; without a terminal `--yes` or `--dry-run` is required), changes them one by one through
/// ``TaskControl`` and prints a line per change, one line per refused task on stderr, and a summary
/// (`cancelled 12 of 14 tasks (2 refused: 8k3fq2xa, 9a7b1c2d)`). It exits 1 when a task was refused.
struct ChangeCommand {
    var action: ControlRequest.Action
    var options: GlobalOptions
    var change: ChangeOptions
    var filters: TaskFilterOptions
    /// Statuses chosen when no `--status` is given (default: those the action changes, as the lifecycle says).
    var defaultStatuses: Set<TaskStatus>?
    /// A rule of the command beyond the lifecycle's (`remove` without `--force` takes finished tasks only).
    var precheck: (TaskRecord) throws(TaskControl.Refusal) -> Void = { _ throws(TaskControl.Refusal) in }

    /// Changes the task `id`, or, without one, the roots the filters choose.
    func run(id: String?) async throws {
        try change.validateWait()
        if let id {
            guard filters.isEmpty else {
                throw CLIError.usage("give a task id or filters (--status, --kind, --since, --until, --name, --input), not both")
            }
            try await runOne(id)
        } else {
            guard !filters.isEmpty else {
                throw CLIError.usage(
                    "give a task id or filters (--status, --kind, --since, --until, --name, --input) to choose the tasks to \(action.rawValue)")
            }
            try await runFiltered()
        }
    }

    private func runOne(_ id: String) async throws {
        let store = try options.openStore(readOnly: change.dryRun)
        let control = TaskControl(store: store, wait: change.waitDuration)
        let aimed = try await store.resolveTask(id)
        do {
            // A link stands for its child job: the change acts on that job (``TaskControl`` says so in its report).
            try precheck(try await control.target(of: aimed))
        } catch let refusal as TaskControl.Refusal {
            throw CLIError(refusal.message)
        }
        let result = try await control.perform(action, on: aimed, dryRun: change.dryRun)
        try ChangeReport.print([result], json: options.json)
    }

    private func runFiltered() async throws {
        let query = try filters.query(defaultStatuses: defaultStatuses ?? TaskControl.statuses(changedBy: action))
        guard change.dryRun || change.yes || Terminal.canAsk else {
            throw CLIError.usage(
                "\(action.rawValue) by filter asks for confirmation on a terminal; give --yes to go ahead without "
                    + "one, or --dry-run to see what it would do")
        }
        let store = try options.openStore(readOnly: change.dryRun)
        let tasks = try await TaskControl.roots(matching: query, in: store)
        if !change.dryRun, !change.yes, !tasks.isEmpty {
            guard Terminal.confirm("\(action.rawValue) \(Format.tasks(tasks.count)) (\(Self.byStatus(tasks)))?") else {
                throw CLIError("not confirmed; nothing was changed")
            }
        }
        let outcomes = try await TaskControl(store: store, wait: change.waitDuration)
            .perform(action, on: tasks, precheck: precheck, dryRun: change.dryRun)
        try report(outcomes)
    }

    /// `10 pending, 4 running`.
    static func byStatus(_ tasks: [TaskRecord]) -> String {
        let counts = Dictionary(grouping: tasks, by: \.status).mapValues(\.count)
        return TaskStatus.allCases.compactMap { status in counts[status].map { "\(Format.count($0)) \(status)" } }
            .joined(separator: ", ")
    }

    private func report(_ outcomes: [TaskControl.Outcome]) throws {
        let summary = TaskControl.Summary(action: action, dryRun: change.dryRun, outcomes: outcomes)
        let changes = summary.changes
        let refusals = summary.refused
        if options.json {
            try JSONOutput.print(summary)
        } else {
            try ChangeReport.print(changes, json: false)
        }
        for refusal in refusals { Terminal.standardError("progressctl: refused: \(refusal.message)") }
        if !options.json {
            var summary = "\(change.dryRun ? "would \(action.rawValue)" : action.pastTense) \(Format.count(changes.count)) of "
                + Format.tasks(outcomes.count)
            if !refusals.isEmpty {
                let shown = refusals.prefix(5).map(\.id).joined(separator: ", ")
                summary += " (\(Format.count(refusals.count)) refused: \(shown)\(refusals.count > 5 ? ", …" : ""))"
            }
            Terminal.output(summary.escapedForTerminal)
        }
        if !refusals.isEmpty { throw ExitCode(1) }
    }
}

/// Prints what changes did, a line each: `cancel 8k3fq2xa (import): applied: running → cancelled`.
enum ChangeReport {
    static func print(_ results: [TaskControl.Change], json: Bool) throws {
        if json {
            try JSONOutput.print(results)
            return
        }
        for result in results {
            let verb = result.dryRun ? "would \(result.action)" : result.action
            let how = result.via == "owner" ? " (by owner '\(result.ownerID ?? "")')" : ""
            let link = result.link.map { " (the child job of link \($0))" } ?? ""
            Terminal.output("\(verb) \(result.id) (\(result.name))\(link)\(how): \(result.outcome)".escapedForTerminal)
        }
    }
}
