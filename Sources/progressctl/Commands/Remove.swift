import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Deletes a task, its subtree and its history.
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a finished task with its subtree and history (one by id, or many by filters).",
            discussion: """
                A pending, running or paused task is removed only with --force: it is cancelled first (by the \
                executor that holds it, when one runs).

                Without an id, the filters choose the roots (by default the finished ones; with --force any). On a \
                terminal it asks before it deletes them (--yes to skip the question, required without a terminal); \
                --dry-run shows what it would do. Each refused task gets a line on stderr and the last line counts \
                what was removed; the status is 1 when one was refused. To delete old finished tasks, prune is \
                quicker.

                Examples:
                  progressctl remove 8k3fq2xa
                  progressctl remove 8k3fq2xa --force
                  progressctl remove --status failed --kind import --until 7d --yes
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var filters: TaskFilterOptions
        @OptionGroup var change: ChangeOptions

        @Argument(help: "The task id, or a unique prefix of it.")
        var id: String?

        @Flag(name: .long, help: "Cancel an unfinished task, then remove it.")
        var force = false

        func run() async throws {
            let changed = TaskControl.statuses(changedBy: .remove)
            var command = ChangeCommand(
                action: .remove, options: options, change: change, filters: filters,
                defaultStatuses: force ? changed : changed.filter(\.isFinished))
            if !force {
                command.precheck = TaskControl.requireFinished
            }
            try await command.run(id: id)
        }
    }
}
