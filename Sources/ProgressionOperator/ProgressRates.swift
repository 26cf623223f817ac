import Foundation
import Progression

/// The rate and time left of each watched root: the one place that says where they come from — the rate the executor
/// stores with each running task (a smoothed fraction of the task per second, see `TaskRecord.rate`), and the time
/// left it implies.
package struct ProgressRates: Sendable {
    package init() {}

    /// `root`'s progress per second (a fraction of the whole), or `nil` when unknown or not running. A job that waits
    /// for its child jobs moves with them: its rate is theirs.
    package func rate(of root: TaskRecord) -> Double? {
        root.status == .running || Self.waitsForChildren(root) ? root.rate : nil
    }

    /// Whether `root` waits for its child jobs (its progress and rate move as they report).
    package static func waitsForChildren(_ root: TaskRecord) -> Bool {
        guard root.status == .pending, case .children? = root.wait else { return false }
        return true
    }

    /// Seconds until `root` is done at its rate, or `nil` when unknown (not running, no rate, or no progress).
    package func timeLeft(of root: TaskRecord) -> TimeInterval? {
        root.estimatedTimeRemaining.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
    }
}
