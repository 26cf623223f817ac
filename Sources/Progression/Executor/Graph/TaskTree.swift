import Foundation

/// The tree of tasks in memory: nodes by handle and id, roots in order, children by name and occurrence.
extension GraphState {
    func node(_ handle: NodeHandle) -> TaskNode? {
        nodes[handle]
    }

    func node(id: String) -> TaskNode? {
        handles[id].flatMap { nodes[$0] }
    }

    /// Adds a root. `stored`: its row exists already (a root loaded from the store); else the writer inserts it.
    mutating func addRoot(_ record: TaskRecord, stored: Bool) -> TaskNode {
        let node = TaskNode(handle: nextHandle, record: record, sequence: changeSequence, stored: stored)
        nextHandle += 1
        nodes[node.handle] = node
        handles[record.id] = node.handle
        roots.append(node)
        if !stored {
            node.hidden = true
            markDirty(node, .all)
            stage(node)
        } else {
            touch(node)
        }
        return node
    }

    /// Adds a stored node below `parent` (a tree loaded from the store).
    mutating func attachStored(_ record: TaskRecord, to parent: TaskNode) -> TaskNode {
        let node = TaskNode(handle: nextHandle, record: record, sequence: changeSequence, stored: true)
        nextHandle += 1
        node.parent = parent
        parent.children.append(node)
        parent.childIndex[record.name, default: [:]][record.occurrence] = node
        nodes[node.handle] = node
        handles[record.id] = node.handle
        let root = node.root
        if let number = TaskIdentifier.childNumber(record.id, root: root.record.id) {
            root.childCount = max(root.childCount, number)
        }
        if let child = record.childJobID { root.links[child] = node.handle }
        return node
    }

    /// Adds a new child below `parent`; the writer inserts its row.
    mutating func addChild(_ record: TaskRecord, to parent: TaskNode) -> TaskNode {
        let node = TaskNode(handle: nextHandle, record: record, sequence: changeSequence, stored: false)
        nextHandle += 1
        node.parent = parent
        parent.children.append(node)
        parent.childIndex[record.name, default: [:]][record.occurrence] = node
        nodes[node.handle] = node
        handles[record.id] = node.handle
        if let child = record.childJobID { node.root.links[child] = node.handle }
        return node
    }

    /// Removes a root and its subtree from memory (their rows stay in the store). Returns their ids.
    @discardableResult
    mutating func removeRoot(_ root: TaskNode) -> Set<String> {
        let subtree = root.subtree
        var ids: Set<String> = []
        for node in subtree {
            node.removed = true
            nodes[node.handle] = nil
            handles[node.record.id] = nil
            ids.insert(node.record.id)
        }
        for node in subtree { node.children = [] }
        roots.removeAll { $0 === root }
        if !events.isEmpty { events.removeAll { ids.contains($0.taskID) } }
        version += 1
        return ids
    }
}
