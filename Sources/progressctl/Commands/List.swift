import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Lists root tasks, newest first, with the total that match.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List tasks (roots), newest first, and how many match.",
            discussion: """
                The last line counts the tasks shown and those that match (`50 of 5,004 tasks`), up to 10,000 \
                (`50 of 10,000+ tasks`); --limit 0 prints only that line, with the exact count. --json prints the \
                tasks as an array.

                Examples:
                  progressctl list
                  progressctl list --status failed --status cancelled --kind import
                  progressctl list --status running,paused --since 30m --limit 10
                  progressctl list --since 2026-01-31 --until 2026-02-01 --name nightly --json
                  progressctl list --input '"file":"a.csv"'
                  progressctl list --sort progress --reverse
                  progressctl list --status failed --limit 0
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var filters: TaskFilterOptions

        @Option(name: .long, help: ArgumentHelp("The order: created (newest first), updated (most recently changed first) or progress (furthest along first).", valueName: "order"))
        var sort: Order = .created

        /// `--sort`.
        enum Order: String, CaseIterable, ExpressibleByArgument {
            case created, updated, progress

            var sort: TaskQuery.Sort {
                switch self {
                case .created: .created
                case .updated: .updated
                case .progress: .progress
                }
            }
        }

        @Flag(name: .long, help: "Turn the order around (oldest, least recently changed or least advanced first).")
        var reverse = false

        @Option(name: .long, parsing: .unconditional, help: "At most this many tasks (0: only count them).")
        var limit: Int = 50

        @Option(name: .long, parsing: .unconditional, help: "Skip this many tasks first.")
        var offset: Int = 0

        func run() async throws {
            var query = try filters.query()
            guard limit >= 0 else { throw CLIError.usage("--limit must be 0 or more") }
            guard offset >= 0 else { throw CLIError.usage("--offset must be 0 or more") }
            query.sort = sort.sort
            query.reverse = reverse
            query.limit = limit
            query.offset = offset
            let store = try options.openStore(readOnly: true)
            let roots = limit == 0 ? [] : try await store.checked { [query] in try await $0.roots(query) }
            // The failed steps of the completed ones (a partial failure), one indexed count each.
            let completed = roots.filter { $0.status == .completed }.map(\.id)
            let failed = try await store.checked { try await $0.failedSteps(ofRoots: completed) }
            if options.json {
                try JSONOutput.print(roots.map { TaskJSON($0, failedSteps: failed[$0.id] ?? 0) })
                return
            }
            // Beside a page of tasks, a count up to a bound: counting a million roots would take longer than the
            // listing. Alone (--limit 0), the exact count.
            let bound = limit == 0 ? nil : Self.countBound
            let total = try await store.checked { [query] in try await $0.countRoots(query, upTo: bound) }
            if !roots.isEmpty {
                let rates = ProgressRates()
                let rows = roots.map { task in
                    [
                        task.id.escapedForTerminal, task.name.escapedForTerminal, task.kind?.escapedForTerminal ?? "-",
                        Format.state(task, failedSteps: failed[task.id] ?? 0), Format.bar(task.progress, width: 10),
                        Format.rate(rates.rate(of: task)), Format.timeLeft(rates.timeLeft(of: task)),
                        (Format.wait(task) ?? task.step?.escapedForTerminal) ?? "-", "\(task.attempt)",
                        Format.time(task.updatedAt),
                    ]
                }
                for line in Format.table(
                    header: ["ID", "NAME", "KIND", "STATUS", "PROGRESS", "RATE", "LEFT", "STEP", "ATTEMPT", "UPDATED"],
                    rows: rows)
                {
                    Terminal.output(line)
                }
            }
            let atLeast = bound.map { total >= $0 } ?? false
            Terminal.output(Terminal.paint(Self.footer(shown: roots.count, total: total, atLeast: atLeast, offset: offset), .dim))
        }

        /// The most tasks the footer counts beside a page of them.
        static let countBound = 10_000

        /// `50 of 5,004 tasks`; `50 of 10,000+ tasks` when the count reached its bound; `50 of 5,004 tasks, from
        /// number 101` after an offset.
        static func footer(shown: Int, total: Int, atLeast: Bool, offset: Int) -> String {
            var footer = "\(Format.count(shown)) of " + (atLeast ? "\(Format.count(total))+ tasks" : Format.tasks(total))
            if offset > 0, shown > 0 { footer += ", from number \(Format.count(offset + 1))" }
            return footer
        }
    }
}
