import Foundation
import ProgressionTestSupport
import Testing

@testable import Progression

/// The timer loop's deadlines on the graph alone, with chosen times on the executor's clock (no clock runs): a
/// timeout stops code that ran its time, paused time not counted; a due retry is queued for a slot, or settles when
/// the root was paused meanwhile or the executor is stopping.
struct TimerFiringTests {
    static let date = Date(timeIntervalSince1970: 2_000)

    struct Graph {
        var state: GraphState
        let root: TaskNode

        init(status: TaskStatus = .running, timeout: Duration? = nil, slotTaken: Bool = false, kind: String? = "job") {
            state = GraphState.alone(slots: 1)
            state.schedulerEnabled = true  // a started executor: it claims, so it may hand jobs to the fleet
            var options = TaskOptions.interactive
            options.timeout = timeout
            root = state.addRoot(
                TaskRecord(
                    id: "root", name: "root", kind: kind, options: options, status: status, ownerID: "owner",
                    createdAt: Date(timeIntervalSince1970: 1_000)),
                stored: true)
            root.body = { _ in nil }
            if slotTaken {
                let other = state.addRoot(
                    TaskRecord(
                        id: "other", name: "other", kind: "job", status: .running, ownerID: "owner",
                        createdAt: Date(timeIntervalSince1970: 1_000)),
                    stored: true)
                _ = state.runQueue.take(other.handle)
                other.phase = .running
            }
        }

        /// The root's code runs since `startedAt`, paused `pausedTotal` so far, and paused now since `pausedSince`;
        /// its timeout armed at `startedAt + timeout`. Returns a counter of its cancellations.
        mutating func run(startedAt: Duration, pausedTotal: Duration = .zero, pausedSince: Duration? = nil) -> Counter {
            let cancelled = Counter()
            _ = state.runQueue.take(root.handle)
            root.phase = .running
            root.execution = Execution(
                cancel: { cancelled.increment() }, startedAt: startedAt, pausedSince: pausedSince,
                pausedTotal: pausedTotal)
            if let timeout = root.record.options.timeout {
                _ = state.timers.add(.timeout(root.handle), at: startedAt + timeout)
            }
            return cancelled
        }

        mutating func fire(at now: Duration) -> GraphState.TimersFired {
            state.fireTimers(now: TimerFiringTests.date, monotonicNow: now)
        }
    }

    /// (seconds paused before now, paused now since, fired at) for a 3 s timeout armed at 0: whether the code is
    /// stopped, and when the deadline is set again otherwise.
    static let timeouts: [(pausedTotal: Int, pausedSince: Int?, firedAt: Int, stops: Bool, nextDeadline: Int?)] = [
        (0, nil, 3, true, nil),  // ran its 3 s
        (0, nil, 2, false, 3),  // not due yet: nothing happens, the deadline stays
        (2, nil, 3, false, 5),  // paused 2 s: 1 s ran, 2 s left
        (2, nil, 5, true, nil),  // paused 2 s, then 3 s ran
        (0, 1, 3, false, 5),  // paused since 1 s: 1 s ran; looked at again 2 s later
    ]

    @Test(arguments: timeouts.indices)
    func aTimeoutStopsCodeOnlyOnceItsActiveTimeRanOut(row: Int) {
        let row = Self.timeouts[row]
        var graph = Graph(timeout: .seconds(3))
        let cancelled = graph.run(
            startedAt: .zero, pausedTotal: .seconds(row.pausedTotal), pausedSince: row.pausedSince.map { .seconds($0) })
        let fired = graph.fire(at: .seconds(row.firedAt))
        fired.cancellation.run()
        #expect((cancelled.count == 1) == row.stops)
        #expect((graph.root.stopReason == .timedOut(.seconds(3))) == row.stops)
        #expect(graph.state.timers.earliest == row.nextDeadline.map { .seconds($0) })
        if row.nextDeadline != nil, row.firedAt >= 3 {
            #expect(fired.dispatch.effects.wakesTimers, "a deadline set again is the loop's next wake")
        }
    }

    /// Where a root whose retry came due stands after the timers fired.
    struct Retried: Equatable {
        var phase: RootPhase
        var status: TaskStatus
        var launched: Bool
        /// Given to the fleet: released in the store (no owner), leaving memory once that is committed.
        var handedOff = false
    }

    static let retries: [(String, TaskStatus, Bool, Bool, Retried)] = [
        ("due, a slot free: it starts", .pending, false, false, Retried(phase: .running, status: .running, launched: true)),
        ("due, no slot free: the fleet runs it", .pending, true, false, Retried(phase: .delayed, status: .pending, launched: false, handedOff: true)),
        ("paused while it waited: idle", .paused, false, false, Retried(phase: .idle, status: .paused, launched: false)),
        ("the executor stops: idle", .pending, false, true, Retried(phase: .idle, status: .pending, launched: false)),
    ]

    @Test(arguments: retries)
    func aDueRetryIsQueuedOrSettles(
        _ what: String, status: TaskStatus, slotTaken: Bool, shutDown: Bool, expected: Retried
    ) {
        var graph = Graph(status: status, slotTaken: slotTaken)
        graph.root.phase = .delayed
        _ = graph.state.timers.add(.retry(graph.root.handle), at: .seconds(10))
        graph.state.isShutDown = shutDown
        #expect(graph.fire(at: .seconds(9)).dispatch.launches.isEmpty, "not due yet")
        #expect(graph.root.phase == .delayed)
        let fired = graph.fire(at: .seconds(10))
        #expect(
            Retried(
                phase: graph.root.phase, status: graph.root.record.status,
                launched: fired.dispatch.launches == [graph.root.handle],
                handedOff: graph.root.handOffSequence != nil) == expected, "\(what)")
        #expect(graph.state.timers.earliest == nil)
        if expected.handedOff {
            #expect(graph.root.record.ownerID == nil, "released in the store")
            #expect(graph.state.endedRuns.map(\.run.forget) == [true], "it leaves memory once that is committed")
        }
    }

    /// A root queued for a kind paused here does not hold the free slot: a due retry of another kind runs on it.
    @Test func aDueRetryTakesAFreeSlotThatAPausedKindsQueuedRootCannot() {
        var graph = Graph(status: .pending)
        graph.state.pausedKinds = ["held"]
        let queued = graph.state.addRoot(
            TaskRecord(id: "queued", name: "queued", kind: "held", status: .pending, ownerID: "owner",
                createdAt: Date(timeIntervalSince1970: 500)),
            stored: true)
        queued.body = { _ in nil }
        graph.state.enqueue(queued)
        graph.root.phase = .delayed
        _ = graph.state.timers.add(.retry(graph.root.handle), at: .seconds(10))
        let fired = graph.fire(at: .seconds(10))
        #expect(fired.dispatch.launches == [graph.root.handle], "it starts here")
        #expect(graph.root.handOffSequence == nil)
    }

    /// A closure task due for its retry while no slot is free waits in the queue: no other worker can run it.
    @Test func aDueRetryOfAClosureTaskWaitsHereForASlot() {
        var graph = Graph(status: .pending, slotTaken: true, kind: nil)
        graph.root.phase = .delayed
        _ = graph.state.timers.add(.retry(graph.root.handle), at: .seconds(10))
        _ = graph.fire(at: .seconds(10))
        #expect(graph.root.phase == .queued && graph.root.handOffSequence == nil)
        #expect(graph.root.record.ownerID == "owner")
    }
}
