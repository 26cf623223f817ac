#if PostgreSQL
import Foundation
import Logging
import Progression
import PostgresNIO
import Synchronization

/// The store's change counter: `LISTEN` on a dedicated connection counts the schema's notifications (control
/// requests, lifecycle changes, batches of every executor), and a clock tick every poll interval makes the counter
/// move even when a notification was lost (the listening connection broke and is being opened again), so that a
/// poller looks again at least that often.
final class PostgresChangeListener: Sendable {
    private struct State {
        var notifications: Int64 = 0
        var listening = false
        /// The store is closing: a broken connection is expected, not worth a warning.
        var closing = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())
    private let started = ContinuousClock.now
    private let pollInterval: Duration
    /// Posted on each notification (the stores of the schema in this process wake their waiters).
    private let commits: Broadcast?

    init(pollInterval: Duration, commits: Broadcast? = nil) {
        self.pollInterval = max(pollInterval, .milliseconds(10))
        self.commits = commits
    }

    /// A number that moves on every notification and every poll interval.
    var counter: Int64 {
        let ticks = (ContinuousClock.now - started) / pollInterval
        return state.withLock { $0.notifications } &+ Int64(ticks)
    }

    /// Whether the listening connection is up.
    var isListening: Bool { state.withLock { $0.listening } }

    /// Keeps a connection listening on `channel` until cancelled, opening it again (with backoff) when it breaks.
    func listen(client: PostgresClient, channel: String, logger: Logger) async {
        var failures = 0
        while !Task.isCancelled {
            do {
                try await client.withPooledConnection { connection in
                    try await connection.listen(on: channel) { notifications in
                        failures = 0
                        self.setListening(true)
                        // Whatever happened while no one listened is looked at once more.
                        self.note()
                        for try await _ in notifications { self.note() }
                    }
                }
            } catch {
                if !Task.isCancelled, failures == 0, !state.withLock({ $0.closing }) {
                    logger.warning(
                        "not listening for changes; polling every \(pollInterval) until it works again",
                        metadata: ["error": "\(String(reflecting: error))"])
                }
            }
            setListening(false)
            failures += 1
            // At most 5 s between tries; the poll tick covers the gap.
            let wait = Duration.milliseconds(min(5_000, 100 << min(failures, 6)))
            do { try await Task.sleep(for: wait) } catch { break }
        }
        setListening(false)
        resumeWaiters()
    }

    /// Notes that the store is closing (before its connections close).
    func close() {
        state.withLock { $0.closing = true }
    }

    /// Waits until the listening connection is up, at most `timeout`.
    func waitUntilListening(timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let now = self.state.withLock { state -> Bool in
                        if state.listening { return true }
                        state.waiters.append(continuation)
                        return false
                    }
                    if now { continuation.resume() }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                self.resumeWaiters()
            }
            await group.next()
            group.cancelAll()
            self.resumeWaiters()
        }
    }

    private func note() {
        state.withLock { $0.notifications &+= 1 }
        commits?.post()
    }

    private func setListening(_ listening: Bool) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.listening = listening
            guard listening else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func resumeWaiters() {
        let waiters = state.withLock { state in
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
#endif
