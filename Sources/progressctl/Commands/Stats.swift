import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Counts by status and kind, the oldest pending task, the failure rate and the database size.
    struct Stats: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show counts of tasks by status and kind, the failure rate and the database size.",
            discussion: """
                The failure rate is failed ÷ finished (completed + failed + cancelled) roots.

                Examples:
                  progressctl stats
                  progressctl stats --json
                """)

        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let store = try options.openStore(readOnly: true)
            let statistics = try await store.checked { try await $0.statistics() }
            let report = StatsJSON(statistics)
            if options.json {
                try JSONOutput.print(report)
                return
            }
            Terminal.output("tasks: \(report.total)")
            for status in TaskStatus.allCases {
                var line = "  \(Format.status(status).rightPadded(to: 10)) \(report.byStatus[status.rawValue] ?? 0)"
                if status == .completed, report.completedWithFailedSteps > 0 {
                    line += Terminal.paint(
                        " (\(Format.count(report.completedWithFailedSteps)) with failed steps)", .yellow)
                }
                Terminal.output(line)
            }
            if !report.byKind.isEmpty {
                Terminal.output("by kind:")
                let width = report.byKind.keys.map(\.escapedForTerminal.visibleWidth).max() ?? 0
                for (kind, count) in report.byKind.sorted(by: { $0.key < $1.key }) {
                    Terminal.output("  \(kind.escapedForTerminal.rightPadded(to: width)) \(count)")
                }
            }
            Terminal.output("oldest pending: \(report.oldestPendingCreatedAt.map { Format.time($0) } ?? "none")")
            Terminal.output("failure rate: \(report.failureRate.map { String(format: "%.1f%%", $0 * 100) } ?? "- (nothing finished)")")
            Terminal.output("events: \(report.events)")
            Terminal.output("database size: \(Format.bytes(report.databaseBytes))")
        }
    }
}
