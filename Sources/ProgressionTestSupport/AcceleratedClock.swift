import Foundation
import Progression

/// A clock that runs `speed` times faster than real time from a shared origin, so that processes started at different
/// moments agree on the simulated time: a day of a five-minute schedule passes in two minutes at 720×.
///
/// Every process that is given the same `realOrigin` (a real instant, in seconds since 1970), `simulatedOrigin` and
/// `speed` reads the same simulated wall time (``wallClockNow``), whenever it started.
///
/// ```swift
/// let clock = AcceleratedClock(realOrigin: start, simulatedOrigin: midnight, speed: 720)
/// try await clock.sleep(for: .seconds(300))   // five simulated minutes: about 0.42 real seconds
/// ```
public struct AcceleratedClock: Clock, WallClockProviding, Sendable {
    /// A point on the clock: simulated time since the real origin.
    public struct Instant: InstantProtocol {
        /// Simulated time since the clock's real origin.
        public var offset: Duration

        /// The instant at `offset` from the origin.
        public init(offset: Duration) { self.offset = offset }
        /// The instant `duration` later.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        /// The time from this instant to `other`.
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        /// Whether `left` comes before `right`.
        public static func < (left: Instant, right: Instant) -> Bool { left.offset < right.offset }
    }

    /// The real time (seconds since 1970) at which the simulated time is ``simulatedOrigin``.
    public let realOrigin: TimeInterval
    /// The simulated wall time at the real origin.
    public let simulatedOrigin: Date
    /// Simulated seconds per real second.
    public let speed: Double

    /// A clock of `speed` simulated seconds per real second, at `simulatedOrigin` when the real time was `realOrigin`.
    public init(realOrigin: TimeInterval, simulatedOrigin: Date, speed: Double) {
        self.realOrigin = realOrigin
        self.simulatedOrigin = simulatedOrigin
        self.speed = max(1, speed)
    }

    private var elapsed: Double { (Date().timeIntervalSince1970 - realOrigin) * speed }

    /// The simulated time since the origin.
    public var now: Instant { Instant(offset: .nanoseconds(Int64(elapsed * 1e9))) }

    /// One nanosecond.
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// The simulated wall-clock time now.
    public var wallClockNow: Date { simulatedOrigin.addingTimeInterval(elapsed) }

    /// Sleeps until the simulated `deadline`: a real sleep of the simulated wait divided by the speed.
    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let wait = deadline.offset - now.offset
        guard wait > .zero else {
            try Task.checkCancellation()
            return
        }
        let seconds = (Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18) / speed
        try await Task.sleep(for: .nanoseconds(Int64(seconds * 1e9)))
    }
}
