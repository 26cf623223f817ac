import Foundation
import Progression
import Testing

/// The fencing rule alone (``BatchFence``): which roots a store reads for a batch and which rows it then writes. The
/// store contract suite checks that each store carries it out.
struct BatchFenceTests {
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    static func root(_ id: String, owner: String? = "o", status: TaskStatus = .running) -> TaskRecord {
        TaskRecord(id: id, name: id, kind: "k", status: status, ownerID: owner, createdAt: t0)
    }

    static func step(_ id: String, of root: String) -> TaskRecord {
        TaskRecord(id: "\(root).\(id)", parentID: root, rootID: root, name: id, status: .running, createdAt: t0)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var batch: TaskBatch
        var holders: [String: BatchFence.Holder]
        var reads: [String]
        var fenced: Set<String>
        var lost: Set<String>
        /// Roots whose insert found the id taken.
        var conflicted: [String] = []
        var testDescription: String { name }
    }

    static let held = BatchFence.Holder(owner: "o", status: .running)

    static let rows: [Row] = [
        Row(
            name: "a batch without an owner reads nothing and writes everything",
            batch: TaskBatch(updates: [TaskUpdate(root("r"), columns: .status)]),
            holders: [:], reads: [], fenced: [], lost: []),
        Row(
            name: "a root this owner holds is written",
            batch: TaskBatch(updates: [TaskUpdate(root("r"), columns: .progress)], owner: "o"),
            holders: ["r": held], reads: ["r"], fenced: [], lost: []),
        Row(
            name: "a root another owner holds is left, with its subtasks",
            batch: TaskBatch(
                inserts: [step("a", of: "r")], updates: [TaskUpdate(root("r"), columns: .progress)], owner: "o"),
            holders: ["r": BatchFence.Holder(owner: "p", status: .running)], reads: ["r"], fenced: ["r"], lost: ["r"]),
        Row(
            name: "a root that is gone is left",
            batch: TaskBatch(updates: [TaskUpdate(step("a", of: "r"), columns: .progress)], owner: "o"),
            holders: [:], reads: ["r"], fenced: ["r"], lost: ["r"]),
        Row(
            name: "a root no owner holds is not this owner's",
            batch: TaskBatch(updates: [TaskUpdate(root("r"), columns: .progress)], owner: "o"),
            holders: ["r": BatchFence.Holder(owner: nil, status: .running)], reads: ["r"], fenced: ["r"], lost: ["r"]),
        Row(
            name: "a root the batch inserts is its own: nothing is read for it or its subtasks",
            batch: TaskBatch(inserts: [root("n"), step("a", of: "n")], owner: "o"),
            holders: [:], reads: [], fenced: [], lost: []),
        Row(
            name: "a job queued unowned is written while it is unowned with the status read",
            batch: TaskBatch(
                updates: [TaskUpdate(root("q", owner: nil, status: .pending), columns: .priority, unownedWithStatus: .pending)],
                owner: "o"),
            holders: ["q": BatchFence.Holder(owner: nil, status: .pending)], reads: ["q"], fenced: [], lost: []),
        Row(
            name: "a job queued unowned that another worker took is left, and not called lost",
            batch: TaskBatch(
                updates: [TaskUpdate(root("q", owner: nil, status: .pending), columns: .priority, unownedWithStatus: .pending)],
                owner: "o"),
            holders: ["q": BatchFence.Holder(owner: "p", status: .running)], reads: ["q"], fenced: ["q"], lost: []),
        Row(
            name: "a job queued unowned that an operator paused is left",
            batch: TaskBatch(
                updates: [TaskUpdate(root("q", owner: nil, status: .pending), columns: .priority, unownedWithStatus: .pending)]),
            holders: ["q": BatchFence.Holder(owner: nil, status: .paused)], reads: ["q"], fenced: ["q"], lost: []),
        Row(
            name: "roots are read once each, in byte order",
            batch: TaskBatch(
                inserts: [step("x", of: "b"), step("y", of: "b")],
                updates: [TaskUpdate(root("a"), columns: .progress), TaskUpdate(step("z", of: "B"), columns: .step)],
                owner: "o"),
            holders: ["a": held, "b": held, "B": held], reads: ["B", "a", "b"], fenced: [], lost: []),
        Row(
            name: "a root the batch inserts whose id is taken is not its own",
            batch: TaskBatch(inserts: [root("n")], updates: [TaskUpdate(root("n"), columns: .progress)], owner: "o"),
            holders: [:], reads: [], fenced: ["n"], lost: ["n"], conflicted: ["n"]),
        Row(
            name: "a root the batch inserts is not guarded as queued unowned",
            batch: TaskBatch(
                inserts: [root("n", owner: nil, status: .pending)],
                updates: [TaskUpdate(root("n", owner: nil, status: .pending), columns: .priority, unownedWithStatus: .pending)],
                owner: "o"),
            holders: [:], reads: [], fenced: [], lost: []),
    ]

    @Test(arguments: rows)
    func aBatchWritesWhatItsRowSays(row: Row) {
        var fence = BatchFence(row.batch)
        #expect(fence.rootsToRead == row.reads)
        fence.decide(holders: row.holders)
        for root in row.conflicted { fence.rootInsertConflicted(root) }
        #expect(fence.fencedRoots == row.fenced)
        #expect(fence.lostRoots == row.lost)
        for record in row.batch.inserts + row.batch.updates.map(\.record) {
            #expect(fence.writes(record) == !row.fenced.contains(record.rootID), "\(record.id)")
        }
    }

    /// A store that checks a root's own row in its update (SQLite) reads only the roots of subtasks; each root
    /// update then carries what its statement must check.
    @Test func aStoreCheckingRootsInTheirUpdatesReadsOnlyTheRootsOfSubtasks() {
        let queued = Self.root("q", owner: nil, status: .pending)
        let batch = TaskBatch(
            inserts: [Self.root("n"), Self.step("a", of: "s")],
            updates: [
                TaskUpdate(Self.root("r"), columns: .progress), TaskUpdate(Self.root("s"), columns: .progress),
                TaskUpdate(queued, columns: .priority, unownedWithStatus: .pending),
                TaskUpdate(Self.root("n"), columns: .progress), TaskUpdate(Self.step("b", of: "t"), columns: .step),
            ],
            owner: "o")
        var fence = BatchFence(batch, checksRootsInTheirUpdates: true)
        #expect(fence.rootsToRead == ["s", "t"])
        fence.decide(holders: ["s": Self.held, "t": BatchFence.Holder(owner: "p", status: .running)])
        #expect(fence.fencedRoots == ["t"])
        #expect(
            batch.updates.map { fence.condition(for: $0) }
                == [.heldBy("o"), .none, .unownedWith(.pending), .none, .none])
        let everyRootRead = BatchFence(batch)
        #expect(everyRootRead.rootsToRead == ["q", "r", "s", "t"])
        #expect(batch.updates.allSatisfy { everyRootRead.condition(for: $0) == .none })
        #expect(BatchFence(TaskBatch(updates: [TaskUpdate(Self.root("r"), columns: .progress)]), checksRootsInTheirUpdates: true)
            .condition(for: TaskUpdate(Self.root("r"), columns: .progress)) == .none)
    }

    @Test func theEventsOfRowsNotWrittenAreLeftOut() {
        let events = ["r", "r.a", "s"].map {
            TaskEvent(taskID: $0, rootID: String($0.prefix(1)), kind: .progress, at: Self.t0, attempt: 1)
        }
        let batch = TaskBatch(events: events, owner: "o")
        #expect(BatchFence.events(of: batch, skipping: []) == events)
        #expect(BatchFence.events(of: batch, skipping: ["r.a", "s"]).map(\.taskID) == ["r"])
    }
}
