import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Follows tasks live: a dashboard on a terminal, one line per change otherwise.
    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Follow tasks live: a dashboard on a terminal, one line per change otherwise.",
            discussion: """
                Polls the database about ten times a second and reads nothing while it is unchanged.

                On a terminal it draws a dashboard in the terminal's alternate screen (the scrollback is left as \
                it was): a line counting the tasks by status, then each watched root with its bar, percent, rate, \
                time left, step, status and short id, and below it only its running, paused and failed tasks, the \
                other children of each parent counted on one line. It fits the terminal's size and follows its \
                changes. Colour is off when NO_COLOR is set or with --color never.

                Otherwise it prints one line per root whose status, percent or step changed: id, status, percent, \
                step, and the rate and time left when known (with --all, a line per changed task of the trees; with \
                --json, one JSON object per line).

                Without an id it follows every pending, running or paused task and those that start later, until \
                Ctrl-C. With an id, or with --until-done, it ends when every watched task finished: status 0 when \
                all completed, 1 when one failed or was cancelled. It ends with status 1 when the database file is \
                deleted.

                Examples:
                  progressctl watch
                  progressctl watch 3f2a
                  progressctl watch --until-done | tee progress.log
                  progressctl watch 3f2a --all --json
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The task id, or a unique prefix of it (default: every unfinished task, and new ones).")
        var id: String?

        @Flag(name: .customLong("until-done"), help: "End when every watched task has finished (always so with an id).")
        var untilDone = false

        @Flag(name: .long, help: "Without a terminal, print changes of every task of the trees, not only of roots.")
        var all = false

        @Option(name: .long, help: ArgumentHelp("Seconds between polls.", valueName: "seconds"))
        var interval: Double = 0.1

        func run() async throws {
            guard interval > 0, interval.isFinite else { throw CLIError.usage("--interval must be more than 0 seconds") }
            let store = try options.openStore(readOnly: true)
            let database = store.isFile ? try DatabaseFileIdentity(path: options.databasePath) : nil
            var taskID: String?
            if let id { taskID = try await store.resolveTask(id).id }
            let dashboard = Terminal.isInteractive && !options.json
            let configuration = WatchSession.Configuration(
                taskID: taskID, untilDone: untilDone, all: all, json: options.json, dashboard: dashboard,
                color: dashboard && Terminal.usesColor, interval: .milliseconds(Int64((interval * 1000).rounded())))
            try await WatchSession(configuration: configuration, store: store, database: database).run()
        }
    }
}
