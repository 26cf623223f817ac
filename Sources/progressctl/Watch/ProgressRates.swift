import Foundation
import Progression

/// A smoothed rate of progress: an exponential moving average of Δprogress/Δt over successive observations of one
/// task, weighted by time with a time constant of ``timeConstant`` seconds, so observations may come at any pace.
///
/// The average starts afresh whenever the task is not running or its progress goes back (a retry), and is not
/// given until it covers ``warmUp`` seconds; until it covers more than a time constant it is corrected for the
/// zero it started from (as Adam's bias correction does).
///
/// ```swift
/// var rate = SmoothedRate()
/// rate.observe(progress: 0.10, running: true, at: start)
/// rate.observe(progress: 0.20, running: true, at: start + 5)
/// rate.perSecond    // ≈ 0.02: 2 % per second
/// ```
struct SmoothedRate: Sendable {
    /// Seconds over which old observations fade (to 1/e).
    static let timeConstant: TimeInterval = 10
    /// Seconds of observations needed before a rate is given.
    static let warmUp: TimeInterval = 1

    private var last: (at: Date, progress: Double)?
    private var average: Double = 0
    private var covered: TimeInterval = 0

    /// Takes the task's progress at `date` into the average, or starts afresh when it is not running, its progress
    /// is unknown or has gone back.
    mutating func observe(progress: Double?, running: Bool, at date: Date) {
        guard running, let progress, progress.isFinite else {
            self = SmoothedRate()
            return
        }
        guard let last, progress >= last.progress else {
            self = SmoothedRate()
            self.last = (date, progress)
            return
        }
        let elapsed = date.timeIntervalSince(last.at)
        guard elapsed > 0 else { return }
        let sample = (progress - last.progress) / elapsed
        let weight = 1 - exp(-elapsed / Self.timeConstant)
        average += weight * (sample - average)
        covered += elapsed
        self.last = (date, progress)
    }

    /// Progress per second (a fraction of the whole), or `nil` before ``warmUp`` seconds of observations.
    var perSecond: Double? {
        guard covered >= Self.warmUp else { return nil }
        return max(0, average / (1 - exp(-covered / Self.timeConstant)))
    }
}

/// The rate and time left of each watched root: the one place that says where they come from.
///
/// Today they are estimated here from successive polls of each root's progress (``SmoothedRate``). When the store
/// keeps a rate per root, ``rate(of:)`` returns that field instead and ``observe(_:at:)`` has nothing left to do.
struct ProgressRates: Sendable {
    private var estimates: [String: SmoothedRate] = [:]

    /// Takes the roots' progress at `date` in; forgets roots that are not among them.
    mutating func observe(_ roots: [TaskRecord], at date: Date) {
        var next: [String: SmoothedRate] = [:]
        for root in roots {
            var estimate = estimates[root.id] ?? SmoothedRate()
            estimate.observe(progress: root.progress, running: root.status == .running, at: date)
            next[root.id] = estimate
        }
        estimates = next
    }

    /// `root`'s progress per second (a fraction of the whole), or `nil` when unknown.
    func rate(of root: TaskRecord) -> Double? {
        estimates[root.id]?.perSecond
    }

    /// Seconds until `root` is done at its rate, or `nil` when unknown (not running, no rate, or no progress).
    func timeLeft(of root: TaskRecord) -> TimeInterval? {
        guard root.status == .running, let progress = root.progress, let rate = rate(of: root), rate > 0 else {
            return nil
        }
        return max(0, 1 - progress) / rate
    }
}
