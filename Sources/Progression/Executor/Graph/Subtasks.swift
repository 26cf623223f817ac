import Foundation
import Synchronization

// Subtasks on the graph: starting and ending a step, reports, durable sleeps.

/// How a child starts.
enum ChildStart {
    /// A new child, or one whose earlier run did not complete: run its code (its start is staged).
    case run(NodeHandle)
    /// A child that completed in an earlier run: return its stored result without running it.
    case completed(NodeHandle, result: Data?)
}

/// What a report asks of the task code after it: wait (paused), wait for the writer (too many events queued), or
/// give the writer its thread (it is behind).
struct ReportOutcome: Sendable {
    var paused = false
    var backlogged = false
    var writerBehind = false
    var wakeWriter = false
}

extension GraphState {
    /// Finds (or creates) the sleep child `name` of `node` and decides: its time has passed (it completes), or the root
    /// stops until then.
    mutating func sleep(
        _ node: TaskNode, until wake: Date, name: String, now: Date
    ) throws(ProgressionError) -> ExecutionEngine.SleepDecision {
        let root = node.root
        guard root.record.kind != nil, root.body != nil else {
            throw .notResumable(
                taskID: root.record.id,
                reason: "it is a closure task, whose code no other process has; only a job (a registered kind) can "
                    + "sleep durably (use Task.sleep to wait in memory)")
        }
        let occurrence = node.nameCounts[name, default: 0]
        node.nameCounts[name] = occurrence + 1
        let child: TaskNode
        if let existing = node.childIndex[name]?[occurrence] {
            if existing.record.status == .completed { return .done(nil) }
            child = existing
        } else {
            let record = TaskRecord(
                id: TaskIdentifier.child(of: root.record.id, number: root.childCount + 1), parentID: node.record.id,
                rootID: root.record.id, name: name, occurrence: occurrence, options: node.record.options,
                status: .pending, step: "sleeping until \(wake.formatted(.iso8601))", priority: node.record.priority,
                createdAt: now, nextAttemptAt: wake)
            root.childCount += 1
            child = addChild(record, to: node)
            markDirty(child, .all)
        }
        let until = child.record.nextAttemptAt ?? now
        if until <= now {
            // Its time has come (or `run-now` ended it): the sleep step completes.
            _ = try? transition(child, .rerun, by: .system, now: now, silent: true)
            child.record.nextAttemptAt = nil
            child.record.step = nil
            markDirty(child, [.nextAttemptAt, .step])
            return .done(try transition(child, .complete(result: nil), by: .system, now: now))
        }
        return .sleep(ExecutionEngine.stop(root, .sleeping(until: until)))
    }

    /// Applies a validated report of a node's code: its step name (an event when it changes) and its amounts.
    mutating func report(
        _ handle: NodeHandle, _ progress: borrowing TaskProgress, now: Date
    ) throws(ProgressionError) -> ReportOutcome {
        guard let node = nodes[handle], !node.removed else { return ReportOutcome() }
        // The writer sleeps while nothing is dirty: wake it when this report makes the first change.
        let wasIdle = dirtyNodes.isEmpty && events.isEmpty
        if progress.fraction != nil || progress.total != nil || progress.completedUnits != nil {
            try applyReport(progress, to: node, now: now)
        }
        if let name = progress.name, name != node.record.step {
            node.record.step = name
            node.record.updatedAt = now
            markDirty(node, [.step, .updatedAt])
            appendEvent(of: node, .step, at: now, message: name)
        }
        return ReportOutcome(
            paused: node.isEffectivelyPaused, backlogged: events.count >= eventBacklogLimit, writerBehind:
                now.timeIntervalSince(lastBatchAt) > writerLagTolerance, wakeWriter: wasIdle)
    }

    /// Creates the child `name` of `parent`, or finds it again (same name and occurrence) when the parent runs again,
    /// and stages its start.
    mutating func startChild(
        of parentHandle: NodeHandle, name: String, weight: Double, options: TaskOptions?, now: Date,
        accepts: ((Data?) -> Bool)?
    ) throws(ProgressionError) -> ChildStart {
        guard let parent = nodes[parentHandle], !parent.removed else {
            throw ProgressionError.notFound(taskID: "#\(parentHandle)")
        }
        let occurrence = parent.nameCounts[name, default: 0]
        parent.nameCounts[name] = occurrence + 1
        if let existing = parent.childIndex[name]?[occurrence] {
            if existing.record.status == .completed, let accepts, accepts(existing.record.result) {
                join(existing, parent: parent, weight: weight, contribution: 1, now: now)
                bank(existing, completed: true, now: now)
                return .completed(existing.handle, result: existing.record.result)
            }
            join(existing, parent: parent, weight: weight, contribution: existing.record.progress ?? 0, now: now)
            return try restartChild(existing.handle, now: now)
        }
        // By default a child takes its parent's cancel, pause and retry rights; the parent's timeout already covers
        // the subtree, and automatic retries are for roots.
        var childOptions = options ?? parent.record.options.with { $0.timeout = nil }
        childOptions.retryPolicy = nil
        let root = parent.root
        root.childCount += 1
        let record = TaskRecord(
            id: TaskIdentifier.child(of: root.record.id, number: root.childCount), parentID: parent.record.id,
            rootID: root.record.id, name: name, occurrence: occurrence, options: childOptions, status: .pending,
            weight: weight, priority: parent.record.priority, createdAt: now)
        let node = addChild(record, to: parent)
        markDirty(node, .all)
        join(node, parent: parent, weight: weight, contribution: 0, now: now)
        try transition(node, .start, by: .system, now: now)
        return .run(node.handle)
    }

    /// Runs a known child again (it did not complete, or its stored result cannot be used): same identity, a new
    /// attempt once it had started, its own completed children found again when it pushes them.
    private mutating func restartChild(_ handle: NodeHandle, now: Date) throws(ProgressionError) -> ChildStart {
        guard let node = nodes[handle] else { throw ProgressionError.notFound(taskID: "#\(handle)") }
        try transition(node, .rerun, by: .system, now: now)
        prepareRun(node)
        return .run(handle)
    }
}
