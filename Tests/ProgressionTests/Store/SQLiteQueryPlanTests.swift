import Foundation
import Progression
import ProgressionSQLite
import ProgressionTestSupport
import Testing

/// Every secondary index of the schema serves a query the library runs, and those queries use it (no full scan, no
/// sort of their own): `EXPLAIN QUERY PLAN` of each, on a database with rows in it.
struct SQLiteQueryPlanTests {
    static let cases: [(query: String, parameters: [SQLiteValue], index: String)] = [
        // Loading a tree: the root by its key, the rest by this.
        ("SELECT id FROM tasks WHERE root_id = ? AND parent_id IS NOT NULL", [.text("r")], "tasks_children_by_root"),
        // Finding a step again when its parent runs again (and the uniqueness of a child's identity).
        (
            "SELECT id FROM tasks WHERE parent_id = ? AND name = ? AND occurrence = ?",
            [.text("r"), .text("a"), .integer(0)], "tasks_child_identity"
        ),
        // progressctl list, newest first.
        (
            "SELECT id FROM tasks WHERE parent_id IS NULL ORDER BY created_at DESC, id DESC LIMIT 50", [],
            "tasks_roots_by_created"
        ),
        // Claims: a dead owner's unfinished roots by priority then age.
        (
            """
            SELECT id FROM tasks WHERE parent_id IS NULL AND finished_at IS NULL AND owner_id = ?
            ORDER BY priority DESC, created_at, id LIMIT 100
            """, [.text("dead")], "tasks_roots_unfinished"
        ),
        // progressctl list --status failed, and prune.
        (
            """
            SELECT id FROM tasks WHERE parent_id IS NULL AND finished_at IS NOT NULL AND (status = ?)
            ORDER BY created_at DESC, id DESC LIMIT 50
            """, [.text("failed")], "tasks_roots_finished"
        ),
        // A second submit with the same idempotency key.
        (
            "SELECT id FROM tasks WHERE kind = ? AND idempotency_key = ?", [.text("k"), .text("key")],
            "tasks_idempotency"
        ),
        // History.
        ("SELECT id FROM events WHERE root_id = ? AND id > ? ORDER BY id LIMIT 64", [.text("r"), .integer(0)], "events_by_root"),
    ]

    @Test(arguments: cases.indices)
    func aQueryUsesItsIndexWithoutASortOfItsOwn(index: Int) async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteTaskStore(path: directory.file("plans.sqlite"))
        var roots: [TaskRecord] = []
        for number in 0..<200 {
            var root = makeRecord(
                id: "r\(number)", status: number.isMultiple(of: 3) ? .failed : .pending, owner: "dead", kind: "k")
            root.idempotencyKey = "key\(number)"
            roots.append(root)
            roots.append(makeRecord(id: "r\(number).1", parent: root, name: "a"))
        }
        try await store.insert(roots, events: [])
        let (query, parameters, expected) = Self.cases[index]
        let plan = try await store.queryPlan(query, parameters)
        #expect(plan.contains { $0.contains(expected) }, "\(plan)")
        #expect(!plan.contains { $0.contains("USE TEMP B-TREE") }, "\(plan)")
        #expect(!plan.contains { $0.hasPrefix("SCAN tasks") && !$0.contains("INDEX") }, "\(plan)")
    }

    /// `progressctl list --status paused` on a store of finished jobs reads the few unfinished roots through their
    /// partial index (and sorts those) instead of walking every root newest first; and finds the right ones.
    @Test(arguments: [Set<TaskStatus>([.paused]), [.pending, .running], [.paused, .pending, .running]])
    func aListingOfUnfinishedRootsReadsTheirIndex(statuses: Set<TaskStatus>) async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteTaskStore(path: directory.file("plans.sqlite"))
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var roots: [TaskRecord] = []
        for number in 0..<2_000 {
            let status: TaskStatus =
                number % 500 == 7 ? .paused : number % 700 == 3 ? .running : number % 900 == 5 ? .pending : .completed
            roots.append(
                makeRecord(
                    id: String(format: "r%05d", number), status: status,
                    createdAt: start.addingTimeInterval(Double(number)), owner: "o", kind: "k"))
        }
        try await store.insert(roots, events: [])
        let query = TaskQuery(statuses: statuses, limit: 3)
        let (sql, parameters) = SQLiteTaskStore.rootsSQL(query)
        let plan = try await store.queryPlan(sql, parameters)
        #expect(plan.contains { $0.contains("tasks_roots_unfinished") }, "\(plan)")
        #expect(!plan.contains { $0.contains("tasks_roots_by_created") }, "\(plan)")

        let expected = roots.filter { statuses.contains($0.status) }.sorted { $0.createdAt > $1.createdAt }
        #expect(try await store.roots(query).map(\.id) == expected.prefix(3).map(\.id))
        #expect(try await store.countRoots(query, upTo: nil) == expected.count)
        #expect(try await store.countRoots(query, upTo: 2) == 2)
    }
}
