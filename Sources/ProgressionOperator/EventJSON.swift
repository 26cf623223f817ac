import Foundation
import Progression

/// An event of a task's history as `progressctl history --json` and the console's job page show it.
package struct EventJSON: Encodable, Sendable {
    @Null package var sequence: Int64?
    package var taskID: String
    @Null package var taskName: String?
    package var kind: String
    package var at: Date
    package var attempt: Int
    @Null package var progress: Double?
    @Null package var message: String?
    @Null package var errorType: String?

    /// `event`, with the name of its task when `names` has it.
    package init(_ event: TaskEvent, names: [String: String]) {
        sequence = event.sequence
        taskID = event.taskID
        taskName = names[event.taskID]
        kind = event.kind.rawValue
        at = event.at
        attempt = event.attempt
        progress = event.progress
        message = event.message
        errorType = event.errorType
    }
}

extension TaskJSON {
    /// The depth of each node of a tree (in tree order, as `TaskStore.tree(of:)` gives it) below the first (0).
    package static func depths(of nodes: [TaskRecord]) -> [String: Int] {
        var depths: [String: Int] = [:]
        for node in nodes {
            depths[node.id] = node.parentID.flatMap { depths[$0] }.map { $0 + 1 } ?? 0
        }
        return depths
    }
}
