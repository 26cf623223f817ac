import Foundation
import Progression

/// Changes tasks the way DESIGN.md's "Control from another process" says: through a control request when a live
/// owner holds the task's tree, else directly with one compare-and-set transaction on the status and owner read. Both
/// ask the library's ``TaskLifecycle`` whether the change is allowed; this file restates none of its rules.
///
/// Many tasks are changed with one look at the owners; the requests to live owners are all written first and then
/// awaited together, within one `--wait`.
///
/// Job trees: a change aimed at a link (the node of a parent's tree that stands for a child job) acts on that child
/// job. What a direct change of a job means for its tree (a parent's pause, resume or end reaching its child jobs, a
/// finished job's dependents, a child's state in its parent's link) is queued in the store with it; the tree keeper
/// of any worker carries it out, and so does ``settleJobTrees()`` right after the direct changes, so that it takes
/// effect at once also while no worker runs.
package struct TaskControl {
    package let store: OperatorStore
    /// How long to wait for live owners to handle the requests.
    package let wait: Duration

    package init(store: OperatorStore, wait: Duration) {
        self.store = store
        self.wait = wait
    }

    /// What a change did (or, on a dry run, would do), for people and for `--json`.
    package struct Change: Encodable, Sendable {
        package var id: String
        package var name: String
        package var action: String
        /// `owner` (a control request the owner applied) or `direct` (written by progressctl).
        package var via: String
        @Null package var ownerID: String?
        /// The status after the change (`null` when the owner applied it, which reports no status, or once removed).
        @Null package var status: String?
        package var dryRun: Bool
        package var outcome: String
        /// The link the change was aimed at, when it acted on the child job the link stands for (`id`).
        @Null package var link: String? = nil
        /// For a direct removal: the child jobs removed with the job (their own trees counted in the outcome).
        @Null package var childJobs: Int? = nil
    }

    /// A change refused for one task: the lifecycle does not allow it, the task changed since it was read, it is a
    /// subtask that no live owner holds, or its owner refused or did not answer in time. Nothing was changed for that
    /// task; the others of a change by filter go on.
    package struct Refusal: Error, Encodable, Sendable {
        package var id: String
        package var message: String

        package init(id: String, message: String) {
            self.id = id
            self.message = message
        }
    }

    /// What happened to one task.
    package enum Outcome: Sendable {
        case changed(Change)
        case refused(Refusal)
    }

    /// The lifecycle transition of a control action.
    package static func transition(_ action: ControlRequest.Action) -> TaskLifecycle.Transition {
        ControlRequest.transition(of: action)
    }

    /// The transition that decides whether `action` is allowed for a task in `status`: a forced removal of an
    /// unfinished task cancels it first, so that is what must be allowed.
    private static func deciding(_ action: ControlRequest.Action, status: TaskStatus) -> TaskLifecycle.Transition {
        action == .remove && !status.isFinished ? .cancel : transition(action)
    }

    /// Refuses `action` when the lifecycle does not allow it for `task` (as its live owner would see it, or, without
    /// one, as progressctl may change it itself).
    package static func check(_ action: ControlRequest.Action, _ task: TaskRecord, withOwner: Bool) throws(Refusal) {
        do {
            // Applied to a copy: the rules of the record too (run-now of a job that waits for no time, or for its
            // children, jobs or a signal), not only the table's.
            var copy = task
            _ = try TaskLifecycle.apply(
                deciding(action, status: task.status), to: &copy, now: Date(), by: withOwner ? .user : .operatorWithoutOwner)
        } catch {
            throw Refusal(id: task.id, message: error.description)
        }
    }

    /// The statuses in which `action` changes some root job (one whose options allow everything, held by a live
    /// owner), as the lifecycle says: what a change by filter selects when no `--status` is given. A status the
    /// action would leave as it is (pausing a paused task) is not one of them.
    package static func statuses(changedBy action: ControlRequest.Action) -> Set<TaskStatus> {
        let options = TaskOptions(canCancel: true, canPause: true, canRetry: true)
        return Set(
            TaskStatus.allCases.filter { status in
                guard
                    let outcome = try? TaskLifecycle.outcome(
                        of: deciding(action, status: status), status: status, options: options, isRoot: true,
                        hasKind: true, taskID: "", by: .user)
                else { return false }
                return outcome.status != status || outcome.event != nil
            })
    }

    /// The task a change aimed at `task` acts on: the child job of a link, else `task` itself.
    ///
    /// - Throws: ``Refusal`` when the link's child job was removed.
    package func target(of task: TaskRecord) async throws -> TaskRecord {
        guard let childID = task.childJobID else { return task }
        guard let child = try await store.checked({ try await $0.task(id: childID) }) else {
            throw Refusal(
                id: task.id,
                message: "'\(task.id)' (\(task.name.escapedForTerminal)) stands for the child job '\(childID)', which was removed")
        }
        return child
    }

    /// The most passes of the tree keeper after direct changes (each one transaction of at most
    /// ``settleBatch`` queued changes); what is left then is carried out by the workers' keepers.
    package static let settlePasses = 100
    /// The most queued changes one pass takes.
    package static let settleBatch = 500

    /// Carries out what direct changes queued for the tree keeper (see the type's description), until nothing is
    /// queued or ``settlePasses`` passes ran. Returns how many queued changes it took. A failure leaves the rest to
    /// the workers' keepers: the changes themselves are committed.
    @discardableResult
    package func settleJobTrees(at now: Date = Date()) async -> Int {
        var taken = 0
        for _ in 0..<Self.settlePasses {
            guard let count = try? await store.resolveJobTrees(at: now, limit: Self.settleBatch), count > 0 else { break }
            taken += count
        }
        return taken
    }

    /// The root of `task`'s tree.
    package func root(of task: TaskRecord) async throws -> TaskRecord {
        if task.isRoot { return task }
        guard let root = try await store.checked({ try await $0.task(id: task.rootID) }) else {
            throw CLIError("the root '\(task.rootID)' of task '\(task.id)' is missing")
        }
        return root
    }

    /// Applies `action` to one task: through its live owner, or directly.
    ///
    /// - Throws: ``CLIError`` with the refusal's message, or a store failure.
    package func perform(_ action: ControlRequest.Action, on task: TaskRecord, dryRun: Bool = false) async throws -> Change {
        switch try await perform(action, on: [task], dryRun: dryRun)[0] {
        case .changed(let change): return change
        case .refused(let refusal): throw CLIError(refusal.message)
        }
    }

    /// Applies `action` to each of `tasks`, in order; returns what happened to each. A refusal of one task does not
    /// stop the others.
    ///
    /// - Throws: a store failure (the database is busy, unreadable, gone): the tasks before it were changed, the
    ///   others not.
    package func perform(_ action: ControlRequest.Action, on tasks: [TaskRecord], dryRun: Bool) async throws -> [Outcome] {
        let owners = try await store.checked { try await $0.owners() }
        let liveOwners = Dictionary(
            owners.filter { $0.liveness().isAlive }.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var outcomes: [Outcome?] = Array(repeating: nil, count: tasks.count)
        var requests: [PendingRequest] = []
        var wroteDirectly = false
        for (index, aimed) in tasks.enumerated() {
            do {
                let task = try await target(of: aimed)
                let link = task.id == aimed.id ? nil : aimed.id
                let root = try await root(of: task)
                if let ownerID = root.ownerID, let owner = liveOwners[ownerID] {
                    try Self.check(action, task, withOwner: true)
                    let change = Change(
                        id: task.id, name: task.name, action: action.rawValue, via: "owner", ownerID: owner.id,
                        status: nil, dryRun: dryRun, outcome: "would ask owner '\(owner.id)' to \(action.rawValue) it",
                        link: link)
                    if dryRun {
                        outcomes[index] = .changed(change)
                    } else {
                        let requestID = try await store.checked {
                            try await $0.addControlRequest(
                                ControlRequest(taskID: task.id, action: action, ownerID: owner.id, requestedAt: Date()))
                        }
                        requests.append(PendingRequest(index: index, requestID: requestID, change: change))
                    }
                    continue
                }
                guard task.isRoot else {
                    throw Refusal(
                        id: task.id,
                        message: "task '\(task.id)' is part of '\(root.id)' (\(root.name.escapedForTerminal)), which "
                            + "no running executor holds; without one only a whole task can be changed: use the root id")
                }
                try Self.check(action, task, withOwner: false)
                var change = try await direct(action, on: task, dryRun: dryRun)
                change.link = link
                outcomes[index] = .changed(change)
                wroteDirectly = wroteDirectly || !dryRun
            } catch let refusal as Refusal {
                outcomes[index] = .refused(refusal)
            }
        }
        if wroteDirectly { await settleJobTrees() }
        for (index, outcome) in try await awaitHandling(requests, action: action) { outcomes[index] = outcome }
        return outcomes.map { $0 ?? .refused(Refusal(id: "?", message: "no outcome")) }
    }

    /// A control request written for a live owner, not handled yet.
    private struct PendingRequest {
        var index: Int
        var requestID: Int64
        var change: Change
    }

    /// Waits, until the one deadline `wait` from now, for the owners to handle `requests`; returns each one's outcome
    /// by its index. A request not handled in time stays queued for its owner.
    private func awaitHandling(
        _ requests: [PendingRequest], action: ControlRequest.Action
    ) async throws -> [(Int, Outcome)] {
        var waiting = requests
        var outcomes: [(Int, Outcome)] = []
        let deadline = ContinuousClock.now + wait
        while !waiting.isEmpty {
            var still: [PendingRequest] = []
            for pending in waiting {
                let request = try await store.checked { try await $0.controlRequest(id: pending.requestID) }
                guard let request, request.handledAt != nil else {
                    still.append(pending)
                    continue
                }
                let outcome = request.outcome ?? "applied"
                var change = pending.change
                let owner = change.ownerID ?? ""
                if outcome == "applied" {
                    change.outcome = "applied"
                    outcomes.append((pending.index, .changed(change)))
                } else {
                    outcomes.append((
                        pending.index,
                        .refused(Refusal(
                            id: change.id,
                            message: "owner '\(owner)' refused to \(action.rawValue) task '\(change.id)': \(outcome)"))
                    ))
                }
            }
            waiting = still
            guard !waiting.isEmpty else { break }
            guard ContinuousClock.now < deadline else {
                for pending in waiting {
                    let id = pending.change.id
                    outcomes.append((
                        pending.index,
                        .refused(Refusal(
                            id: id,
                            message: "owner '\(pending.change.ownerID ?? "")' did not handle the \(action.rawValue) "
                                + "request for task '\(id)' within \(Format.seconds(wait)); request "
                                + "#\(pending.requestID) stays queued for it"))
                    ))
                }
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return outcomes
    }

    /// Changes the row itself through the lifecycle, in one transaction that checks the status and owner read before
    /// (a cancelled root's unfinished subtasks are cancelled with it). A forced removal of an unfinished task cancels
    /// it first.
    package func direct(_ action: ControlRequest.Action, on task: TaskRecord, dryRun: Bool) async throws -> Change {
        let now = Date()
        let verb = action.pastTense
        var preview = task
        do {
            try TaskLifecycle.apply(Self.deciding(action, status: task.status), to: &preview, now: now, by: .operatorWithoutOwner)
        } catch {
            throw Refusal(id: task.id, message: error.description)
        }
        // A removal takes the job's child jobs with it (the store deletes them): counted from the links of its tree.
        var ownNodes = 0
        var childJobs: Int?
        if action == .remove {
            let tree = try await store.checked { try await $0.tree(of: task.id) }
            ownNodes = tree.count
            let links = tree.filter(\.isLink).count
            if links > 0 { childJobs = links }
        }
        var summary =
            action == .remove
            ? "deleted with its subtree and history"
            : "\(task.status) → \(preview.status)" + (action == .retry ? ", attempt \(preview.attempt)" : "")
        if let childJobs { summary += ", and its \(Self.childJobs(childJobs)) with theirs" }
        var result = Change(
            id: task.id, name: task.name, action: action.rawValue, via: "direct", ownerID: task.ownerID,
            status: action == .remove ? nil : preview.status.rawValue, dryRun: dryRun, outcome: summary,
            childJobs: childJobs)
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
            if let childJobs {
                let theirs = max(0, changed.deleted - ownNodes)
                result.outcome += ", \(Format.tasks(theirs)) of them in its \(Self.childJobs(childJobs))"
            }
        } else {
            result.outcome = "applied: " + summary
        }
        return result
    }

    /// `1 child job`, `3 child jobs`.
    static func childJobs(_ count: Int) -> String {
        "\(Format.count(count)) child job\(count == 1 ? "" : "s")"
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
        } catch let error as TaskStoreError where error.reason == .conflict || error.reason == .notFound {
            throw Refusal(id: task.id, message: "\(error.message); nothing was changed")
        } catch let error as TaskStoreError {
            throw CLIError(store: error)
        } catch let error as ProgressionError {
            throw Refusal(id: task.id, message: error.description)
        }
    }
}

extension ControlRequest.Action {
    /// `paused`, `cancelled`, …: what a change did, in summaries and the messages of direct changes.
    package var pastTense: String {
        switch self {
        case .pause: "paused"
        case .resume: "resumed"
        case .cancel: "cancelled"
        case .retry: "retried"
        case .remove: "removed"
        case .runNow: "run now"
        }
    }
}
