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
            guard change.wait >= 0, change.wait.isFinite else { throw CLIError.usage("--wait must be 0 or more seconds") }
            let store = try options.openStore(readOnly: false)
            let task = try await store.resolveTask(id)
            let control = TaskControl(store: store, wait: change.waitDuration)
            let root = try await control.root(of: task)
            if !task.isRoot, !root.status.isFinished {
                throw CLIError(
                    "task '\(task.id)' is part of '\(root.id)' (\(root.name)), which is \(root.status); remove or cancel the root instead")
            }
            var result = TaskControl.Result(
                id: task.id, name: task.name, action: "remove", via: "direct", ownerID: root.ownerID, status: nil,
                dryRun: false, outcome: "")
            if !task.status.isFinished {
                guard force else {
                    throw CLIError(
                        "task '\(task.id)' (\(task.name)) is \(task.status); only a finished task is removed (use --force to cancel it first)")
                }
                try TaskControl.check(.remove, task)
                if let owner = try await control.liveOwner(of: root) {
                    let applied = try await control.request(.remove, on: task, owner: owner, dryRun: false)
                    try ChangeReport.print([applied], json: options.json)
                    return
                }
                _ = try await control.direct(.remove, on: task, dryRun: false)
            }
            let finished = Set(TaskStatus.allCases.filter(\.isFinished))
            guard let deleted = try await store.checked({ try await $0.deleteTree(of: task.id, ifStatusIn: finished) })
            else {
                let now = try await store.checked { try await $0.task(id: task.id) }
                throw CLIError(
                    "task '\(task.id)' (\(task.name)) changed meanwhile: it is \(now?.status.rawValue ?? "gone"); nothing was removed")
            }
            result.outcome = "deleted \(deleted) task\(deleted == 1 ? " with its" : "s with their") history"
            try ChangeReport.print([result], json: options.json)
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
            let deleted = try await store.checked { try await $0.prune(finishedBefore: before, statuses: statuses) }
            if options.json {
                try JSONOutput.print(PruneJSON(deleted: deleted, finishedBefore: before, statuses: statuses.map(\.rawValue).sorted()))
            } else {
                Terminal.output("pruned \(deleted) task\(deleted == 1 ? "" : "s") finished before \(Format.time(before))")
            }
        }
    }
}
