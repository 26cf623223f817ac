import Foundation
import ProgressionTestSupport
import Synchronization
import Testing

@testable import Progression

/// A claim whose slots a worker's own submits took while it was under way gives what it took back, so that a worker
/// holds in the store only what it runs (the race `aWorkersOwnSubmitsWaitUnownedAndItHoldsOnlyWhatItRuns` met once in
/// a few loaded runs, made to happen every time here).
struct ClaimGiveBackTests {
    /// A store whose claims, once they took something, wait at a gate before they answer (a slow round trip).
    final class SlowClaims: TaskStoreForwarding {
        let inner: any TaskStoreBackend
        let claimed = Gate()
        let answer = Gate()
        private let held = Mutex(false)

        init(_ inner: any TaskStoreBackend) { self.inner = inner }

        func forward<T: Sendable>(
            _ call: ForwardedCall, _ body: @Sendable (any TaskStoreBackend) async throws -> T
        ) async throws -> T {
            try await body(inner)
        }

        func claimRoots(_ claim: RootClaim) async throws -> [ClaimedRoot] {
            let roots = try await inner.claimRoots(claim)
            if !roots.isEmpty, held.withLock({ held in defer { held = true }; return !held }) {
                claimed.open()
                await answer.wait()
            }
            return roots
        }
    }

    @Test func aClaimWhoseSlotsOwnSubmitsTookGivesWhatItTookBack() async throws {
        let store = SlowClaims(InMemoryTaskStore())
        let gate = Gate()
        let runs = Runs()
        var configuration = TaskExecutor.Configuration()
        configuration.maxConcurrentTasks = 2
        let worker = try TaskExecutor(store: store, configuration: configuration)
        try worker.register(Held(worker: "w", gate: gate, runs: runs))
        try await worker.start()
        // A producer's backlog: the worker's claim takes two, and its answer is held back.
        let client = try JobClient(store: store)
        let produced = try await client.submit(Held.self, inputs: (0..<6).map { Held.Input(n: $0) })
        await store.claimed.wait()
        // Meanwhile the worker's own submits take both slots.
        let own = try await worker.submit(Held.name, inputs: [Held.Input(n: 100), Held.Input(n: 101)])
        try await poll("the worker's own jobs to run") { runs.total == 2 }
        store.answer.open()
        try await poll("the claimed jobs to be given back") {
            try await store.roots(TaskQuery(limit: 100)).filter { $0.ownerID == worker.ownerID }.count == 2
        }
        let census = try await store.roots(TaskQuery(limit: 100))
        #expect(Set(census.filter { $0.ownerID == worker.ownerID }.map(\.id)) == Set(own))
        #expect(census.filter { $0.ownerID == nil && $0.status == .pending }.count == 6)
        gate.open()
        for id in produced + own { _ = try await client.wait(for: id, timeout: .seconds(120)) }
        #expect(runs.total == 8, "each job ran once: \(runs.byWorker)")
        await worker.shutdown()
    }
}
