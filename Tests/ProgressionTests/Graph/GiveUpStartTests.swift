import Foundation
import Testing

@testable import Progression

/// A start given up on the graph alone (`GraphState.giveUpStart`): the slot always goes back; a root the store refused
/// leaves memory; and one that this executor's own claim took in the store meanwhile (its start, of a job queued here
/// unowned, refused for that very reason) is loaded again by the next claim pass rather than left in the store, owned
/// by a live executor that no longer knows it (found by `aWorkersOwnSubmitsWaitUnownedAndItHoldsOnlyWhatItRuns`,
/// which waited for such a job for a minute).
struct GiveUpStartTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var leaseLost: Bool
        var conflicted: Bool
        var reclaimed: Bool
        var staysInMemory: Bool
        var reloaded: Bool
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "not committed (the store failed): it stays to start again", leaseLost: false, conflicted: false,
            reclaimed: false, staysInMemory: true, reloaded: false),
        Row(
            name: "not committed, claimed by this executor meanwhile: it stays, its start written as this owner's",
            leaseLost: false, conflicted: false, reclaimed: true, staysInMemory: true, reloaded: false),
        Row(
            name: "refused, another worker took it", leaseLost: true, conflicted: false, reclaimed: false,
            staysInMemory: false, reloaded: false),
        Row(
            name: "refused, this executor's own claim took it", leaseLost: true, conflicted: false, reclaimed: true,
            staysInMemory: false, reloaded: true),
        Row(
            name: "its identity taken by another insert", leaseLost: false, conflicted: true, reclaimed: true,
            staysInMemory: false, reloaded: false),
    ]

    @Test(arguments: rows)
    func theSlotGoesBackAndARootItsOwnClaimTookIsLoadedAgain(_ row: Row) {
        var state = GraphState.alone(slots: 1)
        let created = Date(timeIntervalSince1970: 1_000)
        let root = state.addRoot(
            TaskRecord(id: "job", name: "job", kind: "k", status: .pending, createdAt: created), stored: true)
        root.body = { _ in nil }
        state.enqueue(root)
        _ = state.runQueue.take(root.handle)
        root.phase = .running
        if row.leaseLost { root.stopReason = .leaseLost }
        root.conflicted = row.conflicted
        root.reclaimed = row.reclaimed
        #expect(!state.runQueue.hasFreeSlot)

        let dispatch = state.giveUpStart(root.handle, now: created, monotonicNow: .seconds(1))

        #expect(state.runQueue.hasFreeSlot)
        #expect((state.node(id: "job") != nil) == row.staysInMemory)
        #expect(state.unloadedClaims.map(\.id) == (row.reloaded ? ["job"] : []))
        #expect(state.unloadedClaims.first?.previousOwner == (row.reloaded ? "owner" : nil))
        #expect(dispatch.effects.wakesClaims == row.reloaded)
    }

    /// The store refused the writes of two started roots: one another worker took, one this executor's own claim took
    /// while its start was on its way. Both stop; only the first is a loss to another owner (the warning a fleet's
    /// operator reads, and the chaos line counts, as a worker fenced while alive), the second is loaded again.
    @Test func aRootItsOwnClaimTookIsStoppedButNotCountedAsLost() {
        var state = GraphState.alone(slots: 2)
        let created = Date(timeIntervalSince1970: 1_000)
        var roots: [TaskNode] = []
        for id in ["theirs", "ours"] {
            let root = state.addRoot(
                TaskRecord(id: id, name: id, kind: "k", status: .pending, createdAt: created), stored: true)
            root.body = { _ in nil }
            state.enqueue(root)
            _ = state.runQueue.take(root.handle)
            root.phase = .running
            roots.append(root)
        }
        roots[1].reclaimed = true

        let stopped = state.stopLostRoots(["theirs", "ours", "gone"])

        #expect(stopped.lost == ["theirs"])
        #expect(stopped.reclaimed == ["ours"])
        #expect(roots.allSatisfy { $0.stopReason == .leaseLost })
        for root in roots { _ = state.giveUpStart(root.handle, now: created, monotonicNow: .seconds(1)) }
        #expect(state.unloadedClaims.map(\.id) == ["ours"])
        #expect(state.node(id: "theirs") == nil)
    }
}
