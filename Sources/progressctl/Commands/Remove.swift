import ArgumentParser
import Foundation
import Progression

extension Progressctl {
    /// Deletes a task, its subtree and its history.
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a finished task with its subtree and history.",
            discussion: """
                A pending, running or paused task is removed only with --force: it is cancelled first (by the \
                executor that holds it, when one runs).

                Examples:
                  progressctl remove 3f2a
                  progressctl remove 3f2a --force
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var change: ChangeOptions

        @Argument(help: "The task id, or a unique prefix of it.")
        var id: String

        @Flag(name: .long, help: "Cancel an unfinished task, then remove it.")
        var force = false

        func run() async throws {
            try change.validateWait()
            let store = try options.openStore(readOnly: false)
            let task = try await store.resolveTask(id)
            guard task.status.isFinished || force else {
                throw CLIError(
                    "task '\(task.id)' (\(task.name.escapedForTerminal)) is \(task.status); only a finished task is "
                        + "removed (use --force to cancel it first)")
            }
            let control = TaskControl(store: store, wait: change.waitDuration)
            try ChangeReport.print([try await control.perform(.remove, on: task)], json: options.json)
        }
    }

}
