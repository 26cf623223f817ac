import Foundation
import Progression

/// Changes a task the way DESIGN.md's "Control from another process" says: through a control request when a live
/// owner holds the task's tree, else directly with one compare-and-set transaction on the status and owner read.
struct TaskControl {
    let store: SQLiteTaskStore
    /// How long to wait for a live owner to handle a request.
    let wait: Duration

    /// What a change did, for people and for `--json`.
    struct Result: Codable {
        var id: String
        var name: String
        var action: String
        /// `owner` (a control request the owner applied) or `direct` (written by progressctl).
        var via: String
        var ownerID: String?
        /// The status after the change (`nil` when the owner applied it: it reports no status).
        var status: String?
        var dryRun: Bool
        var outcome: String
    }

    /// The owner that holds `root`'s tree and is alive, if any.
    func liveOwner(of root: TaskRecord) async throws -> OwnerRecord? {
        guard let ownerID = root.ownerID else { return nil }
        let owners = try await store.checked { try await $0.owners() }
        guard let owner = owners.first(where: { $0.id == ownerID }), owner.liveness().isAlive else { return nil }
        return owner
    }

    /// The root of `task`'s tree.
    func root(of task: TaskRecord) async throws -> TaskRecord {
        if task.isRoot { return task }
        guard let root = try await store.checked({ try await $0.task(id: task.rootID) }) else {
            throw CLIError("the root '\(task.rootID)' of task '\(task.id)' is missing")
        }
        return root
    }

    /// Refuses `action` when the task's options forbid it or its status does not allow it (for a live owner, which
    /// can also pause a running task).
    static func check(_ action: ControlRequest.Action, _ task: TaskRecord) throws {
        let label = "task '\(task.id)' (\(task.name))"
        switch action {
        case .pause:
            guard task.options.canPause else { throw CLIError("\(label) cannot be paused: its options do not allow it") }
            guard [.pending, .running].contains(task.status) else {
                throw CLIError("\(label) is \(task.status) and cannot be paused (only a pending or running task can)")
            }
        case .resume:
            guard task.options.canPause else { throw CLIError("\(label) cannot be resumed: its options do not allow pausing it") }
            guard task.status == .paused else {
                throw CLIError("\(label) is \(task.status), not paused, so it cannot be resumed")
            }
        case .cancel:
            guard task.options.canCancel else { throw CLIError("\(label) cannot be cancelled: its options do not allow it") }
            guard !task.status.isFinished else {
                throw CLIError("\(label) is \(task.status) already and cannot be cancelled")
            }
        case .retry:
            guard task.options.canRetry else { throw CLIError("\(label) cannot be retried: its options do not allow it (it was not submitted as retryable)") }
            guard [.failed, .cancelled].contains(task.status) else {
                throw CLIError("\(label) is \(task.status); only a failed or cancelled task can be retried")
            }
        case .remove:
            guard task.options.canCancel || task.status.isFinished else {
                throw CLIError("\(label) is \(task.status) and cannot be cancelled (its options forbid it), so it cannot be removed")
            }
        }
    }

    /// Applies `action` to `task` (already checked with ``check(_:_:)``): through its live owner, or directly.
    func perform(_ action: ControlRequest.Action, on task: TaskRecord, dryRun: Bool = false) async throws -> Result {
        let root = try await root(of: task)
        if let owner = try await liveOwner(of: root) {
            return try await request(action, on: task, owner: owner, dryRun: dryRun)
        }
        guard task.isRoot else {
            throw CLIError(
                "task '\(task.id)' is part of '\(root.id)' (\(root.name)), which no running executor holds; "
                    + "without one only a whole task can be changed: use the root id")
        }
        return try await direct(action, on: task, dryRun: dryRun)
    }

    /// Writes a control request for the live owner and waits for its outcome.
    func request(
        _ action: ControlRequest.Action, on task: TaskRecord, owner: OwnerRecord, dryRun: Bool
    ) async throws -> Result {
        var result = Result(
            id: task.id, name: task.name, action: action.rawValue, via: "owner", ownerID: owner.id, status: nil,
            dryRun: dryRun, outcome: "would ask owner '\(owner.id)' to \(action.rawValue) it")
        if dryRun { return result }
        let requestID = try await store.checked {
            try await $0.addControlRequest(
                ControlRequest(taskID: task.id, action: action, ownerID: owner.id, requestedAt: Date()))
        }
        let deadline = ContinuousClock.now + wait
        while true {
            let request = try await store.checked { try await $0.controlRequest(id: requestID) }
            if let request, request.handledAt != nil {
                let outcome = request.outcome ?? "applied"
                guard outcome == "applied" else {
                    throw CLIError("owner '\(owner.id)' refused to \(action.rawValue) task '\(task.id)': \(outcome)")
                }
                result.outcome = "applied"
                return result
            }
            guard ContinuousClock.now < deadline else {
                throw CLIError(
                    "owner '\(owner.id)' did not handle the \(action.rawValue) request for task '\(task.id)' within "
                        + "\(wait.components.seconds) s; request #\(requestID) stays queued for it")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Changes the row itself: one transaction that checks the status and owner read before.
    func direct(_ action: ControlRequest.Action, on task: TaskRecord, dryRun: Bool) async throws -> Result {
        let now = Date()
        var changed = task
        changed.updatedAt = now
        let event: TaskEvent
        let allowed: Set<TaskStatus>
        switch action {
        case .pause:
            guard task.status == .pending else {
                throw CLIError(
                    "task '\(task.id)' is \(task.status) but no running executor holds it; only a pending task can be paused now")
            }
            allowed = [.pending]
            changed.status = .paused
            event = TaskEvent(taskID: task.id, rootID: task.rootID, kind: .paused, at: now, attempt: task.attempt,
                              progress: task.progress, message: "paused by progressctl")
        case .resume:
            allowed = [.paused]
            changed.status = .pending
            event = TaskEvent(taskID: task.id, rootID: task.rootID, kind: .resumed, at: now, attempt: task.attempt,
                              progress: task.progress, message: "resumed by progressctl")
        case .cancel, .remove:
            allowed = [.pending, .paused, .running]
            changed.status = .cancelled
            changed.finishedAt = now
            changed.leaseExpiresAt = nil
            event = TaskEvent(taskID: task.id, rootID: task.rootID, kind: .cancelled, at: now, attempt: task.attempt,
                              progress: task.progress, message: "cancelled by progressctl")
        case .retry:
            guard task.kind != nil else {
                throw CLIError(
                    "task '\(task.id)' (\(task.name)) is a closure task: only the process that defined its code can run it "
                        + "again, and no running executor holds it")
            }
            allowed = [.failed, .cancelled]
            changed.status = .pending
            changed.attempt = task.attempt + 1
            changed.errorType = nil
            changed.errorDescription = nil
            changed.finishedAt = nil
            changed.progress = nil
            changed.step = nil
            changed.ownerID = nil
            changed.leaseExpiresAt = nil
            changed.nextAttemptAt = nil
            event = TaskEvent(taskID: task.id, rootID: task.rootID, kind: .retried, at: now, attempt: changed.attempt,
                              message: "retried by progressctl")
        }
        var result = Result(
            id: task.id, name: task.name, action: action.rawValue, via: "direct", ownerID: task.ownerID,
            status: changed.status.rawValue, dryRun: dryRun,
            outcome: "\(task.status) → \(changed.status)" + (action == .retry ? ", attempt \(changed.attempt)" : ""))
        if dryRun { return result }
        let written = try await store.checked {
            try await $0.update(changed, ifStatusIn: allowed, ownerIs: task.ownerID, events: [event])
        }
        guard written else {
            let now = try await store.checked { try await $0.task(id: task.id) }
            let state = now.map { "it is \($0.status) now, held by \($0.ownerID.map { "'\($0)'" } ?? "no owner")" }
                ?? "it was removed"
            throw CLIError("task '\(task.id)' changed meanwhile (\(state)); nothing was changed")
        }
        if changed.status == .cancelled { try await cancelUnfinishedChildren(of: task, at: now) }
        result.outcome = "applied: " + result.outcome
        return result
    }

    /// After a root was cancelled directly: its unfinished children are cancelled too, so no node stays `running`
    /// under a finished root. (A second transaction: the store has no multi-row compare-and-set.)
    private func cancelUnfinishedChildren(of root: TaskRecord, at now: Date) async throws {
        let nodes = try await store.checked { try await $0.tree(of: root.id) }
        var records: [TaskRecord] = []
        var events: [TaskEvent] = []
        for var node in nodes.dropFirst() where !node.status.isFinished {
            node.status = .cancelled
            node.finishedAt = now
            node.updatedAt = now
            node.leaseExpiresAt = nil
            records.append(node)
            events.append(TaskEvent(taskID: node.id, rootID: node.rootID, kind: .cancelled, at: now,
                                    attempt: node.attempt, progress: node.progress,
                                    message: "cancelled with its root by progressctl"))
        }
        guard !records.isEmpty else { return }
        _ = try await store.checked { try await $0.apply(TaskBatch(records: records, events: events)) }
    }
}
