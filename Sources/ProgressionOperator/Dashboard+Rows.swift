import Foundation
import Progression

extension Dashboard {
    /// One line below the header, before it is laid out in columns.
    package struct Row: Sendable, Hashable {
        package enum Content: Sendable, Hashable {
            /// A watched root, with its rate and time left.
            case root(TaskRecord, rate: Double?, timeLeft: TimeInterval?)
            /// A descendant shown on its own, `depth` levels below the root.
            case task(TaskRecord, depth: Int)
            /// How many children of one parent, `depth` levels below the root, are in each status, apart from the
            /// running and paused ones (which have rows of their own).
            case summary([TaskStatus: Int], depth: Int)
        }

        package var content: Content
        /// Rows of a lower priority are left out first when not all fit.
        package var priority: Priority
        /// The index (among all candidate rows) of the row this one hangs below; `nil` for a root. A row is shown
        /// only below its parent.
        package var parent: Int?
    }

    /// Which rows are kept when not all fit, most important first.
    package enum Priority: Int, Sendable, Hashable, CaseIterable, Comparable {
        case unfinishedRoot, active, finishedRoot, summary, failed

        package static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Every row the trees could show, in the order shown: each root, then its descendants that are running or
    /// paused, failed, or above one that is, and after the children of each parent the line counting them.
    package static func candidateRows(of trees: [Tree]) -> [Row] {
        var rows: [Row] = []
        for tree in trees {
            let root = tree.root
            rows.append(Row(
                content: .root(root, rate: tree.rate, timeLeft: tree.timeLeft),
                priority: root.status.isFinished ? .finishedRoot : .unfinishedRoot, parent: nil))
            appendDescendants(of: tree, to: &rows)
        }
        return rows
    }

    private static func appendDescendants(of tree: Tree, to rows: inout [Row]) {
        var children: [String: [TaskRecord]] = [:]
        for node in tree.nodes.dropFirst() {
            if let parent = node.parentID { children[parent, default: []].append(node) }
        }
        // Whether a node, or one below it, needs a row: children come after their parents in tree order, so
        // walking it backwards sees every child before its parent.
        var active: Set<String> = []
        var failed: Set<String> = []
        for node in tree.nodes.reversed() {
            let below = children[node.id] ?? []
            if node.status == .running || node.status == .paused || below.contains(where: { active.contains($0.id) }) {
                active.insert(node.id)
            }
            if node.status == .failed || below.contains(where: { failed.contains($0.id) }) {
                failed.insert(node.id)
            }
        }

        func append(childrenOf parentID: String, parentRow: Int, depth: Int, inherited: Priority) {
            let siblings = children[parentID] ?? []
            for child in siblings {
                let own: Priority
                if active.contains(child.id) {
                    own = .active
                } else if failed.contains(child.id) {
                    own = .failed
                } else {
                    continue
                }
                let priority = max(own, inherited)
                rows.append(Row(content: .task(child, depth: depth), priority: priority, parent: parentRow))
                append(childrenOf: child.id, parentRow: rows.count - 1, depth: depth + 1, inherited: priority)
            }
            var counts: [TaskStatus: Int] = [:]
            for child in siblings where child.status != .running && child.status != .paused {
                counts[child.status, default: 0] += 1
            }
            if !counts.isEmpty {
                rows.append(Row(
                    content: .summary(counts, depth: depth), priority: max(.summary, inherited), parent: parentRow))
            }
        }
        append(childrenOf: tree.root.id, parentRow: rows.count - 1, depth: 1, inherited: .unfinishedRoot)
    }

    /// The rows that fit in `capacity` lines, in their order, and how many were left out. When some are left out,
    /// one line is kept free for saying so; rows are then taken by priority, each only below its parent.
    package static func select(_ candidates: [Row], capacity: Int) -> (rows: [Row], omitted: Int) {
        guard candidates.count > capacity else { return (candidates, 0) }
        var budget = max(0, capacity - 1)
        var included = Array(repeating: false, count: candidates.count)
        for priority in Priority.allCases {
            for index in candidates.indices where budget > 0 && candidates[index].priority == priority {
                if let parent = candidates[index].parent, !included[parent] { continue }
                included[index] = true
                budget -= 1
            }
        }
        let rows = candidates.indices.filter { included[$0] }.map { candidates[$0] }
        return (rows, candidates.count - rows.count)
    }
}
