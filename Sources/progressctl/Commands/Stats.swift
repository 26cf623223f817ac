import ArgumentParser
import Foundation
import Progression

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

        /// `stats --json`.
        struct StatsJSON: Encodable {
            var byStatus: [String: Int]
            var byKind: [String: Int]
            var total: Int
            @Null var oldestPendingCreatedAt: Date?
            @Null var failureRate: Double?
            var events: Int
            var databaseBytes: Int64
        }

        func run() async throws {
            let store = try options.openStore(readOnly: true)
            let statistics = try await store.checked { try await $0.statistics() }
            var byStatus = statistics.rootsByStatus
            for status in TaskStatus.allCases where byStatus[status.rawValue] == nil { byStatus[status.rawValue] = 0 }
            let finished = TaskStatus.allCases.filter(\.isFinished).reduce(0) { $0 + (byStatus[$1.rawValue] ?? 0) }
            let failureRate = finished == 0 ? nil : Double(byStatus["failed"] ?? 0) / Double(finished)
            let report = StatsJSON(
                byStatus: byStatus, byKind: statistics.rootsByKind.reduce(into: [:]) { $0[$1.key.isEmpty ? "(closure)" : $1.key] = $1.value },
                total: byStatus.values.reduce(0, +), oldestPendingCreatedAt: statistics.oldestPendingCreatedAt,
                failureRate: failureRate, events: statistics.events, databaseBytes: statistics.databaseBytes)
            if options.json {
                try JSONOutput.print(report)
                return
            }
            Terminal.output("tasks: \(report.total)")
            for status in TaskStatus.allCases {
                Terminal.output("  \(Format.status(status).rightPadded(to: 10)) \(report.byStatus[status.rawValue] ?? 0)")
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
