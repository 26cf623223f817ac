#if Console
import Foundation
import Logging
import NIOCore
import Progression
import ProgressionOperator
import ServiceLifecycle
import Synchronization

/// The live updates of every open page, from one poller of the store's change feed however many pages are open.
///
/// A page subscribes to a *view* — the list with its filters, a job's tree, the overview — named by a key; pages
/// showing the same view share it. The poller looks at the store's change counter every ``pollInterval`` (SQLite's
/// `data_version` on the console's own connection, which moves when another connection commits; PostgreSQL's
/// `LISTEN/NOTIFY` counter, with its poll as a fallback). When it moved, each view with subscribers is read again
/// once its interval has passed since it was last sent (so a page gets at most four updates a second at the default
/// 250 ms) — and at least twenty times the time its last reading took —, and sent to its subscribers only when what
/// it shows changed.
package final class LiveHub: Sendable {
    /// What a page's stream carries: an update (a Server-Sent Event), or a keep-alive comment. Its bytes are made once
    /// for every page of the view.
    package struct Message: Sendable {
        package var bytes: ByteBuffer
        package var isUpdate: Bool
    }

    private struct View {
        var subscribers: [Int: AsyncStream<Message>.Continuation] = [:]
        var last: String?
        var dirty = true
        var nextAllowed: ContinuousClock.Instant
        var interval: Duration
        var compute: @Sendable () async throws -> String
    }

    private struct State {
        var views: [String: View] = [:]
        var nextID = 0
        var running = false
        var computations = 0
    }

    private let state = Mutex(State())
    private let store: OperatorStore
    /// How often the change counter is looked at.
    package let pollInterval: Duration
    /// How often a page with nothing new hears from the console (a comment), so that a closed one is noticed.
    package let keepAliveInterval: Duration
    private let logger: Logger

    package init(
        store: OperatorStore, pollInterval: Duration, keepAliveInterval: Duration = .seconds(15), logger: Logger
    ) {
        self.store = store
        self.pollInterval = pollInterval
        self.keepAliveInterval = keepAliveInterval
        self.logger = logger
    }

    /// A view is read again at the soonest this many times its last reading's time after it: reading views takes at
    /// most about 5 % of a core however slow they are.
    package static let costFactor = 20

    /// Whether the poller runs (the console's service was started).
    package var isRunning: Bool { state.withLock { $0.running } }

    /// How many views were read so far (for tests and the benchmark).
    package var computations: Int { state.withLock { $0.computations } }

    /// How many pages are subscribed.
    package var subscribers: Int { state.withLock { $0.views.values.reduce(0) { $0 + $1.subscribers.count } } }

    /// Subscribes to the view `key`, read by `compute` (a JSON document) at most once per `interval`; its current
    /// payload, when one was read, comes first. The stream ends when the console stops; ending it (the page went
    /// away) unsubscribes.
    ///
    /// - Returns: `nil` when the poller does not run.
    package func subscribe(
        key: String, interval: Duration, compute: @escaping @Sendable () async throws -> String
    ) -> AsyncStream<Message>? {
        let (stream, continuation) = AsyncStream<Message>.makeStream(bufferingPolicy: .bufferingNewest(4))
        let id: Int? = state.withLock { state in
            guard state.running else { return nil }
            let id = state.nextID
            state.nextID += 1
            var view = state.views[key] ?? View(nextAllowed: .now, interval: interval, compute: compute)
            view.subscribers[id] = continuation
            view.dirty = true
            if let last = view.last { continuation.yield(Self.event(last)) }
            state.views[key] = view
            return id
        }
        guard let id else {
            continuation.finish()
            return nil
        }
        continuation.onTermination = { [weak self] _ in
            self?.unsubscribe(key: key, id: id)
        }
        return stream
    }

    private func unsubscribe(key: String, id: Int) {
        state.withLock { state in
            state.views[key]?.subscribers[id] = nil
            if state.views[key]?.subscribers.isEmpty == true { state.views[key] = nil }
        }
    }

    /// A Server-Sent Event named `update` carrying `payload` (one line of JSON).
    static func event(_ payload: String) -> Message {
        Message(bytes: ByteBuffer(string: "event: update\ndata: \(payload)\n\n"), isUpdate: true)
    }

    static let keepAlive = Message(bytes: ByteBuffer(string: ": keep-alive\n\n"), isUpdate: false)

    /// Polls until cancelled or until a graceful shutdown; then ends every page's stream.
    package func run() async {
        state.withLock { $0.running = true }
        defer {
            let continuations = state.withLock { state in
                state.running = false
                defer { state.views = [:] }
                return state.views.values.flatMap { $0.subscribers.values }
            }
            for continuation in continuations { continuation.finish() }
        }
        await cancelWhenGracefulShutdown {
            var lastCounter: Int64?
            var lastKeepAlive = ContinuousClock.now
            while !Task.isCancelled {
                do {
                    let counter = try await self.store.changeCounter()
                    if counter != lastCounter {
                        lastCounter = counter
                        self.state.withLock { state in
                            for key in state.views.keys { state.views[key]?.dirty = true }
                        }
                    }
                } catch {
                    if Task.isCancelled { break }
                    self.logger.warning("cannot read the store's change counter", metadata: ["error": "\(error)"])
                }
                await self.sendDue()
                if ContinuousClock.now - lastKeepAlive >= self.keepAliveInterval {
                    lastKeepAlive = .now
                    self.broadcast(Self.keepAlive)
                }
                do { try await Task.sleep(for: self.pollInterval) } catch { break }
            }
        }
    }

    /// Reads each view that changed and may be sent again, and sends it where it differs from what was sent.
    private func sendDue() async {
        let now = ContinuousClock.now
        let due = state.withLock { state in
            state.views.filter { $0.value.dirty && $0.value.nextAllowed <= now && !$0.value.subscribers.isEmpty }
                .map { (key: $0.key, compute: $0.value.compute) }
        }
        for view in due {
            let payload: String
            let started = ContinuousClock.now
            do {
                payload = try await view.compute()
            } catch {
                logger.warning("cannot read a live view", metadata: ["view": "\(view.key)", "error": "\(error)"])
                state.withLock { state in
                    state.views[view.key]?.nextAllowed = .now + .seconds(1)
                }
                continue
            }
            state.withLock { state in
                state.computations += 1
                guard var current = state.views[view.key] else { return }
                current.dirty = false
                // A view that takes long to read is read less often: at most a twentieth of the time (a list
                // filtered by name on a million roots reads every one of them).
                let cost = ContinuousClock.now - started
                current.nextAllowed = now + max(current.interval, cost * Self.costFactor)
                if payload != current.last {
                    current.last = payload
                    let event = Self.event(payload)
                    for continuation in current.subscribers.values { continuation.yield(event) }
                }
                state.views[view.key] = current
            }
        }
    }

    private func broadcast(_ message: Message) {
        state.withLock { state in
            for view in state.views.values {
                for continuation in view.subscribers.values { continuation.yield(message) }
            }
        }
    }
}
#endif
