import Foundation
import ProgressionTestSupport
import Testing

@testable import Progression

/// The write set on the graph alone (`WriteSet.swift`): what the writer takes, what a commit shows, what a failed
/// batch puts back, what the store's refusals and conflicts do to memory, checkpoints, and the batching window.
struct WriteSetTests {
    static let now = Date(timeIntervalSince1970: 1_000)

    static func record(_ id: String, _ status: TaskStatus = .pending) -> TaskRecord {
        TaskRecord(id: id, name: id, kind: "k", status: status, createdAt: now)
    }

    func batch(_ state: inout GraphState) -> GraphState.TakenBatch? {
        guard case .batch(let taken) = state.takeWrites(now: Self.now, sampleInterval: 1, owner: "owner") else { return nil }
        return taken
    }

    /// A new root is inserted, a stored one's changed columns updated, their events kept in order; the batch is the
    /// owner's; after it the set is empty, and its commit shows the staged transition.
    @Test func aBatchHoldsInsertsUpdatesAndEventsAndItsCommitShowsWhatItHeld() throws {
        var state = GraphState.alone(slots: 1)
        let new = state.addRoot(Self.record("new"), stored: false)
        let stored = state.addRoot(Self.record("stored", .running), stored: true)
        try state.transition(stored, .complete(result: nil), by: .system, now: Self.now)
        #expect(new.hidden, "a new root is not shown before its insert commits")
        #expect(stored.committed.status == .running)

        let written = batch(&state)
        let taken = try #require(written)

        #expect(taken.batch.owner == "owner")
        #expect(taken.batch.inserts.map(\.id) == ["new"])
        #expect(taken.batch.updates.map(\.record.id) == ["stored"])
        #expect(taken.batch.updates.first?.columns.contains(.status) == true)
        #expect(taken.batch.events.map(\.kind) == [.completed])
        #expect(!state.hasPendingWrites)
        let left = batch(&state)
        #expect(left == nil, "nothing left to write")

        _ = state.committed(upTo: taken.sequence)
        #expect(stored.committed.status == .completed)
        #expect(!new.hidden)
    }

    /// A batch that failed goes back: its rows and events are written with the next one, and storage is failing
    /// until a commit.
    @Test func aFailedBatchIsWrittenAgainWithTheNext() throws {
        var state = GraphState.alone(slots: 1)
        let root = state.addRoot(Self.record("job", .running), stored: true)
        try state.transition(root, .complete(result: nil), by: .system, now: Self.now)
        let failed = batch(&state)
        let first = try #require(failed)

        state.requeue(first, error: CancellationError(), now: Self.now)

        #expect(!state.storage.isHealthy)
        let next = batch(&state)
        let again = try #require(next)
        #expect(again.batch.updates.map(\.record.id) == ["job"])
        #expect(again.batch.events.map(\.kind) == [.completed])
        _ = state.committed(upTo: again.sequence)
        #expect(state.storage.isHealthy)
    }

    struct RejectionRow: Sendable, CustomTestStringConvertible {
        var name: String
        var phase: RootPhase
        var codeRuns: Bool
        var leavesMemory: Bool
        var testDescription: String { name }
    }

    static let rejectionRows: [RejectionRow] = [
        RejectionRow(name: "queued: it leaves memory at once", phase: .queued, codeRuns: false, leavesMemory: true),
        RejectionRow(name: "idle: it leaves memory at once", phase: .idle, codeRuns: false, leavesMemory: true),
        RejectionRow(name: "its run started: it stays until its code stops", phase: .running, codeRuns: false, leavesMemory: false),
        RejectionRow(name: "its code runs: it stays until it stops", phase: .idle, codeRuns: true, leavesMemory: false),
    ]

    /// The store refused a root's rows (another owner holds it): nothing more is written for it; one whose code never
    /// ran leaves memory at once, and who waited for it to be idle is told.
    @Test(arguments: rejectionRows)
    func aRefusedRootStopsAndLeavesMemoryUnlessItsCodeRuns(_ row: RejectionRow) async throws {
        // Within a deadline: a continuation the code under test failed to keep or resume fails the test.
        try await within(.seconds(30), "a refused root") {
            var state = GraphState.alone(slots: 1)
            let root = state.addRoot(Self.record("job"), stored: true)
            root.phase = row.phase
            if row.codeRuns { root.execution = Execution(cancel: {}, startedAt: .zero, pausedSince: nil) }
            var told = 0
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let idleNow = state.waitUntilIdle("job", continuation)
                #expect(idleNow == (row.phase == .idle))
                let effects = state.markRejected(["job", "unknown"])
                told = effects.idleWaiters.count
                for waiter in effects.idleWaiters { waiter.resume() }
                if idleNow { continuation.resume() }
                // Still waiting for its code to stop: resumed here to end the test.
                for waiter in root.idleWaiters { waiter.resume() }
                root.idleWaiters.removeAll()
            }
            #expect(root.stopReason == .leaseLost)
            #expect((state.node(id: "job") == nil) == row.leavesMemory)
            #expect(told == (row.leavesMemory && row.phase != .idle ? 1 : 0))
        }
    }

    /// Inserts that found their identity taken: the nodes are marked; subtasks among them are returned (a root's
    /// caller learns of it when its insert commits).
    @Test func insertsWhoseIdentityWasTakenAreMarkedAndTheirSubtasksReturned() {
        var state = GraphState.alone(slots: 1)
        let root = state.addRoot(Self.record("job"), stored: false)
        let step = state.addChild(
            TaskRecord(id: "job.1", parentID: "job", rootID: "job", name: "step", createdAt: Self.now), to: root)
        let children = state.markConflicted(["job", "job.1", "unknown"])
        #expect(children == ["job.1"])
        #expect(root.conflicted && step.conflicted)
        let conflicted = state.newRootsCommitted([root.handle])
        #expect(conflicted == ["job"])
        #expect(state.node(id: "job") == nil && root.stopReason == .leaseLost)
    }

    @Test func aCheckpointIsWrittenWithItsEvent() throws {
        var state = GraphState.alone(slots: 1)
        let root = state.addRoot(Self.record("job", .running), stored: true)
        let data = Data("{\"page\":3}".utf8)
        let stored = state.checkpoint(root.handle, data: data, now: Self.now.addingTimeInterval(5))
        let sequence = try #require(stored)
        #expect(sequence == state.changeSequence)
        let written = batch(&state)
        let taken = try #require(written)
        #expect(taken.batch.updates.first?.record.checkpoint == data)
        #expect(taken.batch.updates.first?.columns.contains(.checkpoint) == true)
        #expect(taken.batch.events.map(\.message) == ["10 bytes"])
        state.removeRoot(root)
        let gone = state.checkpoint(root.handle, data: data, now: Self.now)
        #expect(gone == nil)
    }

    /// The writer waits out its batching window unless someone waits for a commit; an urgent wake ends the window and
    /// keeps the next one short.
    @Test func theBatchingWindowEndsAtOnceForSomeoneWaitingForACommit() async throws {
        // Within a deadline: a continuation the code under test failed to keep or resume fails the test.
        try await within(.seconds(30), "the batching window") {
            var state = GraphState.alone(slots: 1)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let atOnce = state.waitForWindow(continuation)
                #expect(!atOnce, "nobody waits: the window is waited out")
                let waiter = state.endWindow(urgent: true)
                #expect(waiter != nil)
                let again = state.endWindow(urgent: false)
                #expect(again == nil, "ended once")
                waiter?.resume()
            }
            #expect(state.awaitsCommit)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let atOnce = state.waitForWindow(continuation)
                #expect(atOnce, "someone waits for a commit: no window")
                continuation.resume()
            }
        }
    }
}
