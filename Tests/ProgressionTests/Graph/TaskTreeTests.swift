import Foundation
import Testing

@testable import Progression

/// The tree in memory on the graph alone (`TaskTree.swift`): which finished roots a sweep removes, and what every
/// removal of a root (`removeRoots`, the one way out of memory) leaves behind.
struct TaskTreeTests {
    struct SweepRow: Sendable, CustomTestStringConvertible {
        var name: String
        var status: TaskStatus
        /// Seconds between the committed finish and now.
        var finishedAgo: Double?
        var phase: RootPhase = .idle
        var staged = false
        var inWriteSet = false
        var swept: Bool
        var testDescription: String { name }
    }

    /// Completed roots stay 60 s, failed and cancelled ones 120 s.
    static let sweepRows: [SweepRow] = [
        SweepRow(name: "completed, past its visibility", status: .completed, finishedAgo: 61, swept: true),
        SweepRow(name: "completed, within its visibility", status: .completed, finishedAgo: 59, swept: false),
        SweepRow(name: "failed, past the completed visibility only", status: .failed, finishedAgo: 61, swept: false),
        SweepRow(name: "failed, past its visibility", status: .failed, finishedAgo: 121, swept: true),
        SweepRow(name: "cancelled, past its visibility", status: .cancelled, finishedAgo: 121, swept: true),
        SweepRow(name: "running", status: .running, finishedAgo: nil, swept: false),
        SweepRow(name: "finished, no finish time", status: .completed, finishedAgo: nil, swept: false),
        SweepRow(
            name: "finished, its code still ending", status: .completed, finishedAgo: 61, phase: .running, swept: false),
        SweepRow(
            name: "finished, a transition not committed yet", status: .completed, finishedAgo: 61, staged: true,
            swept: false),
        SweepRow(
            name: "finished, columns left to write", status: .completed, finishedAgo: 61, inWriteSet: true, swept: false),
    ]

    @Test(arguments: sweepRows)
    func aSweepRemovesOnlyIdleRootsWhoseCommittedFinishIsPastItsVisibility(_ row: SweepRow) {
        var state = GraphState.alone(slots: 1)
        let now = Date(timeIntervalSince1970: 10_000)
        var record = TaskRecord(id: "job", name: "job", kind: "k", status: row.status, createdAt: now.addingTimeInterval(-600))
        record.finishedAt = row.finishedAgo.map { now.addingTimeInterval(-$0) }
        let root = state.addRoot(record, stored: true)
        root.phase = row.phase
        if row.staged { state.stage(root) }
        root.isInWriteSet = row.inWriteSet
        let kept = state.addRoot(
            TaskRecord(id: "other", name: "other", kind: "k", status: .running, createdAt: now), stored: true)

        let removed = state.sweepFinished(
            completedBefore: now.addingTimeInterval(-60), failedBefore: now.addingTimeInterval(-120))

        #expect(removed == (row.swept ? ["job"] : []))
        #expect((state.node(id: "job") != nil) == !row.swept)
        #expect(state.roots.map(\.record.id) == (row.swept ? ["other"] : ["job", "other"]))
        #expect(state.node(id: "other") === kept)
    }

    @Test func failedRootsStayWhenTheirVisibilityIsForever() {
        var state = GraphState.alone(slots: 1)
        let now = Date(timeIntervalSince1970: 10_000)
        var record = TaskRecord(id: "job", name: "job", kind: "k", status: .failed, createdAt: now)
        record.finishedAt = now.addingTimeInterval(-1_000_000)
        _ = state.addRoot(record, stored: true)
        #expect(state.sweepFinished(completedBefore: now, failedBefore: nil).isEmpty)
        #expect(state.node(id: "job") != nil)
    }

    /// A removed root's whole subtree leaves the indexes, is marked removed and unlinked, and its queued events go;
    /// another root and its events stay.
    @Test func aRemovedRootLeavesNothingOfItsTreeBehind() {
        var state = GraphState.alone(slots: 1)
        let now = Date(timeIntervalSince1970: 10_000)
        let root = state.addRoot(TaskRecord(id: "a", name: "a", kind: "k", status: .running, createdAt: now), stored: true)
        let child = state.attachStored(
            TaskRecord(id: "a.1", parentID: "a", rootID: "a", name: "step", status: .running, createdAt: now), to: root)
        let grandchild = state.attachStored(
            TaskRecord(id: "a.2", parentID: "a.1", rootID: "a", name: "sub", status: .running, createdAt: now), to: child)
        let other = state.addRoot(TaskRecord(id: "b", name: "b", kind: "k", status: .running, createdAt: now), stored: true)
        for id in ["a", "a.1", "a.2", "b"] {
            state.append(TaskEvent(taskID: id, rootID: String(id.prefix(1)), kind: .progress, at: now, attempt: 1))
        }
        #expect(root.childCount == 2)
        let version = state.version

        let removed = state.removeRoots([root])

        #expect(removed == ["a", "a.1", "a.2"])
        for node in [root, child, grandchild] {
            #expect(node.removed)
            #expect(node.children.isEmpty)
            #expect(state.node(id: node.record.id) == nil)
            #expect(state.node(node.handle) == nil)
        }
        #expect(state.roots.map(\.record.id) == ["b"])
        #expect(state.node(id: "b") === other)
        #expect(state.events.map(\.taskID) == ["b"])
        #expect(state.version > version)
        #expect(state.removeRoots([]).isEmpty)
    }
}
