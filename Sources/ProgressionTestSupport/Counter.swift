import Synchronization

/// A counter shared with task code.
///
/// ```swift
/// let running = Counter()
/// Task { running.increment(); defer { running.decrement() }; await work() }
/// try await poll("the work to start") { running.count == 1 }
/// ```
public final class Counter: Sendable {
    private let value = Mutex(0)

    /// A counter at 0.
    public init() {}

    /// Adds one.
    public func increment() { value.withLock { $0 += 1 } }

    /// Takes one away.
    public func decrement() { value.withLock { $0 -= 1 } }

    /// The count now.
    public var count: Int { value.withLock { $0 } }
}
