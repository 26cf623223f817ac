import Foundation
import Synchronization

/// Hands the latest ``TaskGraph`` to every subscriber. Each subscriber's stream keeps only the newest graph, so a slow
/// consumer gets the latest state, never a backlog.
final class GraphPublisher: Sendable {
    private struct State {
        var subscribers: [UUID: AsyncStream<TaskGraph>.Continuation] = [:]
        var latest: TaskGraph?
        var finished = false
        /// Graphs published so far.
        var published = 0
    }

    /// One lock for the subscribers and whether the publisher finished: a subscriber added while `finish` runs is
    /// either finished by it or sees `finished` and ends its own stream, never left open.
    private let state = Mutex(State())

    /// Whether anyone listens: without subscribers the executor builds no graphs.
    var hasSubscribers: Bool { !state.withLock { $0.subscribers.isEmpty } }

    /// Graphs published so far: read before building a subscriber's current graph (see ``subscribe(current:publishedSince:)``).
    var publishCount: Int { state.withLock { $0.published } }

    /// A new stream that starts with `current` (the latest graph, or `nil` once the executor shut down). When a graph
    /// was published after `publishedSince` (while `current` was being built, before this subscriber was registered),
    /// that graph follows: the publisher does not send a graph again, and it may be newer than `current`.
    func subscribe(current: TaskGraph?, publishedSince: Int? = nil) -> AsyncStream<TaskGraph> {
        let (stream, continuation) = AsyncStream.makeStream(of: TaskGraph.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        // The first graph is yielded under the lock, so that a graph published meanwhile comes after it, not before.
        let finished = state.withLock { state in
            if let first = current ?? state.latest { continuation.yield(first) }
            if current != nil, let since = publishedSince, state.published != since, let latest = state.latest {
                continuation.yield(latest)
            }
            if !state.finished { state.subscribers[id] = continuation }
            return state.finished
        }
        if finished { continuation.finish() }
        return stream
    }

    func publish(_ graph: TaskGraph) {
        let all = state.withLock { state in
            state.latest = graph
            state.published += 1
            return Array(state.subscribers.values)
        }
        for continuation in all { continuation.yield(graph) }
    }

    func finish() {
        let all = state.withLock { state in
            state.finished = true
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for continuation in all { continuation.finish() }
    }
}
