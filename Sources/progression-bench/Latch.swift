import Synchronization

/// A countdown: `arrive()` counts down, `wait()` suspends until the count reaches zero.
///
/// Used as a start line (count 1: the benchmark opens it once every task stands ready) and as a finish line (count
/// n: every task arrives when its loop ends), so that a timed region holds only the work it measures.
///
/// ```swift
/// let ready = Latch(count: 100)
/// // in each task: ready.arrive()
/// await ready.wait()
/// ```
final class Latch: Sendable {
    private struct State {
        var remaining: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    /// A latch that opens after `count` arrivals.
    init(count: Int) {
        state = Mutex(State(remaining: count))
    }

    /// Counts one arrival; the last one resumes every waiter.
    func arrive() {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.remaining -= 1
            guard state.remaining == 0 else { return [] }
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in ready { waiter.resume() }
    }

    /// Returns once the count has reached zero.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let open = state.withLock { state -> Bool in
                if state.remaining <= 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if open { continuation.resume() }
        }
    }
}
