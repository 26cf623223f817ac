import Foundation

/// When a failed task runs again by itself: how many attempts in all, how long to wait between them, and which
/// errors are final.
///
/// The wait before attempt *n + 1* is `initialBackoff × multiplier^(n − 1)`, capped at `maxBackoff`, then spread by
/// ±`jitter` (a fraction) so that many tasks failing together do not retry together.
///
/// ```swift
/// let options = TaskOptions.default.retryPolicy(.exponential(maxAttempts: 5, initialBackoff: .seconds(1)))
/// ```
public struct RetryPolicy: Sendable, Hashable, Codable {
    /// Attempts in all, the first included: 1 never retries automatically.
    public var maxAttempts: Int
    /// The wait after the first failed attempt.
    public var initialBackoff: Duration
    /// How much longer each wait is than the one before (1 or more).
    public var multiplier: Double
    /// The longest wait.
    public var maxBackoff: Duration
    /// A fraction in 0...1: each delay is multiplied by a random factor in `1 ± jitter`.
    public var jitter: Double
    /// Type names (`String(reflecting: type(of: error))`, e.g. `"MyApp.ValidationError"`) of errors that fail the task
    /// at once. Errors conforming to ``NonRetryableError`` never retry either.
    public var nonRetryableErrorTypes: Set<String>

    /// A policy; out-of-range values are brought into range (at least one attempt, a multiplier of at least 1, a
    /// jitter in 0...1).
    public init(
        maxAttempts: Int, initialBackoff: Duration = .seconds(1), multiplier: Double = 2,
        maxBackoff: Duration = .seconds(300), jitter: Double = 0.2, nonRetryableErrorTypes: Set<String> = []
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.initialBackoff = max(.zero, initialBackoff)
        self.multiplier = multiplier.isFinite ? max(1, multiplier) : 1
        self.maxBackoff = max(.zero, maxBackoff)
        self.jitter = jitter.isFinite ? min(1, max(0, jitter)) : 0
        self.nonRetryableErrorTypes = nonRetryableErrorTypes
    }

    /// Exponential backoff with jitter.
    public static func exponential(
        maxAttempts: Int, initialBackoff: Duration = .seconds(1), multiplier: Double = 2,
        maxBackoff: Duration = .seconds(300), jitter: Double = 0.2
    ) -> RetryPolicy {
        RetryPolicy(
            maxAttempts: maxAttempts, initialBackoff: initialBackoff, multiplier: multiplier, maxBackoff: maxBackoff,
            jitter: jitter)
    }

    /// No automatic retry.
    public static let none = RetryPolicy(maxAttempts: 1)

    /// Returns a copy in which errors of type `type` are not retried.
    public func notRetrying(_ type: any Error.Type) -> RetryPolicy {
        var copy = self
        copy.nonRetryableErrorTypes.insert(String(reflecting: type))
        return copy
    }

    /// The wait after failed attempt `attempt` (1-based) before the next one, given a random number in 0..<1.
    public func delay(afterAttempt attempt: Int, random: Double) -> Duration {
        let base = initialBackoff.seconds * pow(multiplier, Double(max(0, attempt - 1)))
        let capped = min(base, maxBackoff.seconds)
        let factor = 1 + jitter * (2 * random - 1)
        return .milliseconds(Int64((capped * factor * 1000).rounded()))
    }

    /// Whether `error`, thrown by attempt `attempt`, leads to another attempt.
    public func allowsRetry(after error: any Error, attempt: Int) -> Bool {
        guard attempt < maxAttempts else { return false }
        if error is any NonRetryableError { return false }
        return !nonRetryableErrorTypes.contains(String(reflecting: type(of: error)))
    }
}

/// An error that no automatic retry can mend (bad input, a missing file): a task failing with it fails at once.
public protocol NonRetryableError: Error {}

extension Duration {
    /// The duration in seconds, as a `Double`.
    package var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
