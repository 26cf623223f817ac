import Foundation
import ProgressionTestSupport
import Testing

@testable import Progression

/// A root this executor's claim took, its tree read, on the graph alone (`GraphState.loadClaimed`): what memory
/// does with it, for each way memory may know it already.
struct LoadClaimedTests {
    enum Known: Sendable {
        /// Not in memory.
        case none
        /// Ended here, and run again since (a child job its parent retried).
        case finishedHere
        /// Its previous run here is still ending.
        case runEnding
        /// A job of this worker's queue, unowned in the store.
        case queuedUnowned
        /// Given a slot, not launched yet (its start may be on its way, written for a job still unowned).
        case givenASlot
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var known: Known
        /// Memory's node afterwards is a new one, loaded from the tree.
        var loadedAfresh: Bool
        var reclaimed: Bool
        var queued: Bool
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "not in memory: loaded and queued", known: .none, loadedAfresh: true, reclaimed: false, queued: true),
        Row(
            name: "ended here and run again since: loaded afresh", known: .finishedHere, loadedAfresh: true,
            reclaimed: false, queued: true),
        Row(
            name: "its previous run still ending: marked, loaded once it settles", known: .runEnding,
            loadedAfresh: false, reclaimed: true, queued: false),
        Row(
            name: "a job of this worker's queue: this worker's now, queued", known: .queuedUnowned, loadedAfresh: false,
            reclaimed: false, queued: true),
        Row(
            name: "given a slot, its start on its way: this worker's, marked", known: .givenASlot, loadedAfresh: false,
            reclaimed: true, queued: false),
    ]

    @Test(arguments: rows)
    func aClaimedRootIsLoadedOrMarkedByWhatMemoryKnowsOfIt(_ row: Row) {
        var state = GraphState.alone(slots: 1)
        let clock = ManualClock()
        let now = clock.wallClockNow
        var known: TaskNode?
        func add(_ status: TaskStatus, owner: String?) -> TaskNode {
            let node = state.addRoot(
                TaskRecord(id: "job", name: "job", kind: "k", status: status, ownerID: owner, createdAt: now), stored: true)
            node.body = { _ in nil }
            return node
        }
        switch row.known {
        case .none:
            break
        case .finishedHere:
            known = add(.completed, owner: "owner")
        case .runEnding:
            known = add(.running, owner: "owner")
            known?.phase = .running
            known?.runTask = Task {}
        case .queuedUnowned:
            known = add(.pending, owner: nil)
        case .givenASlot:
            known = add(.pending, owner: nil)
            known?.phase = .running
        }
        // Holding the one slot, so that whatever is queued stays queued.
        let other = state.addRoot(
            TaskRecord(id: "other", name: "other", kind: "k", status: .running, ownerID: "owner", createdAt: now),
            stored: true)
        _ = state.runQueue.take(other.handle)
        let tree = [
            TaskRecord(id: "job", name: "job", kind: "k", status: .pending, attempt: 2, ownerID: "owner", createdAt: now)
        ]
        let claimed = ClaimedRoot(
            id: "job", status: .pending, kind: "k", priority: 0, createdAt: now, nextAttemptAt: nil, previousOwner: nil,
            tree: tree)

        _ = state.loadClaimed(
            claimed, tree: tree, body: { _ in nil }, kindOptions: nil, now: now, monotonicNow: TaskClock(clock).now(),
            maxInterruptions: 3, clock: TaskClock(clock))

        let node = state.node(id: "job")
        #expect(node != nil)
        #expect((node !== known) == row.loadedAfresh)
        #expect(node?.reclaimed == row.reclaimed)
        #expect(node?.record.ownerID == "owner")
        #expect(node?.committed.ownerID == "owner")
        #expect((node?.phase == .queued) == row.queued)
    }

    /// A claim pass on its way when a graceful stop began may take a job the stop had just released (its end
    /// committed, pending and unowned): the stop flushes once the pass has loaded what it took, and that job must then
    /// be nobody's in the store, not left this worker's where nothing will run it.
    @Test(arguments: [Known.none, .queuedUnowned])
    func aRootClaimedOnceTheStopBeganIsHandedBack(_ known: Known) {
        var state = GraphState.alone(slots: 2)
        let clock = ManualClock()
        let now = clock.wallClockNow
        if known == .queuedUnowned {
            let node = state.addRoot(
                TaskRecord(id: "job", name: "job", kind: "k", status: .pending, ownerID: nil, createdAt: now),
                stored: true)
            node.body = { _ in nil }
        }
        _ = state.beginShutdown(now: now)
        let tree = [TaskRecord(id: "job", name: "job", kind: "k", status: .pending, ownerID: "owner", createdAt: now)]
        let claimed = ClaimedRoot(
            id: "job", status: .pending, kind: "k", priority: 0, createdAt: now, nextAttemptAt: nil, previousOwner: nil,
            tree: tree)

        _ = state.loadClaimed(
            claimed, tree: tree, body: { _ in nil }, kindOptions: nil, now: now, monotonicNow: TaskClock(clock).now(),
            maxInterruptions: 3, clock: TaskClock(clock))

        let node = state.node(id: "job")
        #expect(node?.record.ownerID == nil, "handed back")
        #expect(node?.record.status == .pending)
        #expect(node?.pendingColumns.contains(.owner) == true, "the stop's flush writes it")
        #expect(node?.phase == .idle, "not waiting for a slot")
    }

    @Test func aClaimWhoseTreeCouldNotBeReadIsLoadedByALaterPass() {
        var state = GraphState.alone(slots: 1)
        let now = Date(timeIntervalSince1970: 1_000)
        let claimed = ClaimedRoot(
            id: "job", status: .pending, kind: "k", priority: 0, createdAt: now, nextAttemptAt: nil, previousOwner: nil)
        state.deferClaim(claimed)
        #expect(state.takeUnloadedClaims().map(\.id) == ["job"])
        #expect(state.takeUnloadedClaims().isEmpty)
    }
}
