import Foundation
import Progression

/// Changes a task the way DESIGN.md's "Control from another process" says: through a control request when a live
/// owner holds the task's tree, else directly with one compare-and-set transaction on the status and owner read. Both
/// ask the library's ``TaskLifecycle`` whether the change is allowed; this file restates none of its rules.
struct TaskControl {
    let store: OperatorStore
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

    /// The lifecycle transition of a control action.
    static func transition(_ action: ControlRequest.Action) -> TaskLifecycle.Transition {
        switch action {
        case .pause: .pause
        case .resume: .resume(codeRunning: false)
        case .cancel: .cancel
        case .retry: .retry
        case .remove: .remove
        }
    }

    /// Refuses `action` when the lifecycle does not allow it for `task` (as its live owner would see it, or, without
    /// one, as progressctl may change it itself).
    static func check(_ action: ControlRequest.Action, _ task: TaskRecord, withOwner: Bool) throws {
        // A forced removal of an unfinished task cancels it first: that is what must be allowed.
        let transition = action == .remove && !task.status.isFinished ? .cancel : transition(action)
        do {
            _ = try TaskLifecycle.outcome(
                of: transition, status: task.status, options: task.options, isRoot: task.isRoot,
                hasKind: task.kind != nil, taskID: task.id, by: withOwner ? .user : .operatorWithoutOwner)
        } catch {
            throw CLIError(error.description)
        }
    }

    /// Applies `action` to `task`: through its live owner, or directly.
    func perform(_ action: ControlRequest.Action, on task: TaskRecord, dryRun: Bool = false) async throws -> Result {
        let root = try await root(of: task)
        if let owner = try await liveOwner(of: root) {
            try Self.check(action, task, withOwner: true)
            return try await request(action, on: task, owner: owner, dryRun: dryRun)
        }
        guard task.isRoot else {
            throw CLIError(
                "task '\(task.id)' is part of '\(root.id)' (\(root.name.escapedForTerminal)), which no running "
                    + "executor holds; without one only a whole task can be changed: use the root id")
        }
        try Self.check(action, task, withOwner: false)
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
                        + "\(Format.seconds(wait)); request #\(requestID) stays queued for it")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Changes the row itself through the lifecycle, in one transaction that checks the status and owner read before
    /// (a cancelled root's unfinished subtasks are cancelled with it). A forced removal of an unfinished task cancels
    /// it first.
    func direct(_ action: ControlRequest.Action, on task: TaskRecord, dryRun: Bool) async throws -> Result {
        let now = Date()
        let verb =
            switch action {
            case .pause: "paused"
            case .resume: "resumed"
            case .cancel: "cancelled"
            case .retry: "retried"
            case .remove: "removed"
            }
        var preview = task
        let transition = action == .remove && !task.status.isFinished ? .cancel : Self.transition(action)
        do {
            try TaskLifecycle.apply(transition, to: &preview, now: now, by: .operatorWithoutOwner)
        } catch {
            throw CLIError(error.description)
        }
        let summary =
            action == .remove
            ? "deleted with its subtree and history"
            : "\(task.status) → \(preview.status)" + (action == .retry ? ", attempt \(preview.attempt)" : "")
        var result = Result(
            id: task.id, name: task.name, action: action.rawValue, via: "direct", ownerID: task.ownerID,
            status: action == .remove ? nil : preview.status.rawValue, dryRun: dryRun, outcome: summary)
        if dryRun { return result }
        var expectedStatus = task.status
        if action == .remove, !task.status.isFinished {
            let cancelled = try await change(task, .cancel, expectedStatus: expectedStatus, message: "cancelled by progressctl to remove it", at: now)
            expectedStatus = cancelled.after?.status ?? .cancelled
        }
        let changed = try await change(
            task, Self.transition(action), expectedStatus: expectedStatus, message: "\(verb) by progressctl", at: now)
        if action == .remove {
            result.outcome = "deleted \(changed.deleted) task\(changed.deleted == 1 ? " with its" : "s with their") history"
        } else {
            result.outcome = "applied: " + summary
        }
        return result
    }

    private func change(
        _ task: TaskRecord, _ transition: TaskLifecycle.Transition, expectedStatus: TaskStatus, message: String,
        at now: Date
    ) async throws -> TaskChangeResult {
        do {
            return try await store.change(
                TaskChangeRequest(
                    taskID: task.id, transition: transition, requester: .operatorWithoutOwner,
                    expectedStatus: expectedStatus, checksOwner: true, expectedOwner: task.ownerID, message: message,
                    at: now))
        } catch let error as TaskStoreError where error.reason == .conflict {
            throw CLIError("\(error.message); nothing was changed")
        } catch let error as TaskStoreError {
            throw CLIError(store: error)
        } catch let error as ProgressionError {
            throw CLIError(error.description)
        }
    }
}
