import Foundation
import Progression

/// Changes of many tasks chosen by filters (progressctl's `cancel --kind import`, the console's bulk actions): which
/// roots they choose, the rule `remove` adds, and the document that reports them.
extension TaskControl {
    /// Every root matching `query`, oldest first (so that tasks submitted meanwhile do not shift the pages).
    package static func roots(matching query: TaskQuery, in store: OperatorStore) async throws -> [TaskRecord] {
        var page = query
        page.sort = .created
        page.reverse = true
        page.limit = 1000
        page.offset = 0
        var seen: Set<String> = []
        var roots: [TaskRecord] = []
        while true {
            let rows = try await store.checked { [page] in try await $0.roots(page) }
            for row in rows where seen.insert(row.id).inserted { roots.append(row) }
            guard rows.count == page.limit else { break }
            page.offset += rows.count
        }
        return roots
    }

    /// `remove` without `--force` takes finished tasks only (a rule of the command beyond the lifecycle's).
    package static func requireFinished(_ task: TaskRecord) throws(Refusal) {
        guard task.status.isFinished else {
            throw Refusal(
                id: task.id,
                message: "task '\(task.id)' (\(task.name.escapedForTerminal)) is \(task.status); only a "
                    + "finished task is removed (use --force to cancel it first)")
        }
    }

    /// A change by filter as `--json` reports it.
    package struct Summary: Encodable, Sendable {
        package var action: String
        package var dryRun: Bool
        /// Roots the filters chose.
        package var matched: Int
        /// Those changed (or, on a dry run, that would be).
        package var changed: Int
        package var changes: [Change]
        package var refused: [Refusal]

        package init(
            action: String, dryRun: Bool, matched: Int, changed: Int, changes: [Change], refused: [Refusal]
        ) {
            self.action = action
            self.dryRun = dryRun
            self.matched = matched
            self.changed = changed
            self.changes = changes
            self.refused = refused
        }
    }
}
