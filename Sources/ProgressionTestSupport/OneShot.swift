import Synchronization

/// Resumes a continuation once, whichever of several racers comes first; the later ones are ignored.
///
/// ```swift
/// let once = OneShot(continuation)
/// Task { once.finish(.success(await work())) }
/// Task { try? await Task.sleep(for: .seconds(5)); once.finish(.failure(TestFailure("too late"))) }
/// ```
public final class OneShot<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T, any Error>?>

    /// A one-shot for `continuation`, which it resumes at the first ``finish(_:)``.
    public init(_ continuation: CheckedContinuation<T, any Error>) {
        self.continuation = Mutex(continuation)
    }

    /// Resumes the continuation with `result` unless an earlier call did.
    public func finish(_ result: Result<T, any Error>) {
        let continuation = continuation.withLock { continuation in
            defer { continuation = nil }
            return continuation
        }
        continuation?.resume(with: result)
    }
}
