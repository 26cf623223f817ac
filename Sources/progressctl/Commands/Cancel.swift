import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Cancels a task, or the roots the filters choose.
    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cancel a pending, paused or running task whose options allow it (one by id, or many by filters).",
            discussion: """
                Cancelling a task cancels everything below it.

                Without an id, the filters choose the roots (by default the pending, running and paused ones). On a \
                terminal it asks before it changes them (--yes to skip the question, required without a terminal); \
                --dry-run shows what it would do. Each refused task gets a line on stderr and the last line counts \
                what changed, e.g. `cancelled 12 of 14 tasks (2 refused: 8k3fq2xa, 9a7b1c2d)`; the status is 1 \
                when one was refused.

                Examples:
                  progressctl cancel 8k3fq2xa
                  progressctl cancel --kind import --since 1h --dry-run
                  progressctl cancel --status pending --until 2d --name nightly --yes
                """)
        @OptionGroup var options: GlobalOptions
        @OptionGroup var filters: TaskFilterOptions
        @OptionGroup var change: ChangeOptions
        @Argument(help: "The task id, or a unique prefix of it (or ROOT/NAME for a subtask).") var id: String?

        func run() async throws {
            try await ChangeCommand(action: .cancel, options: options, change: change, filters: filters).run(id: id)
        }
    }
}
