import Foundation
import Testing

@testable import Progression

/// Jobs released to the fleet (issue 37), decided on the graph alone: a job resumed while every slot is taken, a job
/// waiting for its retry, and a job claimed when jobs submitted here took the slots its claim counted on are left
/// unowned in the store for the first worker with a free slot; a closure task (no kind: no other worker has its code)
/// stays this executor's; a released job that gets a slot here is taken back with its start.
struct ReleaseTests {
    typealias Graph = UserChangeTests.Graph

    @Test(arguments: [true, false])
    func aResumeWithEverySlotTakenReleasesAJobAndKeepsAClosureTask(job: Bool) {
        var graph = Graph(.suspendedSlotTaken)
        if !job { graph.root.record.kind = nil }
        let outcome = graph.apply(.resume)
        #expect(outcome.status == .pending && outcome.phase == .queued && !outcome.holdsSlot)
        #expect(graph.root.record.ownerID == (job ? nil : "owner"))
        #expect(graph.root.pendingColumns.contains(.owner) == job, "the release is written")
        #expect(graph.root.staged?.ownerID == (job ? nil : "owner"), "shown unowned once committed")
        // The slot frees here first: the job is taken back with the change that lets its code go on.
        _ = graph.state.runQueue.release(graph.other.handle)
        let dispatch = graph.state.dispatch(now: Date(timeIntervalSince1970: 2_000), monotonicNow: .seconds(11))
        for wake in dispatch.wakes { wake.resume() }
        #expect(graph.root.record.status == .running && graph.root.record.ownerID == "owner")
        #expect(graph.root.pendingColumns.contains(.owner) == job)
    }

    @Test(arguments: [true, false])
    func aRootWaitingForItsRetryIsReleasedWhenItIsAJob(job: Bool) {
        var graph = Graph(.running, options: TaskOptions.interactive.retryPolicy(.exponential(maxAttempts: 2, jitter: 0)))
        if !job { graph.root.record.kind = nil }
        let (_, delay) = graph.state.finish(
            graph.root, .failure(TestFailure()),
            now: Date(timeIntervalSince1970: 2_000), random: 0, configuration: TaskExecutor.Configuration())
        #expect(delay == .seconds(1))
        #expect(graph.root.record.status == .pending && graph.root.record.nextAttemptAt != nil)
        #expect(graph.root.record.ownerID == (job ? nil : "owner"))
    }

    @Test func aClaimedJobWithNoFreeSlotIsReleasedAndOneWithASlotIsKept() {
        var graph = Graph(.queued)  // `other` runs on the only slot
        graph.state.releaseIfNoSlot("root")
        #expect(graph.root.record.ownerID == nil && graph.root.pendingColumns.contains(.owner))
        #expect(graph.root.staged?.ownerID == nil)

        var free = Graph(.queued)
        _ = free.state.runQueue.release(free.other.handle)
        free.state.releaseIfNoSlot("root")
        #expect(free.root.record.ownerID == "owner", "a slot is free: the dispatch that follows starts it here")
    }

    struct TestFailure: Error {}
}
