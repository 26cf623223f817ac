import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Resumes a paused task, or the paused roots the filters choose.
    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Resume a paused task (one by id, or many by filters).",
            discussion: """
                Without an id, the filters choose the roots (by default the paused ones). On a terminal it asks \
                before it changes them (--yes to skip the question, required without a terminal); --dry-run shows \
                what it would do. Each refused task gets a line on stderr and the last line counts what changed; the \
                status is 1 when one was refused.

                Examples:
                  progressctl resume 8k3fq2xa
                  progressctl resume --kind import --yes
                """)
        @OptionGroup var options: GlobalOptions
        @OptionGroup var filters: TaskFilterOptions
        @OptionGroup var change: ChangeOptions
        @Argument(help: "The task id, or a unique prefix of it (or ROOT/NAME for a subtask).") var id: String?

        func run() async throws {
            try await ChangeCommand(action: .resume, options: options, change: change, filters: filters).run(id: id)
        }
    }
}
