import Foundation
import Logging
import Synchronization

/// Control: pause, resume, cancel, retry and remove, each through the lifecycle; and waiting for a root to be idle.
extension ExecutionEngine {
    /// Pauses, resumes, cancels or runs now a task: decided on the graph (``GraphState/apply(_:to:now:monotonicNow:)``)
    /// and carried out here. A pause, resume or run-now returns once its state is committed; a cancel of running code
    /// returns without waiting for the code to stop, and a cancel of a task with no code under way once the cancel is
    /// committed (callers waiting for its root are then resumed). A task not in memory is changed where it is (see
    /// ``changeElsewhere(_:_:)``).
    ///
    /// - Throws: `notFound`; the lifecycle's refusal (`notPausable`, `notCancellable`, `invalidState`).
    func change(_ change: UserChange, _ taskID: String) async throws {
        let now = now()
        let monotonicNow = clock.now()
        let action = try locked { state throws(ProgressionError) in
            try state.apply(change, to: taskID, now: now, monotonicNow: monotonicNow)
        }
        try await carryOut(action, taskID, elsewhere: change.request, change: change)
    }

    /// Carries out what a user's change of the graph left to do (`elsewhere`: the request to make where the task is,
    /// when it is not in memory; `change`: the change, to make again after a hand-off).
    private func carryOut(
        _ action: UserChangeAction, _ taskID: String, elsewhere request: ControlRequest.Action,
        change: UserChange? = nil
    ) async throws {
        switch action {
        case .elsewhere:
            try await changeElsewhere(taskID, request)
        case .commit(let sequence, let dispatch):
            carry(dispatch)
            try await waitForCommit(sequence)
        case .stop(let cancellation):
            cancellation.run()
        case .commitThenSettleIdle(let sequence):
            try await waitForCommit(sequence)
            resumeIdleWaiters(taskID)
        case .commitAndStop(let sequence, let cancellation):
            cancellation.run()
            try await waitForCommit(sequence)
        case .afterHandOff(let sequence):
            // Nothing more is written for it here (a write behind the hand-off would meet another owner, or a row
            // the fleet changed): the change is made where the job is once the hand-off is committed.
            try await waitForCommit(sequence)
            if let change {
                try await changeAfterHandOff(change, taskID)
            } else {
                try await changeElsewhere(taskID, request)
            }
        }
    }

    /// Makes a change that met its job being handed to the fleet, once the hand-off is committed (the root has left
    /// memory then), where the job is now: by its new owner, or in the store — or here again, when this executor's
    /// own claim took it back: then in memory once the claim has loaded it (a change in the store under a claim
    /// being loaded would be overwritten by the loaded copy's start).
    ///
    /// - Throws: as ``change(_:_:)``; ``ProgressionError/refusedByOwner(taskID:owner:reason:)`` when this executor's
    ///   claim has not loaded it within ``TaskExecutor/Configuration/controlAnswerTimeout``.
    private func changeAfterHandOff(_ change: UserChange, _ taskID: String) async throws {
        let deadline = ContinuousClock.now + configuration.controlAnswerTimeout
        while true {
            if locked({ $0.node(id: taskID) != nil }) { return try await self.change(change, taskID) }
            guard let stored = try await store.task(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
            let owner = stored.isRoot ? stored.ownerID : try await store.task(id: stored.rootID)?.ownerID
            guard owner == ownerID else { return try await changeElsewhere(taskID, change.request) }
            guard ContinuousClock.now < deadline else {
                throw ProgressionError.refusedByOwner(
                    taskID: taskID, owner: ownerID, reason: "its claim by this executor was not loaded in time")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Changes a task that is not in this executor's memory where it is: through a control request when another live
    /// owner holds its root (waiting for that owner's answer), else in the store with a compare-and-set on its status
    /// and owner (as progressctl does when no live owner holds it: a job waiting for a slot, scheduled, sleeping or
    /// paused in the store).
    ///
    /// - Throws: `notFound`; the lifecycle's refusal; ``ProgressionError/refusedByOwner(taskID:owner:reason:)`` when
    ///   the owner refused or did not answer within ``TaskExecutor/Configuration/controlAnswerTimeout``.
    func changeElsewhere(_ taskID: String, _ action: ControlRequest.Action) async throws {
        guard let stored = try await store.task(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
        let root = stored.isRoot ? stored : try await store.task(id: stored.rootID)
        if let owner = root?.ownerID, owner != ownerID,
            let record = try await store.owners().first(where: { $0.id == owner }),
            record.liveness(now: now(), staleAfter: configuration.ownerStaleAfter, host: configuration.hostName).isAlive
        {
            let queue = try capabilities.require(
                capabilities.controlQueue, to: "ask another executor to change a task it holds")
            let id = try await queue.addControlRequest(
                ControlRequest(taskID: taskID, action: action, ownerID: owner, requestedAt: now()))
            let deadline = clock.now() + configuration.controlAnswerTimeout
            while clock.now() < deadline {
                if let handled = try await queue.controlRequest(id: id), let outcome = handled.outcome {
                    guard outcome == "applied" else {
                        throw ProgressionError.refusedByOwner(taskID: taskID, owner: owner, reason: outcome)
                    }
                    return
                }
                try await clock.sleep(.milliseconds(20))
            }
            throw ProgressionError.refusedByOwner(
                taskID: taskID, owner: owner,
                reason: "it did not answer within \(TaskTimeoutError.format(configuration.controlAnswerTimeout))")
        }
        try await changeInStore(taskID, ControlRequest.transition(of: action), expecting: stored)
    }

    /// Changes a task in the store with a compare-and-set on the status and owner read (`expecting`, else read now).
    func changeInStore(
        _ taskID: String, _ transition: TaskLifecycle.Transition, expecting stored: TaskRecord? = nil
    ) async throws {
        var read = stored
        if read == nil { read = try await store.task(id: taskID) }
        guard let read else { throw ProgressionError.notFound(taskID: taskID) }
        if case .runNow = transition, read.nextAttemptAt == nil {
            throw ProgressionError.invalidState(
                taskID: taskID, status: read.status, action: "run it now: it waits for no time")
        }
        do {
            _ = try await store.change(
                TaskChangeRequest(
                    taskID: taskID, transition: transition, requester: .operatorWithoutOwner, expectedStatus: read.status,
                    checksOwner: true, expectedOwner: read.ownerID, at: now()))
        } catch let error as TaskStoreError where error.reason == .notFound {
            throw ProgressionError.notFound(taskID: taskID)
        }
        storeChanged.store(true, ordering: .relaxed)
        claimSignal.signal()
    }

    /// Cancels every unfinished root whose options allow it.
    func cancelAll() async {
        let ids = locked { state in
            state.roots.filter { !$0.record.status.isFinished && $0.record.options.canCancel }.map(\.record.id)
        }
        for id in ids { try? await change(.cancel, id) }
    }

    /// Asks a node's code to stop; the first reason given wins. Returns the cancellation to run once the lock is
    /// released (cancelling a task runs its cancellation handlers at once, and they take the lock).
    static func stop(_ node: TaskNode, _ reason: StopReason) -> Cancellation {
        // A cancel (or a timeout, or another owner) that comes while the code stops to sleep or wait ends the task
        // instead: it is not lost behind the wait.
        if node.stopReason == nil || (node.stopReason?.suspendsRoot == true && !reason.suspendsRoot && reason != .shutdown) {
            node.stopReason = reason
        }
        var cancellation = Cancellation()
        if let execution = node.execution { cancellation.actions.append(execution.cancel) }
        if node.isRoot, let task = node.runTask { cancellation.actions.append { task.cancel() } }
        return cancellation
    }

    /// Stops the code of tasks another owner took: nothing more is written for them. Jobs queued here that another
    /// worker claimed first (or an operator changed) left memory already, without a word: that is how a fleet shares
    /// a backlog.
    func leaseLost(_ ids: [String], childJobsTaken: Bool = false) {
        let stopped = stopLost(ids)
        guard !stopped.isEmpty else { return }
        let lost = stopped.map(\.id)
        if childJobsTaken {
            logger.info(
                "child jobs taken back by their parent's end or pause; stopping them here", metadata: ["tasks": "\(lost)"])
        } else {
            logger.warning("lost tasks to another owner; stopping them here", metadata: ["tasks": "\(lost)"])
        }
    }

    /// Stops the code of the tasks whose writes the store refused (see ``GraphState/stopLostRoots(_:)``); returns
    /// those stopped, with their roots.
    func stopLost(_ ids: [String]) -> [(id: String, rootID: String)] {
        let stopped = locked { $0.stopLostRoots(ids) }
        stopped.cancellation.run()
        return stopped.tasks
    }

    /// Says who took the roots of tasks stopped because the store refused their writes, from their rows read now
    /// (``LostRootAttribution``): a loss to another owner is a warning with what the store holds; a root this
    /// executor's own claim took (and loads again) is not a loss.
    func sayWhoTook(_ stopped: [(id: String, rootID: String)]) async {
        guard !stopped.isEmpty else { return }
        var rows: [String: String??] = [:]
        for rootID in Set(stopped.map(\.rootID)) {
            let row: TaskRecord?
            do { row = try await store.task(id: rootID) } catch { continue }
            rows[rootID] = .some(row.map(\.ownerID))
        }
        let said = LostRootAttribution(stopped, rows: rows, me: ownerID)
        if !said.own.isEmpty {
            logger.debug(
                "claimed by this executor while their start was on its way; loading them again",
                metadata: ["tasks": "\(said.own)"])
        }
        if !said.lost.isEmpty {
            logger.warning(
                "lost tasks to another owner; stopping them here",
                metadata: ["tasks": "\(said.lost)", "roots": "\(said.holders.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" })"])
        }
    }

    /// Runs a failed or cancelled root in memory again, attempt + 1: its completed subtasks are skipped.
    ///
    /// - Throws: `notFound`, `notRetryable`.
    func retry(_ taskID: String) async throws {
        try locked { state throws(ProgressionError) in try state.checkRetry(taskID) }
        await waitUntilIdle(taskID)
        let now = now()
        let monotonicNow = clock.now()
        let action = try locked { state throws(ProgressionError) in
            try state.retry(taskID, now: now, monotonicNow: monotonicNow)
        }
        try await carryOut(action, taskID, elsewhere: .retry)
    }

    /// Waits until a root is idle: its code has ended and its end is committed, and it waits for no automatic retry
    /// (a root unknown here is idle).
    func waitUntilIdle(_ taskID: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if locked({ $0.waitUntilIdle(taskID, continuation) }) { continuation.resume() }
        }
    }

    /// Resumes the callers of `waitForTask` of a root that became idle.
    func resumeIdleWaiters(_ taskID: String) {
        perform(locked { $0.idleWaiters(of: taskID) })
    }
}

/// Cancellations collected under the lock, run after it is released.
struct Cancellation: Sendable {
    var actions: [@Sendable () -> Void] = []

    func run() {
        for action in actions { action() }
    }
}
