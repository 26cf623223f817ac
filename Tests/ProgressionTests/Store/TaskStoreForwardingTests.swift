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

    /// One call of the store's protocols through the wrapper, and what the hook must be told of it.
    struct Call: Sendable, CustomTestStringConvertible {
        var name: String
        var forwarded: ForwardedCall
        var make: @Sendable (Recording) async throws -> Void
        var testDescription: String { name }
    }

    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    static let calls: [Call] = [
        Call(name: "task", forwarded: .read) { _ = try await $0.task(id: "r") },
        Call(name: "tree", forwarded: .readTree("r")) { _ = try await $0.tree(of: "r") },
        Call(name: "roots", forwarded: .read) { _ = try await $0.roots(TaskQuery()) },
        Call(name: "countRoots", forwarded: .read) { _ = try await $0.countRoots(TaskQuery(), upTo: 10) },
        Call(name: "events", forwarded: .read) { _ = try await $0.events(of: "r") },
        Call(name: "root by key", forwarded: .read) { _ = try await $0.root(kind: "k", idempotencyKey: "x") },
        Call(name: "taskIDs", forwarded: .read) { _ = try await $0.taskIDs(withPrefix: "r", rootsOnly: true, limit: 5) },
        Call(name: "statistics", forwarded: .read) { _ = try await $0.statistics() },
        Call(name: "failedSteps", forwarded: .read) { _ = try await $0.failedSteps(ofRoots: ["r"]) },
        Call(name: "owners", forwarded: .read) { _ = try await $0.owners() },
        Call(name: "pendingControlRequests", forwarded: .read) { _ = try await $0.pendingControlRequests(for: nil) },
        Call(name: "controlRequest", forwarded: .read) { _ = try await $0.controlRequest(id: 1) },
        Call(name: "changeCounter", forwarded: .read) { _ = try await $0.changeCounter() },
        Call(name: "registeredKinds", forwarded: .read) { _ = try await $0.registeredKinds() },
        Call(name: "pausedKinds", forwarded: .read) { _ = try await $0.pausedKinds() },
        Call(name: "nextWaitingTime", forwarded: .read) { _ = try await $0.nextWaitingTime(after: t0) },
        Call(name: "schedules", forwarded: .read) { _ = try await $0.schedules() },
        Call(name: "dueSchedules", forwarded: .read) { _ = try await $0.dueSchedules(at: t0, limit: 5) },
        Call(name: "earliestScheduleTick", forwarded: .read) { _ = try await $0.earliestScheduleTick(after: t0) },
        Call(name: "reserveIdentifiers", forwarded: .write) { _ = try await $0.reserveIdentifiers(2) },
        Call(name: "insert", forwarded: .write) {
            try await $0.insert([TaskRecord(id: "n", name: "n", createdAt: t0)], events: [])
        },
        Call(name: "apply", forwarded: .write) { _ = try await $0.apply(TaskBatch(records: [])) },
        Call(name: "change", forwarded: .write) {
            _ = try await $0.change(TaskChangeRequest(taskID: "r", transition: .cancel, requester: .user, at: t0))
        },
        Call(name: "claimRoots", forwarded: .write) {
            _ = try await $0.claimRoots(RootClaim(fromOwners: [nil], kinds: nil, newOwner: "o", limit: 1))
        },
        Call(name: "transferTree", forwarded: .write) {
            _ = try await $0.transferTree(of: "r", ifStatusIn: [.pending], from: nil, to: "o")
        },
        Call(name: "prune", forwarded: .write) {
            _ = try await $0.prune(finishedBefore: t0, statuses: [.completed], dryRun: true)
        },
        Call(name: "saveOwner", forwarded: .write) {
            try await $0.saveOwner(OwnerRecord(id: "o", host: "h", pid: 1, startedAt: t0, heartbeatAt: t0))
        },
        Call(name: "addControlRequest", forwarded: .write) {
            _ = try await $0.addControlRequest(ControlRequest(taskID: "r", action: .pause, ownerID: nil, requestedAt: t0))
        },
        Call(name: "completeControlRequest", forwarded: .write) {
            try await $0.completeControlRequest(id: 1, outcome: "applied", at: t0)
        },
        Call(name: "maintain", forwarded: .write) { try await $0.maintain(.passiveCheckpoint) },
        Call(name: "saveKinds", forwarded: .write) { try await $0.saveKinds([:], at: t0) },
        Call(name: "setKindPaused", forwarded: .write) { _ = try await $0.setKindPaused("k", paused: true, at: t0) },
        Call(name: "saveSchedules", forwarded: .write) { _ = try await $0.saveSchedules([], at: t0) },
        Call(name: "fireSchedule", forwarded: .write) {
            _ = try await $0.fireSchedule(
                ScheduleFire(name: "s", expectedNextFireAt: t0, nextFireAt: t0, firedTick: nil, jobs: [], events: []))
        },
        Call(name: "setSchedulePaused", forwarded: .write) {
            _ = try await $0.setSchedulePaused("s", paused: true, nextFireAt: nil, at: t0)
        },
        Call(name: "removeSchedule", forwarded: .write) { _ = try await $0.removeSchedule("s") },
        Call(name: "forgetIdleOwners", forwarded: .write) { _ = try await $0.forgetIdleOwners(["o"]) },
    ]

    /// Every method of the store's protocols reaches the hook once, named as what it does (a fault injector fails
    /// reads and writes apart, so a write named a read would escape a write fault).
    @Test(arguments: calls)
    func everyMethodIsForwardedAsTheReadOrWriteItIs(call: Call) async throws {
        let store = Recording()
        try await store.inner.insert([TaskRecord(id: "r", name: "r", kind: "k", createdAt: Self.t0)], events: [])
        try await call.make(store)
        #expect(store.take() == [call.forwarded])
    }
}
