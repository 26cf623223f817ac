import Foundation
import Progression

/// Counts of roots by status and kind, the failure rate and the database size: `progressctl stats --json`, and the
/// console's overview.
package struct StatsJSON: Encodable, Sendable {
    package var byStatus: [String: Int]
    package var byKind: [String: Int]
    package var total: Int
    @Null package var oldestPendingCreatedAt: Date?
    /// Failed ÷ finished (completed + failed + cancelled) roots; `null` when none finished.
    @Null package var failureRate: Double?
    package var events: Int
    package var databaseBytes: Int64
    /// Completed roots with failed subtasks (a partial failure).
    package var completedWithFailedSteps: Int
    /// Pending roots by kind (`(closure)` for closure tasks).
    package var pendingByKind: [String: Int]

    /// The report of a store's statistics: every status counted (0 when none), closure tasks as the kind
    /// `(closure)`.
    package init(_ statistics: TaskStoreStatistics) {
        var byStatus = statistics.rootsByStatus
        for status in TaskStatus.allCases where byStatus[status.rawValue] == nil { byStatus[status.rawValue] = 0 }
        let finished = TaskStatus.allCases.filter(\.isFinished).reduce(0) { $0 + (byStatus[$1.rawValue] ?? 0) }
        self.byStatus = byStatus
        byKind = statistics.rootsByKind.reduce(into: [:]) { $0[$1.key.isEmpty ? "(closure)" : $1.key] = $1.value }
        total = byStatus.values.reduce(0, +)
        oldestPendingCreatedAt = statistics.oldestPendingCreatedAt
        failureRate = finished == 0 ? nil : Double(byStatus["failed"] ?? 0) / Double(finished)
        events = statistics.events
        databaseBytes = statistics.databaseBytes
        completedWithFailedSteps = statistics.completedWithFailedSteps
        pendingByKind = statistics.pendingByKind.reduce(into: [:]) { $0[$1.key.isEmpty ? "(closure)" : $1.key] = $1.value }
    }
}
