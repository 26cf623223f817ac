import Foundation
import Progression

/// What `progressctl watch` shows of task trees, and the console's job page too: each watched root, below it only what
/// needs attention (its running, paused and failed descendants, indented as a tree) and for each parent one line
/// counting its other children. progressctl draws it on a terminal (`Dashboard.render`); the console as HTML.
package enum Dashboard {
    /// One watched tree: its nodes in tree order with the watched task first, and that task's rate and time left.
    package struct Tree: Sendable, Hashable {
        /// The watched task and its descendants, each parent before its children (as `TaskStore.tree(of:)` gives).
        package var nodes: [TaskRecord]
        /// Progress per second (a fraction of the whole), or `nil` when unknown.
        package var rate: Double?
        /// Seconds left, or `nil` when unknown.
        package var timeLeft: TimeInterval?

        /// The watched task.
        package var root: TaskRecord { nodes[0] }

        package init(nodes: [TaskRecord], rate: Double? = nil, timeLeft: TimeInterval? = nil) {
            precondition(!nodes.isEmpty, "a tree has at least its root")
            self.nodes = nodes
            self.rate = rate
            self.timeLeft = timeLeft
        }
    }
}
