import Foundation
import Progression
import ProgressionSQLite
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
}
