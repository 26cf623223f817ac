import Foundation
import Testing

@testable import Progression

/// A user's pause, resume, cancel and run-now, decided on the graph alone (no executor, no store): for each phase a
/// root can be in, the table says what the change returns, the root's status and phase after it, whether the root
/// holds the only slot, and which roots it gave a slot to. A change that kept a slot for a paused job, ran a resumed
/// root on no slot, or left a cancelled queued root in the queue fails here.
struct UserChangeTests {
    /// Where the root stands before the change. Every graph has one slot and a second root, `other`.
    enum Start: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Its code runs on the slot; `other` waits in the queue for it.
        case running
        /// Paused while its code ran (the code waits at a report); the slot is free.
        case suspended
        /// Paused while its code ran; `other` runs on the slot.
        case suspendedSlotTaken
        /// Waiting in the queue; `other` runs on the slot.
        case queued
        /// Paused before its code started; the slot is free.
        case pausedBeforeStart
        /// Waiting for its next attempt's time; the slot is free.
        case delayed
        /// Completed.
        case finished

        var testDescription: String { rawValue }
    }

    /// What a change did.
    struct Outcome: Equatable, CustomStringConvertible {
        /// `commit`, `stop`, `commit, then idle`, or the refusal's case.
        var action: String
        var status: TaskStatus
        var phase: RootPhase
        var holdsSlot: Bool
        /// The roots given a slot by the change, by id.
        var launched: [String] = []

        var description: String {
            "\(action); \(status), \(phase), \(holdsSlot ? "holds" : "does not hold") the slot, launched \(launched)"
        }
    }

    struct Graph {
        var state: GraphState
        let root: TaskNode
        let other: TaskNode

        /// `kind`: the root's job kind; `nil`, a closure task (which only this executor can run).
        init(_ start: Start, options: TaskOptions = .interactive, kind: String? = "job") {
            state = GraphState.alone(slots: 1)
            state.schedulerEnabled = true  // a started executor: it claims, so it may hand jobs to the fleet
            let created = Date(timeIntervalSince1970: 1_000)
            func record(_ id: String, _ status: TaskStatus) -> TaskRecord {
                TaskRecord(
                    id: id, name: id, kind: "job", options: options, status: status, ownerID: "owner",
                    createdAt: created, startedAt: status == .pending ? nil : created,
                    finishedAt: status.isFinished ? created : nil)
            }
            let otherStatus: TaskStatus =
                switch start {
                case .running: .pending
                case .suspendedSlotTaken, .queued: .running
                default: .completed
                }
            let rootStatus: TaskStatus =
                switch start {
                case .running: .running
                case .suspended, .suspendedSlotTaken, .pausedBeforeStart: .paused
                case .queued, .delayed: .pending
                case .finished: .completed
                }
            var rootRecord = record("root", rootStatus)
            rootRecord.kind = kind
            if start == .delayed { rootRecord.nextAttemptAt = created.addingTimeInterval(60) }
            root = state.addRoot(rootRecord, stored: true)
            other = state.addRoot(record("other", otherStatus), stored: true)
            for node in [root, other] { node.body = { _ in nil } }
            switch otherStatus {
            case .running:
                _ = state.runQueue.take(other.handle)
                other.phase = .running
            case .pending: state.enqueue(other)
            default: break
            }
            switch start {
            case .running:
                _ = state.runQueue.take(root.handle)
                root.phase = .running
            case .suspended, .suspendedSlotTaken: root.phase = .suspended
            case .queued: state.enqueue(root)
            case .delayed: root.phase = .delayed
            case .pausedBeforeStart, .finished: root.phase = .idle
            }
        }

        mutating func apply(_ change: UserChange, to id: String = "root") -> Outcome {
            let action: String
            var launched: [NodeHandle] = []
            do {
                switch try state.apply(
                    change, to: id, now: Date(timeIntervalSince1970: 2_000), monotonicNow: .seconds(10))
                {
                case .elsewhere: action = "elsewhere"
                case .commit(_, let dispatch):
                    action = "commit"
                    launched = dispatch.launches
                    for wake in dispatch.wakes { wake.resume() }
                case .stop: action = "stop"
                case .commitThenSettleIdle: action = "commit, then idle"
                case .commitAndStop: action = "commit, then stop"
                case .afterHandOff: action = "after the hand-off"
                }
            } catch {
                action =
                    switch error {
                    case .invalidState: "invalidState"
                    case .notPausable: "notPausable"
                    case .notCancellable: "notCancellable"
                    default: "\(error)"
                    }
            }
            return Outcome(
                action: action, status: root.record.status, phase: root.phase,
                holdsSlot: state.runQueue.slots.contains(root.handle),
                launched: launched.compactMap { state.nodes[$0]?.record.id })
        }
    }

    static let table: [(Start, UserChange, Outcome)] = [
        // A running root: a pause gives its slot to the root that waited; a cancel stops its code (its end is
        // recorded when the code stops); there is nothing to resume and no time to skip.
        (.running, .pause, Outcome(action: "commit", status: .paused, phase: .suspended, holdsSlot: false, launched: ["other"])),
        (.running, .resume, Outcome(action: "invalidState", status: .running, phase: .running, holdsSlot: true)),
        (.running, .cancel, Outcome(action: "stop", status: .running, phase: .running, holdsSlot: true)),
        (.running, .runNow, Outcome(action: "invalidState", status: .running, phase: .running, holdsSlot: true)),
        // Paused while its code ran: a resume takes the free slot and the code goes on at once.
        (.suspended, .pause, Outcome(action: "commit", status: .paused, phase: .suspended, holdsSlot: false)),
        (.suspended, .resume, Outcome(action: "commit", status: .running, phase: .running, holdsSlot: true)),
        (.suspended, .cancel, Outcome(action: "stop", status: .paused, phase: .suspended, holdsSlot: false)),
        (.suspended, .runNow, Outcome(action: "invalidState", status: .paused, phase: .suspended, holdsSlot: false)),
        // The same with the slot taken: a resumed job goes to the fleet — pending, its paused code stopped (its end
        // releases it in the store for any worker with a free slot); it takes no place in this queue.
        (.suspendedSlotTaken, .resume, Outcome(action: "commit, then stop", status: .pending, phase: .suspended, holdsSlot: false)),
        (.suspendedSlotTaken, .cancel, Outcome(action: "stop", status: .paused, phase: .suspended, holdsSlot: false)),
        (.suspendedSlotTaken, .pause, Outcome(action: "commit", status: .paused, phase: .suspended, holdsSlot: false)),
        (.suspendedSlotTaken, .runNow, Outcome(action: "invalidState", status: .paused, phase: .suspended, holdsSlot: false)),
        // Waiting in the queue: a pause or a cancel needs no code to stop; a cancelled root leaves the queue.
        (.queued, .pause, Outcome(action: "commit", status: .paused, phase: .queued, holdsSlot: false)),
        (.queued, .resume, Outcome(action: "invalidState", status: .pending, phase: .queued, holdsSlot: false)),
        (.queued, .cancel, Outcome(action: "commit, then idle", status: .cancelled, phase: .idle, holdsSlot: false)),
        (.queued, .runNow, Outcome(action: "invalidState", status: .pending, phase: .queued, holdsSlot: false)),
        // Paused before it started: a resume queues it, and the free slot starts it.
        (.pausedBeforeStart, .resume, Outcome(action: "commit", status: .running, phase: .running, holdsSlot: true, launched: ["root"])),
        (.pausedBeforeStart, .cancel, Outcome(action: "commit, then idle", status: .cancelled, phase: .idle, holdsSlot: false)),
        (.pausedBeforeStart, .pause, Outcome(action: "commit", status: .paused, phase: .idle, holdsSlot: false)),
        (.pausedBeforeStart, .runNow, Outcome(action: "invalidState", status: .paused, phase: .idle, holdsSlot: false)),
        // Waiting for a time: run now starts it on the free slot; a cancel ends it where it waits.
        (.delayed, .runNow, Outcome(action: "commit", status: .running, phase: .running, holdsSlot: true, launched: ["root"])),
        (.delayed, .cancel, Outcome(action: "commit, then idle", status: .cancelled, phase: .idle, holdsSlot: false)),
        // A pause keeps it waiting for its time, paused (its time then finds it paused and leaves it idle).
        (.delayed, .pause, Outcome(action: "commit", status: .paused, phase: .delayed, holdsSlot: false)),
        (.delayed, .resume, Outcome(action: "invalidState", status: .pending, phase: .delayed, holdsSlot: false)),
        // Finished: every change is refused, and nothing changes.
        (.finished, .pause, Outcome(action: "invalidState", status: .completed, phase: .idle, holdsSlot: false)),
        (.finished, .resume, Outcome(action: "invalidState", status: .completed, phase: .idle, holdsSlot: false)),
        (.finished, .cancel, Outcome(action: "invalidState", status: .completed, phase: .idle, holdsSlot: false)),
        (.finished, .runNow, Outcome(action: "invalidState", status: .completed, phase: .idle, holdsSlot: false)),
    ]

    @Test(arguments: table)
    func aChangeDoesWhatItsRowSays(start: Start, change: UserChange, expected: Outcome) {
        var graph = Graph(start)
        let before = graph.state.changeSequence
        let outcome = graph.apply(change)
        #expect(outcome == expected)
        #expect((graph.root.stopReason == .cancelled) == (expected.action == "stop"), "only a stop asks code to stop")
        if expected.action.hasPrefix("commit") {
            #expect(graph.state.changeSequence > before, "a change that commits must queue a write")
        } else {
            #expect(graph.state.changeSequence == before, "a refused change or a stop must write nothing yet")
        }
    }

    /// A closure task resumed while the slot is taken waits in the queue, pending, and its code with it: no other
    /// worker can run it.
    @Test func aResumedClosureTaskWaitsHereForTheSlot() {
        var graph = Graph(.suspendedSlotTaken, kind: nil)
        #expect(
            graph.apply(.resume) == Outcome(action: "commit", status: .pending, phase: .queued, holdsSlot: false))
        #expect(graph.root.stopReason == nil && graph.root.waitsForSlot)
    }

    /// An executor that was never started claims nothing: a resumed job waits for its slot there.
    @Test func anExecutorThatDoesNotClaimKeepsItsResumedJob() {
        var graph = Graph(.suspendedSlotTaken)
        graph.state.schedulerEnabled = false
        #expect(
            graph.apply(.resume) == Outcome(action: "commit", status: .pending, phase: .queued, holdsSlot: false))
        #expect(graph.root.stopReason == nil)
    }

    /// A resumed job handed to the fleet is stopped as handed off, its code kept paused until it ends; any change
    /// while its hand-off is under way waits for that commit and is then made where the job is.
    @Test func aHandedOffJobIsStoppedAndChangesWaitForItsHandOff() {
        var graph = Graph(.suspendedSlotTaken)
        _ = graph.apply(.resume)
        #expect(graph.root.stopReason == .handedOff && graph.root.isEffectivelyPaused)
        graph.root.handOffSequence = graph.state.changeSequence
        for change in UserChange.allCases {
            #expect(graph.apply(change).action == "after the hand-off", "\(change)")
        }
    }

    /// The table has every change on every phase, once.
    @Test func theTableCoversEveryChangeOnEveryPhase() {
        let pairs = Set(Self.table.map { "\($0.0.rawValue) \($0.1.rawValue)" })
        #expect(pairs.count == Self.table.count)
        #expect(pairs.count == Start.allCases.count * UserChange.allCases.count)
    }

    /// A root whose options forbid a change is refused it, with the options' reason, and nothing changes.
    @Test(arguments: [
        (TaskOptions.default, UserChange.pause, "notPausable"), (.immutable, .cancel, "notCancellable"),
    ])
    func optionsThatForbidAChangeRefuseIt(options: TaskOptions, change: UserChange, refusal: String) {
        var graph = Graph(.running, options: options)
        let before = graph.state.changeSequence
        #expect(
            graph.apply(change)
                == Outcome(action: refusal, status: .running, phase: .running, holdsSlot: true))
        #expect(graph.state.changeSequence == before)
        #expect(graph.root.stopReason == nil)
    }

    /// A retry, in its two steps: the check before waiting for the root to be idle, and the retry of an idle root.
    /// A failed root runs again at once on the free slot, attempt 2; a running root is refused at once unless it is
    /// being stopped (its run is then waited for); a root whose run has not ended is not retried.
    @Test func aRetryRunsAnIdleEndedRootAgainAndRefusesARunningOne() throws {
        var failed = Graph(.finished)
        failed.root.record.status = .failed
        failed.root.record.options.canRetry = true
        try failed.state.checkRetry("root")
        guard
            case .commit(_, let dispatch) = try failed.state.retry(
                "root", now: Date(timeIntervalSince1970: 2_000), monotonicNow: .seconds(10))
        else {
            Issue.record("a retry commits")
            return
        }
        #expect(dispatch.launches == [failed.root.handle])
        #expect(failed.root.record.status == .running && failed.root.record.attempt == 2)
        #expect(failed.state.runQueue.slots == [failed.root.handle])

        var running = Graph(.running)
        #expect(throws: ProgressionError.self) { try running.state.checkRetry("root") }
        running.root.stopReason = .cancelled
        try running.state.checkRetry("root")
        #expect(throws: ProgressionError.self) {
            try running.state.retry("root", now: Date(timeIntervalSince1970: 2_000), monotonicNow: .seconds(10))
        }
        #expect(running.root.record.attempt == 1)
        #expect(throws: ProgressionError.self) { try running.state.checkRetry("unknown") }
    }

    /// A change of a task this executor does not hold is made where the task is, and changes nothing here.
    @Test(arguments: UserChange.allCases)
    func aTaskNotInMemoryIsChangedElsewhere(change: UserChange) {
        var graph = Graph(.running)
        let before = graph.state.changeSequence
        #expect(graph.apply(change, to: "unknown").action == "elsewhere")
        #expect(graph.state.changeSequence == before)
        #expect(graph.state.runQueue.slots == [graph.root.handle])
    }

    /// A root paused while its code waited for a slot goes on waiting where it is when resumed: its code going on
    /// then would run a root on no slot. The slot, once free, lets its code go on. (A closure task: a job goes to the
    /// fleet instead, `aHandedOffJobIsStoppedAndChangesWaitForItsHandOff`.)
    @Test func aRootResumedTwiceWhileWaitingForASlotRunsOnceTheSlotIsFree() {
        var graph = Graph(.suspendedSlotTaken, kind: nil)
        #expect(graph.apply(.resume).phase == .queued)
        #expect(graph.apply(.pause) == Outcome(action: "commit", status: .paused, phase: .queued, holdsSlot: false))
        #expect(graph.apply(.resume) == Outcome(action: "commit", status: .pending, phase: .queued, holdsSlot: false))
        #expect(graph.state.runQueue.queued == 1, "resumed twice, it waits in the queue once")
        // The other root pauses: the slot goes to the waiting root, whose code goes on (it is not launched again).
        let outcome = graph.apply(.pause, to: "other")
        #expect(outcome == Outcome(action: "commit", status: .running, phase: .running, holdsSlot: true))
        #expect(graph.root.waitsForSlot == false)
    }

    /// A paused running root's slot is free for another: pausing every running root never stalls the queue. (A
    /// closure task waits for the slot here; a job would go to the fleet.)
    @Test func pausingARunningRootStartsTheNextOneAndResumingItWaitsForASlot() {
        var graph = Graph(.running, kind: nil)
        _ = graph.apply(.pause)
        #expect(graph.state.runQueue.slots == [graph.other.handle])
        #expect(graph.apply(.resume) == Outcome(action: "commit", status: .pending, phase: .queued, holdsSlot: false))
        #expect(graph.root.waitsForSlot)
    }
}
