import Foundation

/// The executor's time: a monotonic clock for waits (timeouts, backoff, intervals, paused time) and the wall-clock
/// time stored in records. Both come from ``TaskExecutor/Configuration/clock``, so that a test with a clock of its own
/// controls timeouts, retries, heartbeats and rates; with the default `ContinuousClock` the wall time is the system's.
struct TaskClock: Sendable {
    /// Time since the clock was made.
    let now: @Sendable () -> Duration
    /// Sleeps for a duration on the clock (throws when cancelled).
    let sleep: @Sendable (Duration) async throws -> Void
    /// Sleeps until a time of ``now`` (throws when cancelled): a deadline computed before the sleep begins stays the
    /// same however late the sleep begins.
    let sleepUntil: @Sendable (Duration) async throws -> Void
    /// The wall-clock time of a clock of the caller's; `nil` for the system's (read directly: a report reads it).
    private let customDate: (@Sendable () -> Date)?

    init(_ clock: any Clock<Duration>) {
        self.init(opening: clock)
    }

    private init<C: Clock<Duration>>(opening clock: C) {
        let start = clock.now
        now = { start.duration(to: clock.now) }
        sleep = { duration in try await clock.sleep(until: clock.now.advanced(by: duration), tolerance: nil) }
        sleepUntil = { deadline in try await clock.sleep(until: start.advanced(by: deadline), tolerance: nil) }
        if clock is ContinuousClock || clock is SuspendingClock {
            customDate = nil
        } else if let wall = clock as? any WallClockProviding {
            customDate = { wall.wallClockNow.roundedToMilliseconds }
        } else {
            let origin = Date()
            customDate = { origin.addingTimeInterval(start.duration(to: clock.now).seconds).roundedToMilliseconds }
        }
    }

    /// The wall-clock time, to the millisecond.
    @inline(__always)
    func date() -> Date {
        if let customDate { return customDate() }
        return Date.currentMillisecond()
    }
}

/// A clock of the caller's that also tells the wall-clock time (``TaskExecutor/Configuration/clock``): executors and
/// clients in one process (or several) that share it agree on the time to the millisecond. Without it, a custom
/// clock's wall time is the system's time when the executor was made plus the clock's elapsed time.
public protocol WallClockProviding: Sendable {
    /// The wall-clock time now, on this clock.
    var wallClockNow: Date { get }
}
