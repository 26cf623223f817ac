import CoreMetrics
import Foundation
import Logging
import Synchronization
import Tracing

/// Roots: adding them, giving them slots, running their code, recording how each run ended.
///
/// A root takes a slot when its start is staged — in the same commit as its insert when a slot is free — and its code
/// runs once that start is committed (so a process dying in it leaves it `running`, and recovery counts the
/// interruption). It gives the slot back as soon as its end is staged: the next root's start shares that commit.
///
/// A job queued here is unowned in the store until it starts: any worker on the database may claim it meanwhile, and
/// an operator changes it there directly. Its start takes it with a compare-and-set (unowned, still pending); when
/// that finds it taken or changed, the root is dropped from memory without running.
extension ExecutionEngine {
    /// Adds roots whose rows the writer inserts with its next batch (one commit for all, with the starts of those that
    /// get a slot at once). Returns their handles and the sequence to wait for.
    ///
    /// - Throws: ``ProgressionError/duplicateID(_:)`` when a root with one of the ids is in memory,
    ///   ``ProgressionError/shutDown``; nothing is added then.
    func addRoots(_ roots: [NewRoot]) throws(ProgressionError) -> (handles: [NodeHandle], sequence: Int64) {
        let now = now()
        let monotonicNow = clock.now()
        let added = try locked { state throws(ProgressionError) in
            try state.addRoots(roots, now: now, monotonicNow: monotonicNow)
        }
        carry(added.dispatch)
        for root in roots { metrics.kind(root.record.kind).submitted.increment() }
        return (added.handles, added.sequence)
    }

    /// Waits for new roots' rows to be committed. Those whose identity was taken are removed from memory and their ids
    /// returned.
    func commitNewRoots(_ handles: [NodeHandle], sequence: Int64) async throws -> [String] {
        do {
            // Just added: not committed yet, so the wait registers without a look first.
            try await waitForCommit(sequence, looksFirst: false)
        } catch {
            locked { $0.newRootsNotCommitted(handles) }
            throw error
        }
        return locked { $0.newRootsCommitted(handles) }
    }

    /// Carries out what a change of the run queue left to do, outside the lock.
    func carry(_ dispatch: Dispatch) {
        perform(dispatch.effects)
        for wake in dispatch.wakes { wake.resume() }
        launch(dispatch.launches)
        dispatch.writerWindow?.resume()
        if dispatch.wantsClaims { claimSignal.signal() }
    }

    /// Starts the roots the dispatcher gave slots.
    func launch(_ launches: [NodeHandle]) {
        for handle in launches {
            // Detached: a root outlives whoever caused its launch (a submit returns once the row is committed; a
            // claim pass or a freed slot launches others' jobs), and must not inherit that caller's cancellation,
            // priority or task-locals. It is not lost: the node keeps the task (`launched`), cancellation reaches it
            // through the node, and shutdown cancels and awaits every root's task.
            let task = Task.detached { await self.runRoot(handle) }
            let launched = locked { state in state.launched(handle, task) }
            launched.waiter?.resume(returning: task)
            if launched.cancel { task.cancel() }
        }
    }

    /// The run task of a root that a graceful stop found given a slot but not launched yet: waits for
    /// ``launch(_:)`` to make it (`nil` when the root was launched and has ended since).
    func runTask(launching handle: NodeHandle) async -> Task<Void, Never>? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Task<Void, Never>?, Never>) in
            let made = locked { $0.awaitLaunch(handle, continuation) }
            if let made { continuation.resume(returning: made) }
        }
    }

    /// Runs a root whose start is staged (it holds a slot): waits for the start's commit, runs its code, records how it
    /// ended, gives the slot back, and waits for that record's commit. A root whose start the store refused (another
    /// worker took it, or an operator changed it) is dropped without running.
    func runRoot(_ handle: NodeHandle) async {
        LatencyTimeline.mark(.runBegan)
        // The graph is entered three times on the way to the code (a look, the wait's registration when the start is
        // not committed yet, the start): each entry is one more chance to contend for the lock with the other tasks.
        enum Look {
            case gone
            case committed(RootBody)
            case waits(for: Int64, RootBody)
        }
        let look = locked { state -> Look in
            guard let node = state.nodes[handle], let body = node.body else { return .gone }
            // Its start staged (or, when its claim committed it, none), and any later transition staged since (a
            // pause, a cancel): it runs once that is committed.
            guard let staged = node.staged, staged.sequence > state.committedSequence else { return .committed(body) }
            return .waits(for: staged.sequence, body)
        }
        let body: RootBody
        switch look {
        case .gone:
            giveUpStart(handle)
            return
        case .committed(let committed):
            body = committed
        case .waits(let sequence, let waiting):
            do {
                try await waitForCommit(sequence, looksFirst: false)
            } catch {
                giveUpStart(handle)
                return
            }
            body = waiting
        }
        let monotonicNow = clock.now()
        let begun = locked { state -> (record: TaskRecord, stopped: Bool, effects: GraphEffects)? in
            guard let started = state.startCommitted(handle) else { return nil }
            let begun = state.beginExecution(handle, cancel: nil, now: monotonicNow)
            return (started, begun.stopped, begun.effects)
        }
        guard let begun else {
            giveUpStart(handle)
            return
        }
        perform(begun.effects)
        let started = begun.record
        let kind = metrics.kind(started.kind)
        kind.started.increment()
        if started.attempt > 1 {
            kind.retried.increment()
        } else if let startedAt = started.startedAt {
            kind.queueWait.recordNanoseconds(
                Int64(max(0, startedAt.timeIntervalSince(started.createdAt)) * 1_000_000_000))
        }
        let span = tracer.startSpan(started.name, context: .topLevel, ofKind: .internal)
        Self.describe(span, started)
        LatencyTimeline.mark(.codeBegan)
        // A root's code runs in its run task, which `stop` cancels.
        let context = LiveTaskContext(handle: handle, taskID: started.id, engine: self)
        let result: Result<Data?, any Error>
        if begun.stopped {
            result = .failure(CancellationError())
        } else {
            result = await ServiceContext.withValue(span.context) { () async -> Result<Data?, any Error> in
                do { return .success(try await body(context)) } catch { return .failure(error) }
            }
        }
        LatencyTimeline.mark(.codeReturned)
        Self.end(span, result)
        end(handle, result, started: started, kind: kind)
    }

    /// A task's attributes on its span (none on a span that records nothing: the default tracer's).
    static func describe(_ span: any Span, _ record: TaskRecord) {
        guard span.isRecording else { return }
        span.attributes["progression.task.id"] = record.id
        span.attributes["progression.task.kind"] = record.kind ?? "closure"
        span.attributes["progression.task.attempt"] = record.attempt
        if !record.isRoot { span.attributes["progression.task.root"] = record.rootID }
    }

    /// Ends a task's span, with its error.
    static func end<T>(_ span: any Span, _ result: Result<T, any Error>) {
        if case .failure(let error) = result {
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
        }
        span.end()
    }

    /// Records how a root's run ended (``GraphState/endRun(_:_:now:monotonicNow:random:configuration:)``), starts
    /// the root given its slot, and counts the run.
    func end(
        _ handle: NodeHandle, _ result: Result<Data?, any Error>, started: TaskRecord, kind: ExecutorMetrics.Kind
    ) {
        let now = now()
        let monotonicNow = clock.now()
        // The jitter of a retry's delay; drawing it costs a system call, so only a failure draws it.
        let random = if case .failure = result { Double.random(in: 0..<1) } else { 0.0 }
        let startedAt = started.startedAt ?? now
        let end = locked { state in
            // Its code no longer runs (its timeout and pause clock stop), in the same entry as the end.
            state.endExecution(handle)
            let end = state.endRun(
                handle, result, now: now, monotonicNow: monotonicNow, random: random, configuration: configuration)
            // Counted in the same entry: from its end the writer can take the run's rows (a writer already awake
            // does not wait for `carry` to wake it), and whoever their commit wakes (waitForTask) reads the run's
            // metrics. Counted after the entry, a loaded machine let a waiter read the failure's counter but not
            // yet its duration. (A metrics handler is a few atomics or a lock of its own; it never calls back.)
            if let ended = end.ended, !end.lost {
                Self.count(ended, kind, startedAt: startedAt, now: now, retryDelay: end.retryDelay)
            }
            return end
        }
        carry(end.dispatch)
        if let ended = end.ended, !end.lost { log(ended, retryDelay: end.retryDelay) }
    }

    /// Counts how a run ended and times it.
    private static func count(
        _ ended: TaskRecord, _ kind: ExecutorMetrics.Kind, startedAt: Date, now: Date, retryDelay: Duration?
    ) {
        let outcome: String
        switch ended.status {
        case .completed:
            outcome = "completed"
            kind.completed.increment()
        case .failed:
            outcome = "failed"
            kind.failed.increment()
        case .cancelled:
            outcome = "cancelled"
            kind.cancelled.increment()
        case .pending where retryDelay != nil, .paused where retryDelay != nil:
            outcome = "retrying"
        default:
            outcome = "released"
        }
        kind.durations[outcome]?.recordNanoseconds(Int64(max(0, now.timeIntervalSince(startedAt)) * 1_000_000_000))
    }

    /// Logs what an operator wants to know of a run's end (a retry, a failure).
    private func log(_ ended: TaskRecord, retryDelay: Duration?) {
        switch ended.status {
        case .failed:
            logger.info(
                "task failed",
                metadata: [
                    "task": "\(ended.id)", "kind": "\(ended.kind ?? "closure")", "attempt": "\(ended.attempt)",
                    "error": "\(ended.errorDescription ?? "")",
                ])
        case .pending where retryDelay != nil, .paused where retryDelay != nil:
            logger.info(
                "task failed; retrying",
                metadata: [
                    "task": "\(ended.id)", "kind": "\(ended.kind ?? "closure")", "attempt": "\(ended.attempt)",
                    "next": "\(ended.nextAttemptAt.map { "\($0)" } ?? "?")", "error": "\(ended.errorDescription ?? "")",
                ])
        default:
            break
        }
    }

    /// Gives a slot back without a run to record (see ``GraphState/giveUpStart(_:now:monotonicNow:)``).
    func giveUpStart(_ handle: NodeHandle) {
        let now = now()
        let monotonicNow = clock.now()
        carry(locked { state in state.giveUpStart(handle, now: now, monotonicNow: monotonicNow) })
    }

    /// Runs a subtask's code in a task of its own (so that it can be cancelled by id), under its timeout. (A root's
    /// runs in its run task: ``runRoot(_:)``.)
    func execute<T: Sendable>(
        _ handle: NodeHandle, taskID: String, _ body: @escaping @Sendable (any TaskContext) async throws -> T
    ) async -> Result<T, any Error> {
        let context = LiveTaskContext(handle: handle, taskID: taskID, engine: self)
        let work = Task { try await body(context) }
        if beginExecution(handle, cancel: { work.cancel() }) { work.cancel() }
        let result = await withTaskCancellationHandler {
            await work.result
        } onCancel: {
            work.cancel()
        }
        endExecution(handle)
        return result
    }

    /// Marks a node's code as running and arms its timeout. Returns whether it was asked to stop already.
    func beginExecution(_ handle: NodeHandle, cancel: (@Sendable () -> Void)?) -> Bool {
        let now = clock.now()
        let begun = locked { state in state.beginExecution(handle, cancel: cancel, now: now) }
        perform(begun.effects)
        return begun.stopped
    }

    private func endExecution(_ handle: NodeHandle) {
        locked { $0.endExecution(handle) }
    }
}
