import Foundation
import Testing

@testable import Progression

/// Snapshots on the graph alone (`Snapshots.swift`): a graph is published only when something changed, transitions
/// show once committed, a new root only once its insert is, progress at once, and a pause above a node shows in it.
struct SnapshotsTests {
    static let now = Date(timeIntervalSince1970: 1_000)

    @Test func aGraphIsPublishedOnlyWhenSomethingChanged() throws {
        var state = GraphState.alone(slots: 1)
        let root = state.addRoot(
            TaskRecord(id: "job", name: "job", kind: "k", status: .running, createdAt: Self.now), stored: true)
        let published = state.snapshotIfChanged()
        let first = try #require(published)
        #expect(first.tasks.map(\.id) == ["job"])
        let unchanged = state.snapshotIfChanged()
        #expect(unchanged == nil, "nothing changed since")
        _ = try state.report(root.handle, TaskProgress(fraction: 0.5), now: Self.now)
        let changed = state.snapshotIfChanged()
        let moved = try #require(changed)
        #expect(moved.tasks.first?.progress == 0.5, "progress shows at once")
    }

    @Test func aTransitionShowsOnceCommittedAndANewRootOnceInserted() throws {
        var state = GraphState.alone(slots: 1)
        let stored = state.addRoot(
            TaskRecord(id: "stored", name: "stored", kind: "k", status: .running, createdAt: Self.now), stored: true)
        _ = state.addRoot(TaskRecord(id: "new", name: "new", kind: "k", createdAt: Self.now), stored: false)
        try state.transition(stored, .complete(result: nil), by: .system, now: Self.now)

        let before = state.graph()
        #expect(before.tasks.map(\.id) == ["stored"], "the new root's insert is not committed")
        #expect(before.tasks.first?.status == .running, "the completion is not committed")

        guard case .batch(let taken) = state.takeWrites(now: Self.now, sampleInterval: 1, owner: "owner") else {
            Issue.record("a batch to write"); return
        }
        _ = state.committed(upTo: taken.sequence)
        let after = state.graph()
        #expect(after.tasks.map(\.id) == ["stored", "new"])
        #expect(after.tasks.first?.status == .completed)
    }

    @Test func aPausedAncestorShowsInTheSnapshotOfANodeBelowIt() throws {
        var state = GraphState.alone(slots: 1)
        let root = state.addRoot(
            TaskRecord(id: "job", name: "job", kind: "k", status: .paused, createdAt: Self.now), stored: true)
        let step = state.attachStored(
            TaskRecord(id: "job.1", parentID: "job", rootID: "job", name: "step", status: .running, createdAt: Self.now),
            to: root)
        let shown = state.snapshot(of: step)
        #expect(shown.status == .paused, "its own row says running; it shows paused, as its code waits")
        #expect(step.record.status == .running)
        let root2 = state.graph().tasks.first
        #expect(root2?.children.first?.isPaused == true)
    }
}
