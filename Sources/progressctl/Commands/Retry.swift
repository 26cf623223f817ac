import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Runs failed or cancelled tasks again.
    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a failed or cancelled task again, its options allowing retries (one by id, or many by filters).",
            discussion: """
                With no running executor the task is marked pending with the next attempt number, and the next \
                executor that registered its kind runs it. A closure task can be retried only through the executor \
                that holds it.

                Without an id, the filters choose the roots (by default the failed and cancelled ones; --all-failed \
                is --status failed, and goes ahead without asking). On a terminal it asks before it changes them (--yes to skip the question, \
                required without a terminal); --dry-run shows what it would do. Each refused task gets a line on \
                stderr and the last line counts what changed; the status is 1 when one was refused.

                Examples:
                  progressctl retry 8k3fq2xa
                  progressctl retry --all-failed --kind import --dry-run
                  progressctl retry --status failed,cancelled --since 1d --yes
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var filters: TaskFilterOptions
        @OptionGroup var change: ChangeOptions

        @Argument(help: "The task id, or a unique prefix of it.")
        var id: String?

        @Flag(name: .customLong("all-failed"), help: "Retry the failed roots without asking (--status failed --yes).")
        var allFailed = false

        func validate() throws {
            if allFailed, id != nil { throw ValidationError("give a task id or --all-failed (not both)") }
            if !allFailed, id == nil, filters.isEmpty {
                throw ValidationError("give a task id, --all-failed or filters (--status, --kind, --since, --until, --name, --input)")
            }
            if allFailed, !filters.status.isEmpty { throw ValidationError("--all-failed is --status failed: give one of them") }
        }

        func run() async throws {
            var filters = filters
            var change = change
            if allFailed {
                filters.status = [TaskStatus.failed.rawValue]
                // As before filters came: --all-failed names what it retries, and goes ahead without asking.
                change.yes = true
            }
            try await ChangeCommand(action: .retry, options: options, change: change, filters: filters).run(id: id)
        }
    }
}
