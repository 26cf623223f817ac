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

    /// Deletes old finished tasks.
    struct Prune: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete finished tasks (with their trees and history) that finished longer ago than a duration.",
            discussion: """
                Examples:
                  progressctl prune --older-than 7d
                  progressctl prune --older-than 12h --status completed
                """)

        @OptionGroup var options: GlobalOptions

        @Option(name: .customLong("older-than"), help: ArgumentHelp("Finished longer ago than this (30m, 12h, 7d).", valueName: "duration"))
        var olderThan: String

        @Option(name: .long, help: ArgumentHelp("Only these finished statuses (repeat, or a comma list; default: completed, failed, cancelled).", valueName: "status"))
        var status: [String] = []

        /// `prune --json`.
        struct PruneJSON: Codable {
            var deleted: Int
            var finishedBefore: Date
            var statuses: [String]
        }

        func run() async throws {
            let seconds = try InputParsing.seconds(olderThan, option: "--older-than")
            let statuses = try InputParsing.statuses(status) ?? Set(TaskStatus.allCases.filter(\.isFinished))
            if let unfinished = statuses.first(where: { !$0.isFinished }) {
                throw CLIError.usage("prune removes finished tasks only, not \(unfinished) ones")
            }
            let store = try options.openStore(readOnly: false)
            let before = Date().addingTimeInterval(-seconds)
            let deleted = try await store.checked {
                try await $0.prune(finishedBefore: before, statuses: statuses, dryRun: false).roots
            }
            if options.json {
                try JSONOutput.print(PruneJSON(deleted: deleted, finishedBefore: before, statuses: statuses.map(\.rawValue).sorted()))
            } else {
                Terminal.output("pruned \(deleted) task\(deleted == 1 ? "" : "s") finished before \(Format.time(before))")
            }
        }
    }
}
