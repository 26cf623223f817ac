import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Runs a job that waits for a time now, or the roots the filters choose.
    struct RunNow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run-now",
            abstract: "Run a job that waits for a time (scheduled, retrying or sleeping) as soon as a worker has a free slot.",
            discussion: """
                A scheduled job (submitted with --at or --delay, or by a schedule) runs before its time; a job \
                waiting for its next automatic attempt runs it now; a job in a durable sleep wakes. A paused job \
                stays paused (its wait is cleared: it runs once resumed). A job that waits for no time is refused.

                Without an id, the filters choose the roots (by default the pending and paused ones). On a terminal \
                it asks before it changes them (--yes to skip the question); --dry-run shows what it would do.

                Examples:
                  progressctl run-now 8k3fq2xa
                  progressctl run-now --kind report --dry-run
                """)
        @OptionGroup var options: GlobalOptions
        @OptionGroup var filters: TaskFilterOptions
        @OptionGroup var change: ChangeOptions
        @Argument(help: "The job's id, or a unique prefix of it.") var id: String?

        func run() async throws {
            try await ChangeCommand(action: .runNow, options: options, change: change, filters: filters).run(id: id)
        }
    }
}
