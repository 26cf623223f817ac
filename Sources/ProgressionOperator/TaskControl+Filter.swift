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

    /// The statuses a change by filter chooses when none is given: those `action` changes, as the lifecycle says;
    /// for `remove` without `force`, the finished ones.
    package static func defaultStatuses(for action: ControlRequest.Action, force: Bool = false) -> Set<TaskStatus> {
        let changed = statuses(changedBy: action)
        return action == .remove && !force ? changed.filter(\.isFinished) : changed
    }

    /// The rule a command adds to the lifecycle's for `action`: `remove` without `force` takes finished tasks only.
    package static func precheck(
        for action: ControlRequest.Action, force: Bool = false
    ) -> @Sendable (TaskRecord) throws(Refusal) -> Void {
        guard action == .remove && !force else { return { _ throws(Refusal) in } }
        return { task throws(Refusal) in try requireFinished(task) }
    }

    /// Applies `action` to each of `tasks` (roots a filter chose) that passes `precheck`, in order; a task the
    /// precheck refuses keeps its place among the outcomes.
    ///
    /// - Throws: a store failure (the tasks before it were changed, the others not).
    package func perform(
        _ action: ControlRequest.Action, on tasks: [TaskRecord], precheck: (TaskRecord) throws(Refusal) -> Void,
        dryRun: Bool
    ) async throws -> [Outcome] {
        var outcomes: [Outcome?] = Array(repeating: nil, count: tasks.count)
        var candidates: [(index: Int, task: TaskRecord)] = []
        for (index, task) in tasks.enumerated() {
            do {
                try precheck(task)
                candidates.append((index, task))
            } catch {
                outcomes[index] = .refused(error)
            }
        }
        let performed = try await perform(action, on: candidates.map(\.task), dryRun: dryRun)
        for (candidate, outcome) in zip(candidates, performed) { outcomes[candidate.index] = outcome }
        return outcomes.compactMap { $0 }
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
        /// The summary of `outcomes`.
        package init(action: ControlRequest.Action, dryRun: Bool, outcomes: [Outcome]) {
            var changes: [Change] = []
            var refusals: [Refusal] = []
            for outcome in outcomes {
                switch outcome {
                case .changed(let change): changes.append(change)
                case .refused(let refusal): refusals.append(refusal)
                }
            }
            self.init(
                action: action.rawValue, dryRun: dryRun, matched: outcomes.count, changed: changes.count,
                changes: changes, refused: refusals)
        }

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
