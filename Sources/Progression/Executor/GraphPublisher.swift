import Foundation
import Synchronization

/// Hands the latest ``TaskGraph`` to every subscriber. Each subscriber's stream keeps only the newest graph, so a slow
/// consumer gets the latest state, never a backlog.
final class GraphPublisher: Sendable {
    private let subscribers = Mutex<[UUID: AsyncStream<TaskGraph>.Continuation]>([:])
    private let latest = Mutex<TaskGraph?>(nil)

    /// A new stream that starts with the latest graph.
    func subscribe() -> AsyncStream<TaskGraph> {
        let (stream, continuation) = AsyncStream.makeStream(of: TaskGraph.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        subscribers.withLock { $0[id] = continuation }
        if let graph = latest.withLock({ $0 }) { continuation.yield(graph) }
        return stream
    }

    func publish(_ graph: TaskGraph) {
        latest.withLock { $0 = graph }
        for continuation in subscribers.withLock({ Array($0.values) }) {
            continuation.yield(graph)
        }
    }

    func finish() {
        let all = subscribers.withLock { subscribers in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for continuation in all { continuation.finish() }
    }
}
