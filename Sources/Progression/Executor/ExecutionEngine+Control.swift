import Foundation
import Logging
import Synchronization

/// Control: pause, resume, cancel, retry and remove, each through the lifecycle; and waiting for a root to be idle.
extension ExecutionEngine {
    /// Pauses a task and (implied) everything below it. Returns once the paused state is committed. A running root
    /// gives its slot back at once (its code waits at its next report): a paused job does no work, and a slot held by
    /// it would let pauses stall the service. A task not in memory is paused where it is (see
    /// ``changeElsewhere(_:_:)``).
    ///
    /// - Throws: `notFound`, `notPausable`, `invalidState` (a finished task).
    func pause(_ taskID: String) async throws {
        let now = now()
        let monotonicNow = clock.now()
        let done = try locked { state throws(ProgressionError) -> (Int64, Dispatch)? in
            guard let node = state.node(id: taskID) else { return nil }
            let sequence = try state.transition(node, .pause, by: .user, now: now)
            _ = state.pauseChanged(below: node, now: monotonicNow)
            var dispatch = Dispatch()
            if node.isRoot, node.phase == .running, state.runQueue.release(node.handle) {
                node.phase = .suspended
                dispatch = state.dispatch(now: now, monotonicNow: monotonicNow)
            }
            return (sequence, dispatch)
        }
        guard let (sequence, dispatch) = done else {
            try await changeElsewhere(taskID, .pause)
            return
        }
        carry(dispatch)
        try await waitForCommit(sequence)
    }

    /// Resumes a paused task: its code (and the code below it) goes on; a root whose code waits takes the next free
    /// slot (it is pending until one frees); a root that had not started is queued again.
    ///
    /// - Throws: `notFound`, `notPausable`, `invalidState` (not paused).
    func resume(_ taskID: String) async throws {
        let now = now()
        let monotonicNow = clock.now()
        let done = try locked { state throws(ProgressionError) -> (Int64, Dispatch)? in
            guard let node = state.node(id: taskID) else { return nil }
            let sequence: Int64
            if node.isRoot, node.phase == .suspended {
                _ = try TaskLifecycle.outcome(
                    of: .resume(codeRunning: true), status: node.record.status, options: node.record.options,
                    isRoot: true, hasKind: node.record.kind != nil, taskID: taskID, by: .user)
                if state.runQueue.take(node.handle) {
                    sequence = try state.transition(node, .resume(codeRunning: true), by: .user, now: now)
                    node.phase = .running
                } else {
                    sequence = try state.transition(node, .resume(codeRunning: false), by: .user, now: now)
                    node.waitsForSlot = true
                    state.enqueue(node)
                }
            } else if node.isRoot, node.waitsForSlot {
                // Paused again while its code waited for a slot: it goes on waiting, in the queue where it is (its
                // code going on now would run a root on no slot).
                sequence = try state.transition(node, .resume(codeRunning: false), by: .user, now: now)
            } else {
                let codeRuns = node.execution != nil || node.phase == .running
                sequence = try state.transition(node, .resume(codeRunning: codeRuns), by: .user, now: now)
                if node.isRoot, node.phase == .idle, node.body != nil, node.record.status == .pending {
                    state.enqueue(node)
                }
            }
            var dispatch = Dispatch()
            dispatch.wakes = state.pauseChanged(below: node, now: monotonicNow)
            dispatch += state.dispatch(now: now, monotonicNow: monotonicNow)
            return (sequence, dispatch)
        }
        guard let (sequence, dispatch) = done else {
            try await changeElsewhere(taskID, .resume)
            return
        }
        carry(dispatch)
        try await waitForCommit(sequence)
    }

    /// Asks a task to stop: its code and everything below it are cancelled, and it ends `cancelled` once its code has
    /// stopped (a root that is not running ends at once). Returns without waiting for running code.
    ///
    /// - Throws: `notFound`, `notCancellable`, `invalidState` (a finished task).
    func cancel(_ taskID: String) async throws {
        let now = now()
        let done = try locked {
            state throws(ProgressionError) -> (Int64?, Cancellation)? in
            guard let node = state.node(id: taskID) else { return nil }
            _ = try TaskLifecycle.outcome(
                of: .cancel, status: node.record.status, options: node.record.options, isRoot: node.isRoot,
                hasKind: node.record.kind != nil, taskID: taskID, by: .user)
            if node.execution != nil || node.phase == .running || node.phase == .suspended {
                return (nil, Self.stop(node, .cancelled))
            }
            // Queued, paused before it started, or waiting for its next attempt: no code to stop.
            let sequence = try state.transition(node, .cancel, by: .user, now: now)
            if node.phase == .queued || node.phase == .delayed { node.phase = .idle }
            return (sequence, Cancellation())
        }
        guard let (sequence, cancellation) = done else {
            try await changeElsewhere(taskID, .cancel)
            return
        }
        cancellation.run()
        if let sequence {
            try await waitForCommit(sequence)
            resumeIdleWaiters(taskID)
        }
    }

    /// Runs a root that waits for a time (a run-at, a retry's backoff, a durable sleep) as soon as a slot is free.
    ///
    /// - Throws: `notFound`, `invalidState` (a subtask, a finished root, or one that waits for no time).
    func runNow(_ taskID: String) async throws {
        let now = now()
        let done = try locked { state throws(ProgressionError) -> (Int64, Dispatch)? in
            guard let node = state.node(id: taskID) else { return nil }
            let sequence = try state.transition(node, .runNow, by: .user, now: now)
            var dispatch = Dispatch()
            if node.phase == .delayed, node.record.status == .pending {
                state.enqueue(node)
                dispatch = state.dispatch(now: now, monotonicNow: clock.now())
            }
            return (sequence, dispatch)
        }
        guard let (sequence, dispatch) = done else {
            try await changeElsewhere(taskID, .runNow)
            return
        }
        carry(dispatch)
        try await waitForCommit(sequence)
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
            let id = try await store.addControlRequest(
                ControlRequest(taskID: taskID, action: action, ownerID: owner, requestedAt: now()))
            let deadline = clock.now() + configuration.controlAnswerTimeout
            while clock.now() < deadline {
                if let handled = try await store.controlRequest(id: id), let outcome = handled.outcome {
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
        for id in ids { try? await cancel(id) }
    }

    /// Asks a node's code to stop; the first reason given wins. Returns the cancellation to run once the lock is
    /// released (cancelling a task runs its cancellation handlers at once, and they take the lock).
    static func stop(_ node: TaskNode, _ reason: StopReason) -> Cancellation {
        if node.stopReason == nil { node.stopReason = reason }
        var cancellation = Cancellation()
        if let execution = node.execution { cancellation.actions.append(execution.cancel) }
        if node.isRoot, let task = node.runTask { cancellation.actions.append { task.cancel() } }
        return cancellation
    }

    /// Stops the code of tasks another owner took (the store rejected their writes): nothing more is written for them.
    /// Jobs queued here that another worker claimed first (or an operator changed) left memory already, without a
    /// word: that is how a fleet shares a backlog.
    func leaseLost(_ ids: [String]) {
        let (lost, cancellation) = locked { state in
            var cancellation = Cancellation()
            var lost: [String] = []
            for id in ids {
                guard let node = state.node(id: id) else { continue }
                lost.append(id)
                // Whatever stopped it before (a shutdown, a cancel): nothing more is written for it here.
                node.root.stopReason = .leaseLost
                cancellation.actions += Self.stop(node.root, .leaseLost).actions
            }
            return (lost, cancellation)
        }
        guard !lost.isEmpty else { return }
        logger.warning("lost tasks to another owner; stopping them here", metadata: ["tasks": "\(lost)"])
        cancellation.run()
    }

    /// Runs a failed or cancelled root in memory again, attempt + 1: its completed subtasks are skipped.
    ///
    /// - Throws: `notFound`, `notRetryable`.
    func retry(_ taskID: String) async throws {
        // A root that runs is refused at once, unless it is being stopped (a retry right after a cancel): then its run
        // is waited for.
        try locked { state throws(ProgressionError) in
            guard let node = state.node(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
            if !node.record.status.isFinished, node.stopReason == nil {
                _ = try TaskLifecycle.outcome(
                    of: .retry, status: node.record.status, options: node.record.options, isRoot: node.isRoot,
                    hasKind: node.record.kind != nil, taskID: taskID, by: .user)
            }
        }
        await waitUntilIdle(taskID)
        let now = now()
        let (sequence, dispatch) = try locked {
            state throws(ProgressionError) -> (Int64, Dispatch) in
            guard let node = state.node(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
            guard node.phase == .idle else {
                throw ProgressionError.notRetryable(taskID: taskID, reason: "it is \(node.record.status)")
            }
            let sequence = try state.transition(node, .retry, by: .user, now: now)
            state.prepareRun(node)
            state.enqueue(node)
            return (sequence, state.dispatch(now: now, monotonicNow: clock.now()))
        }
        carry(dispatch)
        try await waitForCommit(sequence)
    }

    /// Waits until a root is idle: its code has ended and its end is committed, and it waits for no automatic retry
    /// (a root unknown here is idle).
    func waitUntilIdle(_ taskID: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = locked { state -> Bool in
                guard let node = state.node(id: taskID), node.isRoot, node.phase != .idle else { return true }
                node.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }

    /// Resumes the callers of `waitForTask` of a root that became idle.
    func resumeIdleWaiters(_ taskID: String) {
        perform(
            locked { state in
                guard let node = state.node(id: taskID), node.phase == .idle else { return GraphEffects() }
                return state.setIdle(node)
            })
    }
}

/// Cancellations collected under the lock, run after it is released.
struct Cancellation: Sendable {
    var actions: [@Sendable () -> Void] = []

    func run() {
        for action in actions { action() }
    }
}
