import Foundation
import ProgressionTestSupport
import Testing

@testable import Progression

/// Which owners a worker judges dead, and when that judgement is checked again. An owner is judged by its heartbeat
/// when the owners are read (at most once per recovery interval); the claim that follows, maybe much later, reads the
/// heartbeat again in its transaction.
struct ClaimJudgementTests {
    struct Input: Codable, Sendable {}

    /// An owner of another host, judged dead by a heartbeat an hour old, writes one more before the next claim (it was
    /// slow, not dead): that claim, still using the judgement read before, leaves its job. Without the check in the
    /// claim's transaction the job would be taken from a live owner, which would then find its writes fenced and its
    /// work lost.
    @Test(arguments: [StoreKind.sqlite, .memory])
    func aClaimLeavesTheJobsOfAnOwnerThatWroteAHeartbeatSinceItWasJudged(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let judgedAt = Date().addingTimeInterval(-3_600)
        let slow = OwnerRecord(id: "slow", host: "elsewhere", pid: 1, startedAt: judgedAt, heartbeatAt: judgedAt)
        try await store.saveOwner(slow)
        func job(_ id: String) -> TaskRecord {
            TaskRecord(
                id: id, name: id, kind: "noop", input: Data("{}".utf8), status: .pending, ownerID: "slow",
                createdAt: judgedAt)
        }
        try await store.insert([job("first")], events: [])

        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .seconds(600)
        // One reading of the owners serves every claim of the test.
        configuration.recoveryInterval = .seconds(3_600)
        let executor = try TaskExecutor(store: store, configuration: configuration)
        try executor.register("noop", input: Input.self) { _, _ in }
        try await executor.start()
        // The first claim judged "slow" dead and took its job.
        try await waitUntil("the first job to be taken") { try await store.task(id: "first")?.ownerID == executor.ownerID }

        var alive = slow
        alive.heartbeatAt = judgedAt.addingTimeInterval(1)
        try await store.saveOwner(alive)
        try await store.insert([job("second")], events: [])
        let pass = await executor.engine.claimOnce()
        #expect(pass.claimed == 0)
        #expect(try await store.task(id: "second")?.ownerID == "slow")
        await executor.shutdown()
    }
}
