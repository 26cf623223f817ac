import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Pauses a task, or the roots the filters choose.
    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pause a pending or running task whose options allow pausing (one by id, or many by filters).",
            discussion: """
                A running executor that holds the task pauses it at its next report; with none, a pending task is \
                marked paused in the database.

                Without an id, the filters choose the roots (by default the pending and running ones). On a \
                terminal it asks before it changes them (--yes to skip the question, required without a terminal); \
                --dry-run shows what it would do. Each refused task gets a line on stderr and the last line counts \
                what changed; the status is 1 when one was refused.

                Examples:
                  progressctl pause 8k3fq2xa
                  progressctl pause 8k3fq2xa --wait 10
                  progressctl pause --kind import --status pending --dry-run
                """)
        @OptionGroup var options: GlobalOptions
        @OptionGroup var filters: TaskFilterOptions
        @OptionGroup var change: ChangeOptions
        @Argument(help: "The task id, or a unique prefix of it (or ROOT/NAME for a subtask).") var id: String?

        func run() async throws {
            try await ChangeCommand(action: .pause, options: options, change: change, filters: filters).run(id: id)
        }
    }
}
