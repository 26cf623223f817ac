import CoreMetrics
import Foundation
import Logging
import Synchronization
import Tracing

/// A root to add: its record, its creation event and its code.
struct NewRoot: Sendable {
    var record: TaskRecord
    var body: @Sendable (any TaskContext) async throws -> Void
}

/// Something the dispatcher started, to launch outside the lock.
enum RootLaunch: Sendable {
    /// A root in memory whose start is staged.
    case node(NodeHandle)
    /// A claimed root: its tree is loaded, then it starts.
    case claimed(ClaimedRoot)
}

/// Roots: adding them, giving them slots, running their code, recording how each run ended.
///
/// A root takes a slot when its start is staged — in the same commit as its insert when a slot is free — and its code
/// runs once that start is committed (so a process dying in it leaves it `running`, and recovery counts the
/// interruption). It gives the slot back as soon as its end is staged: the next root's start shares that commit.
extension ExecutionEngine {
    /// Adds roots whose rows the writer inserts with its next batch (one commit for all, with the starts of those that
    /// get a slot at once). Returns their handles and the sequence to wait for.
    ///
    /// - Throws: ``ProgressionError/duplicateID(_:)`` when a root with one of the ids is in memory,
    ///   ``ProgressionError/shutDown``; nothing is added then.
    func addRoots(_ roots: [NewRoot]) throws(ProgressionError) -> (handles: [NodeHandle], sequence: Int64) {
        let now = now()
        let (handles, sequence, launches) = try locked {
            state throws(ProgressionError) -> ([NodeHandle], Int64, [RootLaunch]) in
            guard !state.isShutDown else { throw ProgressionError.shutDown }
            for root in roots where state.handles[root.record.id] != nil {
                throw ProgressionError.duplicateID(root.record.id)
            }
            var handles: [NodeHandle] = []
            handles.reserveCapacity(roots.count)
            for root in roots {
                let node = state.addRoot(root.record, stored: false)
                node.body = root.body
                state.append(
                    TaskEvent(
                        taskID: root.record.id, rootID: root.record.id, kind: .created, at: root.record.createdAt,
                        attempt: root.record.attempt, message: root.record.name))
                if root.record.status != .paused {
                    node.phase = .queued
                    state.runQueue.enqueue(.node(node.handle), priority: root.record.priority, createdAt: root.record.createdAt)
                }
                handles.append(node.handle)
            }
            let launches = state.dispatch(now: now)
            return (handles, state.changeSequence, launches)
        }
        launch(launches)
        wakeWriter(urgent: true)
        for root in roots { metrics.kind(root.record.kind).submitted.increment() }
        return (handles, sequence)
    }

    /// Waits for new roots' rows to be committed. Those whose identity was taken are removed from memory and their ids
    /// returned.
    func commitNewRoots(_ handles: [NodeHandle], sequence: Int64) async throws -> [String] {
        do {
            try await waitForCommit(sequence)
        } catch {
            locked { state in
                for handle in handles { if let node = state.nodes[handle] { state.removeRoot(node) } }
            }
            throw error
        }
        return locked { state in
            var conflicted: [String] = []
            for handle in handles {
                guard let node = state.nodes[handle], node.conflicted else { continue }
                conflicted.append(node.record.id)
                node.stopReason = .leaseLost
                state.removeRoot(node)
            }
            return conflicted
        }
    }

    /// Starts the tasks the dispatcher handed out.
    func launch(_ launches: [RootLaunch]) {
        for launch in launches {
            switch launch {
            case .node(let handle):
                let task = Task.detached { await self.runRoot(handle) }
                let cancel = locked { state -> Bool in
                    guard let node = state.nodes[handle] else { return false }
                    node.runTask = task
                    return node.effectiveStop != nil
                }
                if cancel { task.cancel() }
            case .claimed(let claimed):
                let task = Task.detached { await self.runClaimed(claimed) }
                locked { $0.claimedRuns[claimed.id] = task }
            }
        }
    }

    /// Runs a root whose start is staged (it holds a slot): waits for the start's commit, runs its code, records how it
    /// ended, gives the slot back, and waits for that record's commit.
    func runRoot(_ handle: NodeHandle) async {
        let start = locked { state -> (sequence: Int64, body: @Sendable (any TaskContext) async throws -> Void)? in
            guard let node = state.nodes[handle], let body = node.body else { return nil }
            return (node.staged?.sequence ?? state.changeSequence, body)
        }
        guard let start else {
            releaseSlot()
            return
        }
        do {
            try await waitForCommit(start.sequence)
        } catch {
            releaseSlot()
            return
        }
        let started = locked { state -> TaskRecord? in
            guard let node = state.nodes[handle], !node.conflicted, !node.removed else { return nil }
            return node.record
        }
        guard let started else {
            releaseSlot()
            return
        }
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
        let result = await ServiceContext.withValue(span.context) {
            await execute(handle, isRoot: true) { context in try await start.body(context) }
        }
        Self.end(span, result)
        end(handle, result.map { _ in nil }, started: started)
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

    /// Records how a root's run ended and gives its slot to the next root. Once the record is committed (the writer
    /// settles it then, without a task waiting), the root waits for its next attempt or is idle.
    func end(_ handle: NodeHandle, _ result: Result<Data?, any Error>, started: TaskRecord) {
        let now = now()
        let monotonicNow = clock.now()
        // The jitter of a retry's delay; drawing it costs a system call, so only a failure draws it.
        let random = if case .failure = result { Double.random(in: 0..<1) } else { 0.0 }
        let (retryDelay, lost, launches, ended) = locked {
            state -> (Duration?, Bool, [RootLaunch], TaskRecord?) in
            state.runQueue.running -= 1
            guard let node = state.nodes[handle] else { return (nil, false, state.dispatch(now: now), nil) }
            let lost = node.effectiveStop?.reason == .leaseLost
            let (sequence, delay) = state.finish(node, result, now: now, random: random, configuration: configuration)
            let run = EndedRun(handle: handle, retryAt: delay.map { monotonicNow + $0 }, lost: lost)
            if let sequence, sequence > state.committedSequence {
                state.endedRuns.append((sequence, run))
            } else {
                state.settle(run)
            }
            return (delay, lost, state.dispatch(now: now), node.record)
        }
        launch(launches)
        // Whoever waits for this root (waitForTask, a retry by hand) waits for the commit: no batching window.
        wakeWriter(urgent: true)
        if let ended, !lost { record(ended, startedAt: started.startedAt ?? now, now: now, retryDelay: retryDelay) }
    }

    /// Counts how a run ended, times it, and logs what an operator wants to know (a retry, a failure).
    private func record(_ ended: TaskRecord, startedAt: Date, now: Date, retryDelay: Duration?) {
        let kind = metrics.kind(ended.kind)
        let outcome: String
        switch ended.status {
        case .completed:
            outcome = "completed"
            kind.completed.increment()
        case .failed:
            outcome = "failed"
            kind.failed.increment()
            logger.info(
                "task failed",
                metadata: [
                    "task": "\(ended.id)", "kind": "\(ended.kind ?? "closure")", "attempt": "\(ended.attempt)",
                    "error": "\(ended.errorDescription ?? "")",
                ])
        case .cancelled:
            outcome = "cancelled"
            kind.cancelled.increment()
        case .pending where retryDelay != nil, .paused where retryDelay != nil:
            outcome = "retrying"
            logger.info(
                "task failed; retrying",
                metadata: [
                    "task": "\(ended.id)", "kind": "\(ended.kind ?? "closure")", "attempt": "\(ended.attempt)",
                    "next": "\(ended.nextAttemptAt.map { "\($0)" } ?? "?")", "error": "\(ended.errorDescription ?? "")",
                ])
        default:
            outcome = "released"
        }
        kind.durations[outcome]?.recordNanoseconds(Int64(max(0, now.timeIntervalSince(startedAt)) * 1_000_000_000))
    }

    /// Gives a slot back without a run to record (a start that was not committed, a root gone meanwhile).
    func releaseSlot() {
        let now = now()
        let launches = locked { state in
            state.runQueue.running -= 1
            return state.dispatch(now: now)
        }
        launch(launches)
    }

    /// Runs a node's code (a root's in the calling task, a subtask's in a task of its own, so that it can be cancelled
    /// by id), under the node's timeout.
    func execute<T: Sendable>(
        _ handle: NodeHandle, isRoot: Bool, _ body: @escaping @Sendable (any TaskContext) async throws -> T
    ) async -> Result<T, any Error> {
        let context = LiveTaskContext(handle: handle, taskID: locked { $0.nodes[handle]?.record.id ?? "" }, engine: self)
        if isRoot {
            let stopped = beginExecution(handle, cancel: nil)
            if stopped { return .failure(CancellationError()) }
            let result: Result<T, any Error>
            do { result = .success(try await body(context)) } catch { result = .failure(error) }
            endExecution(handle)
            return result
        }
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
        let (stopped, wake) = locked { state -> (Bool, Bool) in
            guard let node = state.nodes[handle] else { return (true, false) }
            // A root's code runs in its run task, which `stop` cancels.
            node.execution = Execution(
                cancel: cancel ?? {}, startedAt: now, pausedSince: node.isEffectivelyPaused ? now : nil)
            node.rate.restart()
            var wake = false
            if let timeout = node.record.options.timeout {
                wake = state.timers.add(.timeout(handle), at: now + timeout)
            }
            return (node.effectiveStop != nil, wake)
        }
        if wake { timerSignal.signal() }
        return stopped
    }

    private func endExecution(_ handle: NodeHandle) {
        locked { $0.nodes[handle]?.execution = nil }
    }
}

/// What a root's run leaves to do once the record of its end is committed.
struct EndedRun: Sendable {
    let handle: NodeHandle
    /// When its next attempt is due, on the executor's monotonic clock (an automatic retry).
    let retryAt: Duration?
    /// Another owner took it: forgotten here.
    let lost: Bool
}

extension GraphState {
    /// Settles a root whose end is committed: forgotten (another owner runs it), waiting for its next attempt, or idle.
    /// Sets ``timersChanged`` when its retry is the timer loop's earliest deadline.
    mutating func settle(_ run: EndedRun) {
        guard let node = nodes[run.handle] else { return }
        node.runTask = nil
        if run.lost {
            setIdle(node)
            removeRoot(node)
            return
        }
        if let retryAt = run.retryAt, !isShutDown {
            node.phase = .delayed
            node.startsNewAttempt = true
            if timers.add(.retry(run.handle), at: retryAt) { timersChanged = true }
            return
        }
        setIdle(node)
    }

    /// Settles the ended roots whose end is committed up to `sequence`.
    mutating func settleEndedRuns(upTo sequence: Int64) {
        guard let first = endedRuns.first, first.sequence <= sequence else { return }
        let count = endedRuns.firstIndex { $0.sequence > sequence } ?? endedRuns.count
        let settled = endedRuns.prefix(count)
        endedRuns.removeFirst(count)
        for entry in settled { settle(entry.run) }
    }

    /// Starts queued roots while slots are free: stages each one's start (a new attempt first, for an automatic
    /// retry) and takes its slot. Returns what to launch.
    mutating func dispatch(now: Date) -> [RootLaunch] {
        var launches: [RootLaunch] = []
        guard !isShutDown else { return launches }
        while let next = runQueue.next() {
            switch next {
            case .node(let handle):
                guard let node = nodes[handle], node.phase == .queued else { continue }
                guard node.record.status == .pending else {
                    // Paused or finished while it waited: not run (a resume queues it again).
                    setIdle(node)
                    continue
                }
                if node.startsNewAttempt {
                    node.startsNewAttempt = false
                    _ = try? transition(node, .beginAttempt, by: .system, now: now)
                    prepareRun(node)
                }
                do {
                    try transition(node, .start, by: .system, now: now)
                } catch {
                    setIdle(node)
                    continue
                }
                node.stopReason = nil
                node.phase = .running
                runQueue.running += 1
                launches.append(.node(handle))
            case .claimed(let claimed):
                runQueue.running += 1
                launches.append(.claimed(claimed))
            }
        }
        return launches
    }

    /// Prepares a root (or a subtask run again) for a new run: its subtasks are found again by name and occurrence,
    /// its progress starts over from what it showed.
    mutating func prepareRun(_ node: TaskNode) {
        node.nameCounts = [:]
        node.stopReason = nil
        node.progress.reset(floor: node.record.progress)
        node.rate.restart()
    }

    /// Records how a node's code ended, through the lifecycle: completed, failed (or, for a root whose retry policy
    /// allows it, waiting for its next attempt), cancelled, or handed back by a graceful stop. A subtask cancelled
    /// with an ancestor ends silently (its ancestor's event implies it); a task another owner took is left alone.
    /// Returns the sequence to wait for, and the delay before an automatic retry.
    mutating func finish(
        _ node: TaskNode, _ result: Result<Data?, any Error>, now: Date, random: Double,
        configuration: TaskExecutor.Configuration
    ) -> (Int64?, Duration?) {
        let stop = node.effectiveStop
        var retryDelay: Duration?
        do {
            switch (result, stop?.reason) {
            case (_, .leaseLost?):
                return (nil, nil)
            case (.failure, .shutdown?):
                try transition(
                    node, .release, by: .system, now: now, message: "executor shut down", silent: !node.isRoot)
            case (.success(let data), _):
                try transition(node, .complete(result: data), by: .system, now: now)
            case (.failure, .timedOut(let timeout)?) where stop?.own == true:
                retryDelay = try failOrRetry(node, TaskTimeoutError(timeout: timeout), now: now, random: random)
            case (.failure(let error), let reason) where ExecutionEngine.isCancellation(error) || reason != nil:
                let own = stop?.own == true || (stop == nil && node.isRoot)
                try transition(node, .cancel, by: .system, now: now, silent: !own)
            case (.failure(let error), _):
                retryDelay = try failOrRetry(node, error, now: now, random: random)
            }
        } catch {
            // The lifecycle refused (the task changed meanwhile): nothing to record.
            return (nil, nil)
        }
        if !node.isRoot { bank(node, completed: node.record.status == .completed, now: now) }
        return (changeSequence, retryDelay)
    }

    /// Fails a node, or (a root whose retry policy allows another attempt) puts it back to wait for it.
    private mutating func failOrRetry(
        _ node: TaskNode, _ error: any Error, now: Date, random: Double
    ) throws(ProgressionError) -> Duration? {
        let failure = TaskFailure(error)
        guard node.isRoot, let policy = node.record.options.retryPolicy,
            policy.allowsRetry(after: error, attempt: node.record.attempt)
        else {
            try transition(node, .fail(failure), by: .system, now: now)
            return nil
        }
        let delay = policy.delay(afterAttempt: node.record.attempt, random: random)
        let at = now.addingTimeInterval(delay.seconds).roundedToMilliseconds
        try transition(node, .retryLater(failure, at: at), by: .system, now: now)
        return delay
    }
}

extension TaskNode {
    /// The callers of `waitForTask`, taken (the root is idle).
    func takeIdleWaiters() -> [CheckedContinuation<Void, Never>] {
        defer { idleWaiters.removeAll() }
        return idleWaiters
    }
}
