import Foundation
import Synchronization

/// Hands the latest ``TaskGraph`` to every subscriber. Each subscriber's stream keeps only the newest graph, so a slow
/// consumer gets the latest state, never a backlog.
final class GraphPublisher: Sendable {
    private let subscribers = Mutex<[UUID: AsyncStream<TaskGraph>.Continuation]>([:])
    private let latest = Mutex<TaskGraph?>(nil)
    private let finished = Mutex(false)

    /// Whether anyone listens: without subscribers the executor builds no graphs.
    var hasSubscribers: Bool { !subscribers.withLock { $0.isEmpty } }

    /// A new stream that starts with `current` (the latest graph, or `nil` once the executor shut down).
    func subscribe(current: TaskGraph?) -> AsyncStream<TaskGraph> {
        let (stream, continuation) = AsyncStream.makeStream(of: TaskGraph.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        if let graph = current ?? latest.withLock({ $0 }) { continuation.yield(graph) }
        if finished.withLock({ $0 }) {
            continuation.finish()
        } else {
            subscribers.withLock { $0[id] = continuation }
        }
        return stream
    }

    func publish(_ graph: TaskGraph) {
        latest.withLock { $0 = graph }
        for continuation in subscribers.withLock({ Array($0.values) }) {
            continuation.yield(graph)
        }
    }

    func finish() {
        finished.withLock { $0 = true }
        let all = subscribers.withLock { subscribers in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for continuation in all { continuation.finish() }
    }
}
