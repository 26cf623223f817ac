import Foundation
import Testing

@testable import Progression

/// Roots added to the graph alone (`GraphState.addRoots`): each is written with its `created` event, those that find
/// a free slot start in the same commit, a paused one waits, and a refusal adds nothing.
struct AddRootsTests {
    static func graph(slots: Int = 2) -> GraphState {
        return GraphState.alone(slots: slots)
    }

    static func root(_ id: String, _ status: TaskStatus = .pending, priority: Int = 0) -> NewRoot {
        NewRoot(
            record: TaskRecord(
                id: id, name: id, kind: "job", status: status, priority: priority,
                createdAt: Date(timeIntervalSince1970: 1_000)),
            body: { _ in nil })
    }

    static func add(_ roots: [NewRoot], to state: inout GraphState) throws(ProgressionError) -> RootsAdded {
        try state.addRoots(roots, now: Date(timeIntervalSince1970: 2_000), monotonicNow: .seconds(10))
    }

    @Test func rootsThatFindASlotStartInTheSameCommitAndAPausedOneWaits() throws {
        var state = Self.graph(slots: 2)
        let added = try Self.add(
            [Self.root("a"), Self.root("b", .paused), Self.root("c"), Self.root("d", priority: 5)], to: &state)
        let ids = added.handles.map { state.nodes[$0]!.record.id }
        #expect(ids == ["a", "b", "c", "d"])
        // The higher priority first, then the oldest queued: two slots.
        #expect(added.dispatch.launches.map { state.nodes[$0]!.record.id } == ["d", "a"])
        let status = Dictionary(uniqueKeysWithValues: state.roots.map { ($0.record.id, $0.record.status) })
        #expect(status == ["a": .running, "b": .paused, "c": .pending, "d": .running])
        #expect(state.node(id: "a")?.record.ownerID == "owner", "a root started here is this owner's")
        #expect(state.node(id: "b")?.phase == .idle)
        #expect(state.node(id: "c")?.phase == .queued)
        #expect(state.events.filter { $0.kind == .created }.map(\.taskID) == ["a", "b", "c", "d"])
        // Written as inserts with the next batch, shown only once committed. The sequence to wait for is the
        // inserts'; the starts are staged under the same lock, so the batch that takes the inserts takes them too.
        #expect(state.roots.allSatisfy { !$0.stored && $0.hidden })
        let batch = state.takeBatch(now: Date(timeIntervalSince1970: 2_000), sampleInterval: 1, owner: "owner")
        let taken = try #require(batch)
        #expect(taken.sequence >= added.sequence)
        #expect(taken.batch.inserts.map(\.id) == ["a", "b", "c", "d"])
        #expect(taken.batch.inserts.map(\.status) == [.running, .paused, .pending, .running])
        let next = state.takeBatch(now: Date(timeIntervalSince1970: 2_000), sampleInterval: 1, owner: "owner")
        #expect(next == nil, "nothing is left for another batch")
    }

    @Test func aDuplicateIdOrAStoppedExecutorAddsNothing() throws {
        var state = Self.graph()
        _ = try Self.add([Self.root("a")], to: &state)
        let before = state.changeSequence
        let duplicate = #expect(throws: ProgressionError.self) {
            try Self.add([Self.root("b"), Self.root("a")], to: &state)
        }
        guard case .duplicateID("a")? = duplicate else {
            Issue.record("refused as \(String(describing: duplicate)), not as a duplicate of 'a'")
            return
        }
        state.isShutDown = true
        let stopped = #expect(throws: ProgressionError.self) { try Self.add([Self.root("c")], to: &state) }
        guard case .shutDown? = stopped else {
            Issue.record("refused as \(String(describing: stopped)), not as shut down")
            return
        }
        #expect(state.roots.map(\.record.id) == ["a"])
        #expect(state.changeSequence == before)
    }
}
