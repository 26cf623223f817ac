import Foundation
import ProgressionTestSupport
import Testing

@testable import Progression

/// What the graph's changes leave to do outside its lock, checked on the state alone (no executor, no store, a manual
/// clock): each change returns its effects, so a table says what each one returns. A change that lost an effect (a
/// caller of `waitForTask` never resumed, a timer loop left asleep past a retry) fails here.
struct GraphEffectsTests {
    /// A graph with one root (stored, running, its code ended), and a caller of `waitForTask` waiting for it.
    struct Graph {
        var state: GraphState
        let root: TaskNode

        init(status: TaskStatus = .running) {
            state = GraphState.alone(slots: 2)
            root = state.addRoot(
                TaskRecord(
                    id: "root", name: "root", kind: "job", status: status, ownerID: "owner",
                    createdAt: Date(timeIntervalSince1970: 1_000)),
                stored: true)
            root.phase = .running
        }
    }

    /// Runs `change` on `graph` while a caller waits for its root to become idle; returns what `change` returned and
    /// whether that caller was among the effects (it is resumed either way, so that no continuation leaks).
    static func whileWaitingForIdle(
        _ graph: inout Graph, _ change: (inout GraphState) -> GraphEffects
    ) async -> (effects: GraphEffects, resumedWaiter: Bool) {
        var effects = GraphEffects()
        var resumed = false
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            graph.root.idleWaiters.append(waiter)
            effects = change(&graph.state)
            resumed = effects.idleWaiters.count == 1
            if resumed {
                for waiter in effects.idleWaiters { waiter.resume() }
            } else {
                graph.root.idleWaiters.removeAll()
                waiter.resume()
            }
        }
        return (effects, resumed)
    }

    enum Ending: String, CaseIterable, Sendable {
        /// Another owner took it.
        case lost
        /// It sleeps, unowned: any worker claims it when due.
        case forgotten
        /// No retry: it is done here.
        case done
        /// A retry before any deadline the timer loop knows.
        case retryEarliest
        /// A retry after a deadline the timer loop waits for already.
        case retryLater
        /// A retry while the executor shuts down: not waited for.
        case retryDuringShutdown
    }

    struct Settled: Equatable, CustomStringConvertible {
        var inMemory: Bool
        var phase: RootPhase?
        var resumesWaiter: Bool
        var wakesTimers: Bool

        var description: String {
            "in memory \(inMemory), phase \(phase.map { "\($0)" } ?? "-"), resumes waiter \(resumesWaiter), "
                + "wakes timers \(wakesTimers)"
        }
    }

    static let settling: [(Ending, Settled)] = [
        (.lost, Settled(inMemory: false, phase: nil, resumesWaiter: true, wakesTimers: false)),
        (.forgotten, Settled(inMemory: false, phase: nil, resumesWaiter: true, wakesTimers: false)),
        (.done, Settled(inMemory: true, phase: .idle, resumesWaiter: true, wakesTimers: false)),
        (.retryEarliest, Settled(inMemory: true, phase: .delayed, resumesWaiter: false, wakesTimers: true)),
        (.retryLater, Settled(inMemory: true, phase: .delayed, resumesWaiter: false, wakesTimers: false)),
        (.retryDuringShutdown, Settled(inMemory: true, phase: .idle, resumesWaiter: true, wakesTimers: false)),
    ]

    @Test("settling an ended run returns who waited for it and whether the timer loop must wake", arguments: settling)
    func settlingARun(ending: Ending, expected: Settled) async {
        var graph = Graph()
        let handle = graph.root.handle
        let run: EndedRun
        switch ending {
        case .lost: run = EndedRun(handle: handle, retryAt: nil, lost: true)
        case .forgotten: run = EndedRun(handle: handle, retryAt: nil, lost: false, forget: true)
        case .done: run = EndedRun(handle: handle, retryAt: nil, lost: false)
        case .retryEarliest: run = EndedRun(handle: handle, retryAt: .seconds(5), lost: false)
        case .retryLater:
            _ = graph.state.timers.add(.timeout(99), at: .seconds(2))
            run = EndedRun(handle: handle, retryAt: .seconds(5), lost: false)
        case .retryDuringShutdown:
            graph.state.isShutDown = true
            run = EndedRun(handle: handle, retryAt: .seconds(5), lost: false)
        }
        let (effects, resumed) = await Self.whileWaitingForIdle(&graph) { $0.settle(run) }
        let inMemory = graph.state.node(id: "root") != nil
        let settled = Settled(
            inMemory: inMemory, phase: inMemory ? graph.root.phase : nil, resumesWaiter: resumed,
            wakesTimers: effects.wakesTimers)
        #expect(settled == expected, "\(ending)")
        #expect(graph.root.runTask == nil)
    }

    @Test("ended runs settle once their end is committed, in order, and a commit returns their effects")
    func endedRunsSettleWithTheirCommit() async {
        var graph = Graph()
        graph.state.changeSequence = 10
        graph.state.endedRuns = [(sequence: 7, run: EndedRun(handle: graph.root.handle, retryAt: nil, lost: false))]
        // A commit below the end's sequence settles nothing.
        let (early, earlyResumed) = await Self.whileWaitingForIdle(&graph) { state in
            state.committed(upTo: 6).effects
        }
        #expect(!earlyResumed && early.isEmpty)
        #expect(graph.state.endedRuns.count == 1)
        #expect(graph.root.phase == .running)
        // The commit that holds it settles it: its waiter comes back with the commit.
        let (effects, resumed) = await Self.whileWaitingForIdle(&graph) { state in
            state.committed(upTo: 7).effects
        }
        #expect(resumed && !effects.wakesTimers)
        #expect(graph.state.endedRuns.isEmpty)
        #expect(graph.root.phase == .idle)
    }

    @Test("a write the store rejected: a root whose code is not running leaves memory and its waiter is returned")
    func rejectedRootThatIsNotRunning() async {
        var graph = Graph(status: .pending)
        graph.root.phase = .queued
        let (effects, resumed) = await Self.whileWaitingForIdle(&graph) { $0.markRejected(["root"]) }
        #expect(resumed && !effects.wakesTimers)
        #expect(graph.state.node(id: "root") == nil)
        #expect(graph.root.stopReason == .leaseLost)
    }

    @Test("a write the store rejected: a root whose code runs is told to stop and stays until its code ends")
    func rejectedRootThatRuns() async {
        var graph = Graph()
        graph.root.execution = Execution(cancel: {}, startedAt: .zero, pausedSince: nil)
        let (effects, resumed) = await Self.whileWaitingForIdle(&graph) { $0.markRejected(["root", "unknown"]) }
        #expect(!resumed && effects.isEmpty)
        #expect(graph.state.node(id: "root") != nil)
        #expect(graph.root.stopReason == .leaseLost)
    }

    @Test(
        "a claimed job whose next attempt is later waits for it, and wakes the timer loop only when it is the earliest",
        arguments: [false, true])
    func rehydratedRetryWakesTheTimerLoop(anEarlierDeadlineIsKnown: Bool) {
        var state = GraphState.alone(slots: 2)
        let clock = ManualClock()
        let now = clock.wallClockNow
        if anEarlierDeadlineIsKnown { _ = state.timers.add(.timeout(99), at: .seconds(1)) }
        let record = TaskRecord(
            id: "claimed", name: "claimed", kind: "job", status: .pending, ownerID: "owner", createdAt: now,
            nextAttemptAt: now.addingTimeInterval(30))
        let effects = state.rehydrate(
            [record], previousOwner: "dead", body: { _ in nil }, owner: "owner", now: now, maxInterruptions: 3,
            clock: TaskClock(clock))
        #expect(effects.wakesTimers == !anEarlierDeadlineIsKnown)
        #expect(effects.idleWaiters.isEmpty)
        #expect(state.node(id: "claimed")?.phase == .delayed)
        #expect(state.runQueue.queued == 0)
    }
}
