import Foundation
import ProgressionTestSupport
import Testing

@testable import Progression

/// Pauses on the graph alone (`PauseGate.swift`): who waits while a node or an ancestor is paused, who is woken when
/// it resumes, a waiter's cancellation, the paused-time clock of running code, and kinds paused across the fleet.
struct PauseGateTests {
    /// A root with one step below it, the step's code running since `.zero`.
    static func tree() -> (GraphState, TaskNode, TaskNode) {
        var state = GraphState.alone(slots: 1)
        let created = Date(timeIntervalSince1970: 1_000)
        let root = state.addRoot(
            TaskRecord(id: "job", name: "job", kind: "k", status: .running, createdAt: created), stored: true)
        let step = state.attachStored(
            TaskRecord(id: "job.1", parentID: "job", rootID: "job", name: "step", status: .running, createdAt: created),
            to: root)
        step.execution = Execution(cancel: {}, startedAt: .zero, pausedSince: nil)
        return (state, root, step)
    }

    struct WaitRow: Sendable, CustomTestStringConvertible {
        var name: String
        var pausedRoot: Bool
        var cancelled: Bool
        /// `nil`: it waits; else whether it is let through at once (`true`) or fails with a cancellation.
        var immediate: Bool?
        var testDescription: String { name }
    }

    static let waitRows: [WaitRow] = [
        WaitRow(name: "nothing paused: on at once", pausedRoot: false, cancelled: false, immediate: true),
        WaitRow(name: "nothing paused, cancelled: on at once", pausedRoot: false, cancelled: true, immediate: true),
        WaitRow(name: "its root paused: it waits", pausedRoot: true, cancelled: false, immediate: nil),
        WaitRow(name: "its root paused, cancelled: it fails at once", pausedRoot: true, cancelled: true, immediate: false),
    ]

    @Test(arguments: waitRows)
    func aStepWaitsWhileAnAncestorIsPaused(_ row: WaitRow) async throws {
        // Within a deadline: a continuation the code under test failed to keep or resume fails the test.
        try await within(.seconds(30), "a pause wait") {
            var (state, root, step) = Self.tree()
            if row.pausedRoot { root.record.status = .paused }
            let token = state.nextToken()
            var waited = true
            var thrown = false
            do {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    if let immediate = state.waitWhilePaused(step.handle, token: token, continuation, cancelled: row.cancelled) {
                        waited = false
                        continuation.resume(with: immediate)
                    } else {
                        // Woken as its root resumes.
                        root.record.status = .running
                        for waiter in state.pauseChanged(below: root, now: .seconds(5)) { waiter.resume() }
                    }
                }
            } catch {
                thrown = true
            }
            #expect(waited == (row.immediate == nil))
            #expect(thrown == (row.immediate == false))
            #expect(step.pauseWaiters.isEmpty)
        }
    }

    @Test func aCancelledWaiterIsTakenOutOnce() async throws {
        // Within a deadline: a continuation the code under test failed to keep or resume fails the test.
        try await within(.seconds(30), "a cancelled pause wait") {
            var (state, root, step) = Self.tree()
            root.record.status = .paused
            let token = state.nextToken()
            await #expect(throws: CancellationError.self) {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    #expect(state.waitWhilePaused(step.handle, token: token, continuation, cancelled: false) == nil)
                    #expect(step.pauseWaiters.count == 1)
                    let taken = state.cancelPauseWait(step.handle, token: token)
                    #expect(state.cancelPauseWait(step.handle, token: token) == nil, "taken once")
                    taken?.resume(throwing: CancellationError())
                }
            }
            #expect(step.pauseWaiters.isEmpty)
            #expect(state.pauseChanged(below: root, now: .seconds(1)).isEmpty)
        }
    }

    /// Paused time does not count against the running code's timeout: the clock stops while its root is paused.
    @Test func runningCodesPausedTimeIsCounted() {
        var (state, root, step) = Self.tree()
        root.record.status = .paused
        _ = state.pauseChanged(below: root, now: .seconds(10))
        #expect(step.execution?.pausedSince == .seconds(10))
        _ = state.pauseChanged(below: root, now: .seconds(12))
        #expect(step.execution?.pausedSince == .seconds(10), "a second pause keeps the first time")
        root.record.status = .running
        _ = state.pauseChanged(below: root, now: .seconds(25))
        #expect(step.execution?.pausedSince == nil)
        #expect(step.execution?.pausedTotal == .seconds(15))
    }

    /// A kind paused across the fleet holds its queued roots; resumed, they get their slots; the same set again
    /// changes nothing.
    @Test func aKindResumedAcrossTheFleetLetsItsQueuedRootsStart() {
        var state = GraphState.alone(slots: 1)
        let now = Date(timeIntervalSince1970: 1_000)
        let root = state.addRoot(TaskRecord(id: "job", name: "job", kind: "k", status: .pending, createdAt: now), stored: true)
        root.body = { _ in nil }
        #expect(state.setPausedKinds(["k"], now: now, monotonicNow: .zero).launches.isEmpty)
        state.enqueue(root)
        #expect(state.dispatch(now: now, monotonicNow: .zero).launches.isEmpty, "held while its kind is paused")
        #expect(state.setPausedKinds(["k"], now: now, monotonicNow: .zero).launches.isEmpty)
        #expect(state.setPausedKinds([], now: now, monotonicNow: .zero).launches == [root.handle])
        #expect(state.pausedKinds.isEmpty)
    }
}
