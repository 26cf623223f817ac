import Foundation

/// A user's change of a task (pause, resume, cancel, run now), decided on the graph alone: each returns the
/// ``UserChangeAction`` that ``ExecutionEngine/change(_:_:)`` carries out once the lock is released. The slots of
/// the run queue change here and nowhere else for these changes: a paused running root gives its slot back at once,
/// a resumed one takes a free slot or waits in the queue for one.
///
/// `UserChangeTests` runs each change on each phase a root can be in, on the state alone.
extension GraphState {
    /// Applies `change` to the task `taskID` if it is in memory.
    ///
    /// - Parameters:
    ///   - now: the wall-clock time written in the task's record and events.
    ///   - monotonicNow: the executor's clock (pause durations and deadlines).
    /// - Throws: the lifecycle's refusal; nothing changes then.
    mutating func apply(
        _ change: UserChange, to taskID: String, now: Date, monotonicNow: Duration
    ) throws(ProgressionError) -> UserChangeAction {
        guard let node = node(id: taskID) else { return .elsewhere }
        if let sequence = node.root.handOffSequence { return .afterHandOff(sequence) }
        switch change {
        case .pause: return try pause(node, now: now, monotonicNow: monotonicNow)
        case .resume: return try resume(node, now: now, monotonicNow: monotonicNow)
        case .cancel: return try cancel(node, now: now)
        case .runNow: return try runNow(node, now: now, monotonicNow: monotonicNow)
        }
    }

    /// Pauses a task and (implied) everything below it. A running root gives its slot back at once (its code waits
    /// at its next report): a paused job does no work, and a slot held by it would let pauses stall the service.
    private mutating func pause(
        _ node: TaskNode, now: Date, monotonicNow: Duration
    ) throws(ProgressionError) -> UserChangeAction {
        let sequence = try transition(node, .pause, by: .user, now: now)
        _ = pauseChanged(below: node, now: monotonicNow)
        var dispatch = Dispatch()
        if node.isRoot, node.phase == .running, runQueue.release(node.handle) {
            node.phase = .suspended
            dispatch = self.dispatch(now: now, monotonicNow: monotonicNow)
        }
        return .commit(sequence, dispatch)
    }

    /// Resumes a paused task: its code (and the code below it) goes on; a root whose code waits takes the next free
    /// slot (it is pending until one frees); a root that had not started is queued again.
    private mutating func resume(
        _ node: TaskNode, now: Date, monotonicNow: Duration
    ) throws(ProgressionError) -> UserChangeAction {
        let sequence: Int64
        if node.isRoot, node.phase == .suspended {
            _ = try TaskLifecycle.outcome(
                of: .resume(codeRunning: true), status: node.record.status, options: node.record.options,
                isRoot: true, hasKind: node.record.kind != nil, taskID: node.record.id, by: .user)
            if runQueue.take(node.handle) {
                sequence = try transition(node, .resume(codeRunning: true), by: .user, now: now)
                node.phase = .running
            } else if mayHandOff(node) {
                // No slot is free here: the job goes to the fleet. Its code stays paused (it waits for a slot it
                // will not get) until the stop ends it; its end gives the root back to the store, unowned, where any
                // worker with a free slot of its kind claims it and continues it from its checkpoint.
                sequence = try transition(node, .resume(codeRunning: false), by: .user, now: now)
                node.waitsForSlot = true
                return .commitAndStop(sequence, ExecutionEngine.stop(node, .handedOff))
            } else {
                sequence = try transition(node, .resume(codeRunning: false), by: .user, now: now)
                node.waitsForSlot = true
                enqueue(node)
            }
        } else if node.isRoot, node.waitsForSlot {
            // Paused again while its code waited for a slot: it goes on waiting, in the queue where it is (its code
            // going on now would run a root on no slot).
            sequence = try transition(node, .resume(codeRunning: false), by: .user, now: now)
        } else {
            let codeRuns = node.execution != nil || node.phase == .running
            sequence = try transition(node, .resume(codeRunning: codeRuns), by: .user, now: now)
            if node.isRoot, node.phase == .idle, node.body != nil, node.record.status == .pending {
                enqueue(node)
            }
        }
        var dispatch = Dispatch()
        dispatch.wakes = pauseChanged(below: node, now: monotonicNow)
        dispatch += self.dispatch(now: now, monotonicNow: monotonicNow)
        return .commit(sequence, dispatch)
    }

    /// Asks a task to stop: code that runs (or waits, paused) is cancelled and its end is recorded when it stops; a
    /// root with no code under way (queued, paused before it started, waiting for its next attempt) ends at once.
    private mutating func cancel(_ node: TaskNode, now: Date) throws(ProgressionError) -> UserChangeAction {
        _ = try TaskLifecycle.outcome(
            of: .cancel, status: node.record.status, options: node.record.options, isRoot: node.isRoot,
            hasKind: node.record.kind != nil, taskID: node.record.id, by: .user)
        // A root whose code has ended to sleep or wait (its end not settled yet) is cancelled as a root with no code.
        let codeEnded = node.isRoot && node.execution == nil && node.phase == .running && node.record.status != .running
        if !codeEnded, node.execution != nil || node.phase == .running || node.phase == .suspended {
            return .stop(ExecutionEngine.stop(node, .cancelled))
        }
        let sequence = try transition(node, .cancel, by: .user, now: now)
        if node.phase == .queued || node.phase == .delayed { node.phase = .idle }
        return .commitThenSettleIdle(sequence)
    }

    /// Runs a root that waits for a time (a run-at, a retry's backoff, a durable sleep) as soon as a slot is free.
    private mutating func runNow(
        _ node: TaskNode, now: Date, monotonicNow: Duration
    ) throws(ProgressionError) -> UserChangeAction {
        let sequence = try transition(node, .runNow, by: .user, now: now)
        var dispatch = Dispatch()
        if node.phase == .delayed, node.record.status == .pending {
            enqueue(node)
            dispatch = self.dispatch(now: now, monotonicNow: monotonicNow)
        }
        return .commit(sequence, dispatch)
    }
}

extension GraphState {
    /// Whether a root may be given to the fleet when no slot is free for it here (issue 37): a job of a registered
    /// kind, which any worker that registered it can continue from its checkpoint and completed steps; a closure task
    /// runs only here, and waits for a slot of this executor.
    func mayHandOff(_ node: TaskNode) -> Bool {
        // An executor whose scheduler does not run (never started) claims nothing: it keeps its jobs.
        node.isRoot && node.record.kind != nil && node.body != nil && !isShutDown && schedulerEnabled
    }

    /// Gives to the fleet a root with no code under way (a job whose retry is due while no slot is free here): it is
    /// released in the store — no owner, still pending with its error and due time, so the next worker to claim it
    /// begins its next attempt — and leaves memory once that is committed (``settle(_:)``); this executor's claims
    /// may take it back like any other. Returns whether it did (the lifecycle may refuse: it stays here then).
    mutating func handOff(_ node: TaskNode, now: Date) -> Bool {
        guard let sequence = try? transition(node, .release, by: .system, now: now, silent: true) else { return false }
        node.handOffSequence = sequence
        endedRuns.append((sequence, EndedRun(handle: node.handle, retryAt: nil, lost: false, forget: true, handedOff: true)))
        return true
    }

    /// Whether a retry of `taskID` may wait for the root to be idle: a root that runs is refused at once, unless it is
    /// being stopped (a retry right after a cancel), whose run is then waited for.
    ///
    /// - Throws: `notFound`; the lifecycle's refusal (`notRetryable`, `invalidState`).
    func checkRetry(_ taskID: String) throws(ProgressionError) {
        guard let node = node(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
        if !node.record.status.isFinished, node.stopReason == nil {
            _ = try TaskLifecycle.outcome(
                of: .retry, status: node.record.status, options: node.record.options, isRoot: node.isRoot,
                hasKind: node.record.kind != nil, taskID: taskID, by: .user)
        }
    }

    /// Runs an idle failed or cancelled root again, attempt + 1 (its completed subtasks are skipped): it is queued,
    /// and started when a slot is free.
    ///
    /// - Throws: `notFound`; `notRetryable` (its run has not ended); the lifecycle's refusal.
    mutating func retry(
        _ taskID: String, now: Date, monotonicNow: Duration
    ) throws(ProgressionError) -> UserChangeAction {
        guard let node = node(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
        guard node.phase == .idle else {
            throw ProgressionError.notRetryable(taskID: taskID, reason: "it is \(node.record.status)")
        }
        let sequence = try transition(node, .retry, by: .user, now: now)
        prepareRun(node)
        enqueue(node)
        return .commit(sequence, dispatch(now: now, monotonicNow: monotonicNow))
    }
}

/// A change a user (the API, an operator's request to this owner) asks of one task.
enum UserChange: String, Sendable, CaseIterable {
    case pause, resume, cancel, runNow

    /// The same change asked of the task where it is when it is not in this executor's memory.
    var request: ControlRequest.Action {
        switch self {
        case .pause: .pause
        case .resume: .resume
        case .cancel: .cancel
        case .runNow: .runNow
        }
    }
}

/// What a user's change of the graph leaves to do once the lock is released.
enum UserChangeAction {
    /// The task is not in this executor's memory: it is changed where it is (in the store, or by its live owner).
    case elsewhere
    /// Carry out `dispatch` (roots given a slot, paused code to wake), then return once `sequence` is committed.
    case commit(_ sequence: Int64, _ dispatch: Dispatch)
    /// Code runs: cancel it. Its end is recorded when it stops; the change returns without waiting for it.
    case stop(Cancellation)
    /// The task ended with the change: once `sequence` is committed, callers waiting for its root to be idle go on.
    case commitThenSettleIdle(_ sequence: Int64)
    /// Return once `sequence` is committed, and cancel the code (a resumed job handed to the fleet).
    case commitAndStop(_ sequence: Int64, Cancellation)
    /// Its root is being given to the fleet (``StopReason/handedOff``): once `sequence` is committed it has left
    /// memory, and the change is made where the job is then.
    case afterHandOff(_ sequence: Int64)
}
