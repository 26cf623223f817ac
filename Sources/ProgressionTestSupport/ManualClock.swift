import Foundation
import Progression
import Synchronization

/// A clock that moves only when a test advances it: sleepers wake when their deadline is reached.
///
/// ```swift
/// let clock = ManualClock()
/// let sleeper = Task { try await clock.sleep(for: .seconds(5)) }
/// clock.advance(by: .seconds(5))
/// try await sleeper.value
/// ```
public final class ManualClock: Clock, WallClockProviding, Sendable {
    /// A point on the clock: how far it has been advanced from its start.
    public struct Instant: InstantProtocol {
        /// The time since the clock's start.
        public var offset: Duration

        /// The instant at `offset` from the clock's start.
        public init(offset: Duration) { self.offset = offset }

        /// The instant `duration` later.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }

        /// The time from this instant to `other`.
        public func duration(to other: Instant) -> Duration { other.offset - offset }

        /// Whether `left` comes before `right`.
        public static func < (left: Instant, right: Instant) -> Bool { left.offset < right.offset }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private let state = Mutex<(now: Instant, sleepers: [Int: Sleeper], next: Int)>((Instant(offset: .zero), [:], 0))

    /// The wall-clock time of the clock's start.
    public let origin: Date

    /// A clock at its start, with no sleepers; its wall time starts at `origin`.
    public init(origin: Date = Date(timeIntervalSince1970: Double(Int64(Date().timeIntervalSince1970 * 1000)) / 1000)) {
        self.origin = origin
    }

    /// The wall-clock time now: the origin plus how far the clock was advanced.
    public var wallClockNow: Date {
        let offset = now.offset
        return origin.addingTimeInterval(Double(offset.components.seconds) + Double(offset.components.attoseconds) / 1e18)
    }

    /// The clock's time now.
    public var now: Instant { state.withLock { $0.now } }

    /// One nanosecond.
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// Sleeps until the clock has been advanced to `deadline`.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let token = state.withLock { state -> Int in
            state.next += 1
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = state.withLock { state -> Result<Void, any Error>? in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[token] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: token) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock on and wakes the sleepers whose deadline has come.
    public func advance(by duration: Duration) {
        let due = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for key in due.keys { state.sleepers[key] = nil }
            return due.values.map(\.continuation)
        }
        for continuation in due { continuation.resume() }
    }
}
