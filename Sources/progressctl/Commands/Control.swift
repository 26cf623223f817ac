import ArgumentParser
import Foundation
import Progression

/// Options of the commands that change a task.
struct ChangeOptions: ParsableArguments {
    /// How long to wait for a live executor to apply the change.
    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Seconds to wait for a running executor to apply the change.", valueName: "seconds"))
    var wait: Double = 5

    var waitDuration: Duration { .milliseconds(Int64(max(0, min(wait, Self.longestWait)) * 1000)) }

    /// A day: longer waits are refused (a live owner answers within a second).
    static let longestWait = 86_400.0

    /// Refuses a wait that is negative, not a number, or longer than a day.
    func validateWait() throws {
        guard wait >= 0, wait.isFinite, wait <= Self.longestWait else {
            throw CLIError.usage("--wait must be between 0 and \(Int(Self.longestWait)) seconds")
        }
    }
}

/// The shared body of `pause`, `resume` and `cancel`.
enum SimpleChange {
    static func run(_ action: ControlRequest.Action, id: String, options: GlobalOptions, change: ChangeOptions) async throws {
        try change.validateWait()
        let store = try options.openStore(readOnly: false)
        let task = try await store.resolveTask(id)
        let result = try await TaskControl(store: store, wait: change.waitDuration).perform(action, on: task)
        try ChangeReport.print([result], json: options.json)
    }
}

/// Prints what changes did.
enum ChangeReport {
    static func print(_ results: [TaskControl.Result], json: Bool) throws {
        if json {
            try JSONOutput.print(results)
            return
        }
        for result in results {
            let verb = result.dryRun ? "would \(result.action)" : result.action
            let how = result.via == "owner" ? " (by owner '\(result.ownerID ?? "")')" : ""
            Terminal.output("\(verb) \(result.id) (\(result.name))\(how): \(result.outcome)")
        }
    }
}

extension Progressctl {
    /// Pauses a task.
    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pause a pending or running task whose options allow pausing.",
            discussion: """
                A running executor that holds the task pauses it at its next report; with none, a pending task is \
                marked paused in the database.

                Examples:
                  progressctl pause 3f2a
                  progressctl pause 3f2a --wait 10
                """)
        @OptionGroup var options: GlobalOptions
        @OptionGroup var change: ChangeOptions
        @Argument(help: "The task id, or a unique prefix of it.") var id: String

        func run() async throws { try await SimpleChange.run(.pause, id: id, options: options, change: change) }
    }

    /// Resumes a paused task.
    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Resume a paused task.",
            discussion: """
                Examples:
                  progressctl resume 3f2a
                """)
        @OptionGroup var options: GlobalOptions
        @OptionGroup var change: ChangeOptions
        @Argument(help: "The task id, or a unique prefix of it.") var id: String

        func run() async throws { try await SimpleChange.run(.resume, id: id, options: options, change: change) }
    }

    /// Cancels a task.
    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cancel a pending, paused or running task whose options allow it.",
            discussion: """
                Cancelling a task cancels everything below it.

                Examples:
                  progressctl cancel 3f2a
                """)
        @OptionGroup var options: GlobalOptions
        @OptionGroup var change: ChangeOptions
        @Argument(help: "The task id, or a unique prefix of it.") var id: String

        func run() async throws { try await SimpleChange.run(.cancel, id: id, options: options, change: change) }
    }
}
