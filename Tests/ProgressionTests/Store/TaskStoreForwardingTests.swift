import Foundation
import Progression
import ProgressionTestSupport
import Synchronization
import Testing

/// A wrapping store forwards every call through one hook (``TaskStoreForwarding``), which learns whether the call
/// reads, reads a tree or writes, and reaches the wrapped store's answer.
struct TaskStoreForwardingTests {
    final class Recording: TaskStoreForwarding {
        let inner = InMemoryTaskStore()
        let calls = Mutex<[ForwardedCall]>([])

        func forward<T: Sendable>(
            _ call: ForwardedCall, _ body: @Sendable (any TaskStoreBackend) async throws -> T
        ) async throws -> T {
            calls.withLock { $0.append(call) }
            return try await body(inner)
        }

        func take() -> [ForwardedCall] {
            calls.withLock { calls in
                defer { calls = [] }
                return calls
            }
        }
    }

    @Test func eachCallReachesTheWrappedStoreNamedAsTheReadOrWriteItIs() async throws {
        let store = Recording()
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let root = TaskRecord(id: "r", name: "job", kind: "k", status: .pending, createdAt: t0)
        try await store.insert([root], events: [])
        #expect(store.take() == [.write])
        #expect(try await store.task(id: "r")?.name == "job")
        #expect(try await store.tree(of: "r").map(\.id) == ["r"])
        #expect(try await store.roots(TaskQuery()).map(\.id) == ["r"])
        #expect(store.take() == [.read, .readTree("r"), .read])
        let changed = try await store.change(
            TaskChangeRequest(taskID: "r", transition: .cancel, requester: .user, at: t0.addingTimeInterval(1)))
        #expect(changed.after?.status == .cancelled)
        #expect(try await store.inner.task(id: "r")?.status == .cancelled)
        _ = try await store.addControlRequest(
            ControlRequest(taskID: "r", action: .remove, ownerID: nil, requestedAt: t0))
        #expect(try await store.pendingControlRequests(for: nil).count == 1)
        #expect(try await store.registeredKinds().isEmpty)
        #expect(store.take() == [.write, .write, .read, .read])
    }
}
