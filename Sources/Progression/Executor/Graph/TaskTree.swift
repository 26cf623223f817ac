import DequeModule
import Foundation

/// The tree of tasks in memory: nodes by handle and id, roots in order, children by name and occurrence.
extension GraphState {
    func node(_ handle: NodeHandle) -> TaskNode? {
        nodes[handle]
    }

    func node(id: String) -> TaskNode? {
        handles[id].flatMap { nodes[$0] }
    }

    /// Whether this executor alone writes the row of root `record` while it holds it, so that the row it committed is
    /// the row stored: a job with no child jobs (the tree keeper writes the progress of a parent that waits for its
    /// children) that is no child job itself (its parent's cascades reach it). Others change it only by taking it from
    /// this executor, and a write of it is then refused.
    func writesAlone(_ record: TaskRecord) -> Bool {
        guard record.parentJobID == nil, let node = node(id: record.id), node.isRoot else { return false }
        return node.links.isEmpty
    }

    /// Whether this executor (`owner`) will commit the end of root `id` and tell it (``RootEnds``): it holds the root
    /// in the store, writes its row alone, and runs it now with nothing stopping it, or has ended it and not committed
    /// that end yet. A root that leaves before it ends (a pause, a durable wait) stops being one at once; one taken by
    /// another worker, once this executor learns it (a write refused, its lease found lost).
    func willTellEnd(of id: String, owner: String) -> Bool {
        guard let node = node(id: id), node.isRoot, node.committed.ownerID == owner, writesAlone(node.record),
            !node.conflicted, !node.removed, node.stopReason != .leaseLost, node.stopReason != .shutdown
        else { return false }
        if node.record.status == .running { return node.stopReason == nil }
        return node.record.status.isFinished && !node.committed.status.isFinished
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
            noteFinish(of: node)
        }
        return node
    }

    /// Queues a root whose committed status is finished (with a finish time) for the sweeps.
    mutating func noteFinish(of root: TaskNode) {
        let committed = root.committed
        guard committed.status.isFinished, let finishedAt = committed.finishedAt else { return }
        if committed.status == .completed {
            finishedCompleted.append((root, finishedAt))
        } else if sweepsFailed {
            finishedOther.append((root, finishedAt))
        }
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
        removeRoots([root])
    }

    /// Removes roots and their subtrees from memory in one pass (their rows stay in the store): every removal of a
    /// root goes through here. Their nodes are marked removed and unlinked, their queued events dropped. Returns the
    /// ids removed.
    @discardableResult
    mutating func removeRoots(_ removed: [TaskNode]) -> Set<String> {
        guard !removed.isEmpty else { return [] }
        var ids: Set<String> = []
        for root in removed {
            let subtree = root.subtree
            for node in subtree {
                node.removed = true
                nodes[node.handle] = nil
                handles[node.record.id] = nil
                ids.insert(node.record.id)
            }
            for node in subtree { node.children = [] }
        }
        // Marked removed above (and only these: a root in the list is in memory).
        roots.removeAll(where: \.removed)
        if !events.isEmpty { events.removeAll { ids.contains($0.taskID) } }
        version += 1
        return ids
    }

    /// Removes from memory the finished roots whose committed finish is older than their visibility (`completedBefore`
    /// for completed roots, `failedBefore` for failed and cancelled ones, `nil`: kept), idle and with nothing left to
    /// write. Returns the ids removed.
    @discardableResult
    mutating func sweepFinished(completedBefore: Date, failedBefore: Date?) -> Set<String> {
        var finished: [TaskNode] = []
        Self.take(from: &finishedCompleted, completed: true, before: completedBefore, into: &finished)
        if let failedBefore { Self.take(from: &finishedOther, completed: false, before: failedBefore, into: &finished) }
        return removeRoots(finished)
    }

    /// Takes from the front of a queue of finished roots (``finishedCompleted``, ``finishedOther``) those finished
    /// before `limit` that are idle with nothing left to write; those not idle yet stay at its front, and entries of
    /// roots that changed since they were queued are dropped. Stops at the first root finished at `limit` or later.
    private static func take(
        from queue: inout Deque<(node: TaskNode, finishedAt: Date)>, completed: Bool, before limit: Date,
        into finished: inout [TaskNode]
    ) {
        var notIdle: [(node: TaskNode, finishedAt: Date)] = []
        while let entry = queue.first {
            let root = entry.node
            let committed = root.committed
            guard !root.removed, committed.status.isFinished, (committed.status == .completed) == completed,
                committed.finishedAt == entry.finishedAt
            else {
                queue.removeFirst()
                continue
            }
            guard entry.finishedAt < limit else { break }
            queue.removeFirst()
            if root.phase == .idle, root.staged == nil, !root.isInWriteSet {
                finished.append(root)
            } else {
                notIdle.append(entry)
            }
        }
        queue.prepend(contentsOf: notIdle)
    }
}

extension GraphState {
    /// Removes the root `id` and its subtree from memory, if it is here.
    mutating func removeRoot(id: String) {
        guard let node = node(id: id) else { return }
        removeRoot(node)
    }
}
