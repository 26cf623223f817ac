import Foundation
import ProgressionTestSupport
import Testing

@testable import Progression

/// A graceful stop's first step on the graph alone (`GraphState.beginShutdown`): for each phase a root can be in,
/// whether its code is asked to stop or it is handed back at once, and what it is then.
struct ShutdownBegunTests {
    struct Root: Equatable, CustomStringConvertible {
        var status: TaskStatus
        var owner: String?
        var phase: RootPhase
        var stopped: Bool

        var description: String { "\(status), owner \(owner ?? "none"), \(phase), stopped \(stopped)" }
    }

    @Test func runningCodeIsAskedToStopAndEverythingElseIsHandedBack() {
        var state = GraphState.alone(slots: 2)
        func add(_ id: String, _ status: TaskStatus, owner: String? = "owner", _ phase: RootPhase) -> TaskNode {
            let node = state.addRoot(
                TaskRecord(
                    id: id, name: id, kind: "job", options: .interactive, status: status, ownerID: owner,
                    createdAt: Date(timeIntervalSince1970: 1_000), startedAt: status == .pending ? nil : .distantPast,
                    finishedAt: status.isFinished ? .distantPast : nil),
                stored: true)
            node.body = { _ in nil }
            if phase == .queued { state.enqueue(node) } else { node.phase = phase }
            return node
        }
        let running = add("running", .running, .running)
        _ = state.runQueue.take(running.handle)
        let cancelled = Counter()
        running.execution = Execution(cancel: { cancelled.increment() }, startedAt: .zero, pausedSince: nil)
        let runTask = Task<Void, Never> {}
        running.runTask = runTask
        _ = add("suspended", .paused, .suspended)
        _ = add("queued", .pending, .queued)
        _ = add("queued unowned", .pending, owner: nil, .queued)
        let delayed = add("delayed", .pending, .delayed)
        _ = state.timers.add(.retry(delayed.handle), at: .seconds(30))
        _ = add("paused", .paused, .idle)
        _ = add("done", .completed, .idle)
        let before = state.changeSequence

        let begun = state.beginShutdown(now: Date(timeIntervalSince1970: 2_000))

        var roots: [String: Root] = [:]
        for root in state.roots {
            roots[root.record.id] = Root(
                status: root.record.status, owner: root.record.ownerID, phase: root.phase,
                stopped: root.stopReason == .shutdown)
        }
        #expect(
            roots == [
                // Its code records a release when it stops.
                "running": Root(status: .running, owner: "owner", phase: .running, stopped: true),
                "suspended": Root(status: .paused, owner: "owner", phase: .suspended, stopped: true),
                // Handed back now: any worker may take it.
                "queued": Root(status: .pending, owner: nil, phase: .idle, stopped: false),
                "queued unowned": Root(status: .pending, owner: nil, phase: .idle, stopped: false),
                "delayed": Root(status: .pending, owner: nil, phase: .idle, stopped: false),
                // A paused one stays paused, given back.
                "paused": Root(status: .paused, owner: nil, phase: .idle, stopped: false),
                "done": Root(status: .completed, owner: "owner", phase: .idle, stopped: false),
            ])
        #expect(state.isShutDown && state.runQueue.queued == 0 && state.timers.earliest == nil)
        // The three owned roots handed back are written (silently); the unowned one is the store's already.
        #expect(Set(state.dirtyNodes.map(\.record.id)) == ["queued", "delayed", "paused"])
        #expect(state.changeSequence > before)
        #expect(state.events.isEmpty, "a hand-back at a stop writes no event")
        // The running root's code is cancelled once the lock is released, and its run task waited for.
        #expect(cancelled.count == 0)
        begun.cancellation.run()
        #expect(cancelled.count == 1)
        #expect(begun.running.count == 1)
        #expect(
            state.dispatch(now: Date(timeIntervalSince1970: 2_000), monotonicNow: .seconds(1)).launches.isEmpty,
            "a stopped executor starts nothing")
    }

    /// A pending job of this owner, queued and given a slot by a dispatch (its run task not made: no engine here).
    static func dispatchedRoot(_ id: String, in state: inout GraphState) -> (TaskNode, Dispatch) {
        let node = state.addRoot(
            TaskRecord(
                id: id, name: id, kind: "job", options: .interactive, status: .pending, ownerID: "owner",
                createdAt: Date(timeIntervalSince1970: 1_000)),
            stored: true)
        node.body = { _ in nil }
        state.enqueue(node)
        return (node, state.dispatch(now: Date(timeIntervalSince1970: 1_500), monotonicNow: .seconds(1)))
    }

    /// Stop 32's CI: a root given a slot just before the stop, whose run task was not made yet, was not waited for;
    /// its start committed, its code was cancelled as the task was made, and the process exited before its release
    /// was written (the store showed it `running` under a stopped owner). The stop now waits for it too.
    @Test func aRootGivenASlotButNotLaunchedYetIsWaitedFor() {
        var state = GraphState.alone(slots: 2)
        let (node, dispatch) = Self.dispatchedRoot("starting", in: &state)
        #expect(dispatch.launches == [node.handle])
        #expect(node.phase == .running && node.runTask == nil)

        let begun = state.beginShutdown(now: Date(timeIntervalSince1970: 2_000))

        #expect(begun.running.isEmpty)
        #expect(begun.unlaunched == [node.handle], "waited for once its run task is made")
        #expect(node.stopReason == .shutdown)
        // Made after the stop began: cancelled at once.
        let task = Task<Void, Never> {}
        let launched = state.launched(node.handle, task)
        #expect(launched.cancel)
        #expect(node.runTask != nil && state.unlaunched.isEmpty)
    }

    /// A root launched before the stop is waited for by its run task, not as unlaunched.
    @Test func aLaunchedRootIsWaitedForByItsRunTask() {
        var state = GraphState.alone(slots: 1)
        let (node, _) = Self.dispatchedRoot("running", in: &state)
        let launched = state.launched(node.handle, Task<Void, Never> {})
        #expect(!launched.cancel && launched.waiter == nil)

        let begun = state.beginShutdown(now: Date(timeIntervalSince1970: 2_000))

        #expect(begun.running.count == 1 && begun.unlaunched.isEmpty)
    }
}
