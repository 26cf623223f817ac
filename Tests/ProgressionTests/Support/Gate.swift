import Foundation
import Progression
import Synchronization
import Testing

/// A one-shot signal: tasks wait until the test opens it.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
    }
}

/// A counter shared with task code.
final class Counter: Sendable {
    private let value = Mutex(0)
    func increment() { value.withLock { $0 += 1 } }
    func decrement() { value.withLock { $0 -= 1 } }
    var count: Int { value.withLock { $0 } }
}

/// Values recorded by task code.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Polls `condition` until it holds, failing after `timeout`. Not a sleep used as synchronisation: it waits for a state.
func waitUntil(
    _ what: String, timeout: Duration = .seconds(20), _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TimedOut(what: what) }
        try await Task.sleep(for: .milliseconds(2))
    }
}

extension TaskExecutor {
    /// Waits until a task (root or subtask) has the status.
    nonisolated func waitForStatus(_ id: String, _ status: TaskStatus, timeout: Duration = .seconds(20)) async throws {
        try await waitUntil("\(id) to be \(status)", timeout: timeout) { self.snapshot(of: id)?.status == status }
    }

    /// Waits until a root's code has ended and returns its snapshot.
    nonisolated func finished(_ id: String) async throws -> TaskSnapshot {
        try await waitUntil("\(id) to finish") { self.snapshot(of: id)?.isFinished ?? false }
        return try #require(await snapshot(of: id))
    }
}

/// An executor for one test: finished tasks stay visible.
func makeExecutor(_ kind: StoreKind, in directory: TemporaryDirectory) throws -> TaskExecutor {
    var configuration = TaskExecutor.Configuration()
    configuration.completedTaskVisibility = .seconds(600)
    configuration.publishInterval = .milliseconds(5)
    configuration.writeWindow = .milliseconds(5)
    return TaskExecutor(store: try kind.make(in: directory), configuration: configuration)
}

/// Runs `body`, failing with ``TimedOut`` after `limit` even when `body` is stuck on something that ignores
/// cancellation (the race is between two unstructured tasks, so the caller never waits for a stuck one): a hang
/// becomes a named test failure instead of a test run that never ends.
func within<T: Sendable>(
    _ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let work = Task<Result<T, any Error>, Never> { await Result(catching: body) }
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let once = OneShot(continuation)
        Task { once.finish(await work.value) }
        Task {
            try? await Task.sleep(for: limit)
            work.cancel()
            once.finish(.failure(TimedOut(what: what)))
        }
    }
}

/// Resumes a continuation once, whichever of several racers comes first.
final class OneShot<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T, any Error>?>

    init(_ continuation: CheckedContinuation<T, any Error>) {
        self.continuation = Mutex(continuation)
    }

    func finish(_ result: Result<T, any Error>) {
        let continuation = continuation.withLock { continuation in
            defer { continuation = nil }
            return continuation
        }
        continuation?.resume(with: result)
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}

extension TaskExecutor {
    /// Waits (at most `timeout`) for a root's current run to end.
    nonisolated func runEnded(_ id: String, timeout: Duration = .seconds(60)) async throws {
        try await within(timeout, "the run of \(id) to end") { await self.waitForTask(id) }
    }
}
