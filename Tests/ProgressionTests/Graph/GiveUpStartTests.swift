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

    /// The store refused the writes of two started roots and a subtask: each stops, with its root; a task no longer in
    /// memory is not stopped again.
    @Test func theTasksTheStoreRefusedStopWithTheirRoots() {
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
        _ = state.attachStored(
            TaskRecord(id: "theirs.1", parentID: "theirs", rootID: "theirs", name: "step", createdAt: created), to: roots[0])

        let stopped = state.stopLostRoots(["theirs.1", "ours", "gone"])

        #expect(stopped.tasks.map(\.id) == ["theirs.1", "ours"])
        #expect(stopped.tasks.map(\.rootID) == ["theirs", "ours"])
        #expect(roots.allSatisfy { $0.stopReason == .leaseLost })
    }

    enum StoredRoot: Sendable {
        case owned(String), unowned, gone, unread
    }

    struct AttributionRow: Sendable, CustomTestStringConvertible {
        var name: String
        /// The root's row as read after the refusal.
        var stored: StoredRoot
        var own: Bool
        var holder: String?
        var testDescription: String { name }
    }

    /// Who took a refused root, from its row read after the refusal: only a row this executor owns is no loss (the
    /// chaos line counts the warning of a loss as a worker fenced while alive).
    static let attributionRows: [AttributionRow] = [
        AttributionRow(name: "this executor's own claim holds it", stored: .owned("me"), own: true, holder: nil),
        AttributionRow(name: "another owner holds it", stored: .owned("them"), own: false, holder: "held by them"),
        AttributionRow(name: "nobody holds it (an operator changed it)", stored: .unowned, own: false, holder: "unowned"),
        AttributionRow(name: "it is gone", stored: .gone, own: false, holder: "gone"),
        AttributionRow(name: "it could not be read", stored: .unread, own: false, holder: "not read"),
    ]

    @Test(arguments: attributionRows)
    func aRefusedRootIsALossUnlessThisExecutorsOwnClaimHoldsIt(_ row: AttributionRow) {
        // What was read of each root: its row's owner (`nil`: unowned), or `nil` for a row gone; a root not read is
        // not there.
        var rows: [String: String??] = [:]
        switch row.stored {
        case .owned(let owner): rows["job"] = .some(.some(owner))
        case .unowned: rows["job"] = .some(.some(nil))
        case .gone: rows["job"] = .some(nil)
        case .unread: break
        }
        let said = LostRootAttribution([("job.1", "job"), ("job", "job")], rows: rows, me: "me")
        #expect(said.own == (row.own ? ["job.1", "job"] : []))
        #expect(said.lost == (row.own ? [] : ["job.1", "job"]))
        #expect(said.holders["job"] == row.holder)
    }
}
