import Foundation
import Logging
import Synchronization

/// Control: pause, resume, cancel, retry and remove, each through the lifecycle; and waiting for a root to be idle.
extension ExecutionEngine {
    /// Pauses a task and (implied) everything below it. Returns once the paused state is committed.
    ///
    /// - Throws: `notFound`, `notPausable`, `invalidState` (a finished task).
    func pause(_ taskID: String) async throws {
        let now = now()
        let sequence = try locked { state throws(ProgressionError) -> Int64 in
            guard let node = state.node(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
            let sequence = try state.transition(node, .pause, by: .user, now: now)
            _ = state.pauseChanged(below: node, now: clock.now())
            return sequence
        }
        try await waitForCommit(sequence)
    }

    /// Resumes a paused task: its code (and the code below it) goes on; a root that had not started is queued again.
    ///
    /// - Throws: `notFound`, `notPausable`, `invalidState` (not paused).
    func resume(_ taskID: String) async throws {
        let now = now()
        let (sequence, wake, launches) = try locked {
            state throws(ProgressionError) -> (Int64, [CheckedContinuation<Void, any Error>], [RootLaunch]) in
            guard let node = state.node(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
            let codeRuns = node.execution != nil || node.phase == .running
            let sequence = try state.transition(node, .resume(codeRunning: codeRuns), by: .user, now: now)
            let wake = state.pauseChanged(below: node, now: clock.now())
            var launches: [RootLaunch] = []
            if node.isRoot, node.phase == .idle, node.body != nil, node.record.status == .pending {
                node.phase = .queued
                state.runQueue.enqueue(.node(node.handle), priority: node.record.priority, createdAt: node.record.createdAt)
                launches = state.dispatch(now: now)
            }
            return (sequence, wake, launches)
        }
        for waiter in wake { waiter.resume() }
        launch(launches)
        try await waitForCommit(sequence)
    }

    /// Asks a task to stop: its code and everything below it are cancelled, and it ends `cancelled` once its code has
    /// stopped (a root that is not running ends at once). Returns without waiting for running code.
    ///
    /// - Throws: `notFound`, `notCancellable`, `invalidState` (a finished task).
    func cancel(_ taskID: String) async throws {
        let now = now()
        let (sequence, cancellation) = try locked {
            state throws(ProgressionError) -> (Int64?, Cancellation) in
            guard let node = state.node(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
            _ = try TaskLifecycle.outcome(
                of: .cancel, status: node.record.status, options: node.record.options, isRoot: node.isRoot,
                hasKind: node.record.kind != nil, taskID: taskID, by: .user)
            if node.execution != nil || node.phase == .running {
                return (nil, Self.stop(node, .cancelled))
            }
            // Queued, paused before it started, or waiting for its next attempt: no code to stop.
            let sequence = try state.transition(node, .cancel, by: .user, now: now)
            if node.phase == .queued || node.phase == .delayed { node.phase = .idle }
            return (sequence, Cancellation())
        }
        cancellation.run()
        if let sequence {
            try await waitForCommit(sequence)
            resumeIdleWaiters(taskID)
        }
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
    func leaseLost(_ ids: [String]) {
        logger.warning("lost tasks to another owner; stopping them here", metadata: ["tasks": "\(ids)"])
        let cancellation = locked { state in
            var cancellation = Cancellation()
            for id in ids {
                guard let node = state.node(id: id) else { continue }
                // Whatever stopped it before (a shutdown, a cancel): nothing more is written for it here.
                node.root.stopReason = .leaseLost
                cancellation.actions += Self.stop(node.root, .leaseLost).actions
            }
            return cancellation
        }
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
        let (sequence, launches) = try locked {
            state throws(ProgressionError) -> (Int64, [RootLaunch]) in
            guard let node = state.node(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
            guard node.phase == .idle else {
                throw ProgressionError.notRetryable(taskID: taskID, reason: "it is \(node.record.status)")
            }
            let sequence = try state.transition(node, .retry, by: .user, now: now)
            state.prepareRun(node)
            node.phase = .queued
            state.runQueue.enqueue(.node(node.handle), priority: node.record.priority, createdAt: node.record.createdAt)
            return (sequence, state.dispatch(now: now))
        }
        launch(launches)
        try await waitForCommit(sequence)
    }

    /// Waits until a root is idle: its code has ended and its end is committed, and it waits for no automatic retry
    /// (a root unknown here is idle).
    func waitUntilIdle(_ taskID: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = locked { state -> Bool in
                guard let node = state.node(id: taskID) else {
                    // Claimed and queued without its tree: wait for it to be loaded and to run.
                    guard state.claimedIDs.contains(taskID), !state.isShutDown else { return true }
                    state.claimWaiters[taskID, default: []].append(continuation)
                    return false
                }
                guard node.isRoot, node.phase != .idle else { return true }
                node.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }

    /// Resumes the callers of `waitForTask` of a root that became idle.
    func resumeIdleWaiters(_ taskID: String) {
        locked { state in
            guard let node = state.node(id: taskID), node.phase == .idle else { return }
            state.setIdle(node)
        }
    }
}

/// Cancellations collected under the lock, run after it is released.
struct Cancellation: Sendable {
    var actions: [@Sendable () -> Void] = []

    func run() {
        for action in actions { action() }
    }
}
