#if PostgreSQL
import Foundation
import Synchronization
import Testing
@testable import Progression
@testable import ProgressionPostgres
import ProgressionPostgresTestSupport

/// An executor's claim on PostgreSQL reads which roots it took have subtasks, and writes the starts of those that have
/// none, in one statement: the start of a root it finds with subtasks is not written, and its slot goes back to the
/// claimer before the claim returns.
struct ClaimStartsOnPostgresTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// Two unowned pending jobs, one of them with a subtask (a job a stopping worker handed back): the claim takes
    /// both and starts the one without subtasks. The other comes back unstarted, with no tree (the executor reads it),
    /// its row and its subtask as they were, and the slot its start took is given back: one slot is held when the
    /// claim returns, not two (were it kept, a worker of one slot would give the job back as one it has no slot for,
    /// and claim it again, forever).
    @Test func aRootFoundWithSubtasksIsNotStartedAndItsSlotIsGivenBack() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("claimstarts"))
        defer { Task { await store.close() } }
        let fresh = TaskRecord(id: "fresh", name: "fresh", kind: "export", status: .pending, createdAt: Self.now)
        let resumed = TaskRecord(
            id: "resumed", name: "resumed", kind: "export", status: .pending,
            createdAt: Self.now.addingTimeInterval(-1))
        let step = TaskRecord(
            id: "resumed/step", parentID: "resumed", rootID: "resumed", name: "step", status: .completed,
            progress: 1, createdAt: Self.now.addingTimeInterval(-1), finishedAt: Self.now.addingTimeInterval(-1))
        try await store.insert([fresh, resumed, step], events: [])
        let slots = Mutex((taken: 0, givenBack: 0))
        let starts = ClaimStarts(
            kinds: ["export"], versions: [:], clock: { Self.now },
            takeSlot: { _, _ in slots.withLock { $0.taken += 1 }; return true },
            giveBack: { count in slots.withLock { $0.givenBack += count } })
        let claimed = try await store.claimRoots(
            RootClaim(
                fromOwners: [nil], kinds: ["export"], newOwner: "me", limit: 10, now: Self.now, readsTrees: true,
                versions: [:], starts: starts))
        #expect(claimed.map(\.id) == ["resumed", "fresh"])
        let byID = Dictionary(uniqueKeysWithValues: claimed.map { ($0.id, $0) })
        #expect(byID["fresh"]?.started == true)
        #expect(byID["fresh"]?.tree?.map(\.status) == [.running])
        #expect(byID["resumed"]?.started == false)
        #expect(byID["resumed"]?.tree == nil)
        #expect(slots.withLock { $0 } == (taken: 2, givenBack: 1))
        #expect(starts.close() == 1)
        let tree = try await store.tree(of: "resumed")
        #expect(tree.map(\.id) == ["resumed", "resumed/step"])
        #expect(tree.map(\.status) == [.pending, .completed])
        #expect(tree.first?.ownerID == "me")
        #expect(try await store.tree(of: "fresh").map(\.status) == [.running])
        let startedEvents = try await store.events(of: "resumed").filter { $0.kind == .started }
        #expect(startedEvents.isEmpty, "no start event of the root left unstarted")
        #expect(try await store.events(of: "fresh").map(\.kind).contains(.started))
    }
}
#endif
