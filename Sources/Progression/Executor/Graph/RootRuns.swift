import Foundation
import Synchronization

// A root's run on the graph: adding roots, starting, ending and settling their runs, giving slots back.

/// A root to add: its record, its creation event and its code.
struct NewRoot: Sendable {
    var record: TaskRecord
    var body: RootBody
}

/// What a change of the run queue leaves to do once the graph's lock is released: roots to launch (their starts are
/// staged), suspended code to wake (a resumed root that got its slot), and whether slots are left that the store's
/// backlog could fill (the claim loop is woken).
struct Dispatch {
    var launches: [NodeHandle] = []
    /// The writer, waiting out its batching window, when a commit is awaited now (a start staged, an end to settle):
    /// resumed to write at once (``GraphState/hurryWriter()``).
    var writerWindow: CheckedContinuation<Void, Never>?
    var wakes: [CheckedContinuation<Void, any Error>] = []
    var wantsClaims = false
    /// Roots found paused or finished while they waited became idle.
    var effects = GraphEffects()

    static func += (left: inout Dispatch, right: Dispatch) {
        left.launches += right.launches
        if left.writerWindow == nil { left.writerWindow = right.writerWindow }
        left.wakes += right.wakes
        left.wantsClaims = left.wantsClaims || right.wantsClaims
        left.effects += right.effects
    }
}

/// What a root's run leaves to do once the record of its end is committed.
struct EndedRun: Sendable {
    let handle: NodeHandle
    /// When its next attempt is due, on the executor's monotonic clock (an automatic retry).
    let retryAt: Duration?
    /// Another owner took it: forgotten here.
    let lost: Bool
    /// It gave its slot back until a time (a durable sleep) and is unowned in the store: forgotten here, any worker
    /// claims it when it is due.
    var forget = false
    /// It was given to the fleet (``StopReason/handedOff``, or a retry due while no slot was free): this executor's
    /// claims look for it too once it is forgotten.
    var handedOff = false
}

/// Roots added to the graph: their handles, the sequence that commits their rows (with the starts of those that got a
/// slot at once), and what to carry out.
struct RootsAdded {
    var handles: [NodeHandle]
    var sequence: Int64
    var dispatch: Dispatch
}

/// A subtask's end, recorded.
struct ChildEnd {
    /// The sequence to wait for; `nil` when nothing was written (another owner holds its root, or it left memory).
    var sequence: Int64?
    /// The timeout that stopped it, when its own timeout did.
    var timedOut: Duration?
}

/// What the end of a root's run leaves to do once the lock is released.
struct RunEnd {
    /// The freed slot's next root, and who waited for this one to be idle (when its end needed no commit).
    var dispatch: Dispatch
    /// The delay before its automatic retry, when one is due.
    var retryDelay: Duration?
    /// Another owner took it: nothing more is recorded for it here.
    var lost = false
    /// Its record as the run left it; `nil` when it left memory before its code ended.
    var ended: TaskRecord?
}

extension GraphState {
    /// Adds roots whose rows the writer inserts with its next batch: each with its `created` event, queued for a slot
    /// unless it is paused; those that get a slot at once start in the same commit.
    ///
    /// - Throws: ``ProgressionError/shutDown``, ``ProgressionError/duplicateID(_:)`` when a root with one of the ids
    ///   is in memory; nothing is added then.
    mutating func addRoots(
        _ roots: [NewRoot], now: Date, monotonicNow: Duration
    ) throws(ProgressionError) -> RootsAdded {
        guard !isShutDown else { throw ProgressionError.shutDown }
        for root in roots { try root.record.options.check() }
        for root in roots where handles[root.record.id] != nil {
            throw ProgressionError.duplicateID(root.record.id)
        }
        var added: [NodeHandle] = []
        added.reserveCapacity(roots.count)
        for root in roots {
            let node = addRoot(root.record, stored: false)
            node.body = root.body
            append(
                TaskEvent(
                    taskID: root.record.id, rootID: root.record.id, kind: .created, at: root.record.createdAt,
                    attempt: root.record.attempt, message: root.record.name))
            if root.record.status != .paused { enqueue(node) }
            added.append(node.handle)
        }
        return RootsAdded(handles: added, sequence: changeSequence, dispatch: dispatch(now: now, monotonicNow: monotonicNow))
    }

    /// Marks a node's code as running and arms its timeout (on the executor's clock). Returns whether it was asked to
    /// stop already, and whether the timer loop must wake for the timeout.
    mutating func beginExecution(
        _ handle: NodeHandle, cancel: (@Sendable () -> Void)?, now: Duration
    ) -> (stopped: Bool, effects: GraphEffects) {
        guard let node = nodes[handle] else { return (true, GraphEffects()) }
        // A root's code runs in its run task, which `stop` cancels.
        node.execution = Execution(
            cancel: cancel ?? {}, startedAt: now, pausedSince: node.isEffectivelyPaused ? now : nil)
        node.rate.restart()
        var effects = GraphEffects()
        if let timeout = node.record.options.timeout {
            effects.wakesTimers = timers.add(.timeout(handle), at: now + timeout)
        }
        if node.isRoot, let rule = node.record.options.stall, rule.action != .flag {
            if timers.add(.stall(handle, run: now), at: now + rule.limit) { effects.wakesTimers = true }
        }
        return (node.effectiveStop != nil, effects)
    }

    /// Records how a subtask's run ended (its parent's code goes on from here).
    mutating func endChild(
        _ handle: NodeHandle, _ result: Result<Data?, any Error>, now: Date, configuration: TaskExecutor.Configuration
    ) -> ChildEnd {
        guard let node = nodes[handle] else { return ChildEnd() }
        let (sequence, _) = finish(node, result, now: now, random: 0, configuration: configuration)
        if case .timedOut(let timeout)? = node.stopReason { return ChildEnd(sequence: sequence, timedOut: timeout) }
        return ChildEnd(sequence: sequence)
    }

    /// Records how a root's run ended and gives its slot to the next root (their start shares the end's commit). Once
    /// the end is committed the root is settled (``settle(_:)``): at once when nothing was written or it is committed
    /// already, else by the writer.
    mutating func endRun(
        _ handle: NodeHandle, _ result: Result<Data?, any Error>, now: Date, monotonicNow: Duration, random: Double,
        configuration: TaskExecutor.Configuration
    ) -> RunEnd {
        runQueue.release(handle)
        guard let node = nodes[handle] else {
            return RunEnd(dispatch: dispatch(now: now, monotonicNow: monotonicNow))
        }
        // Its code has ended: it waits for no slot to go on (a resumed root cancelled while it waited for one). Left
        // set, the queue entry of that wait would later be taken for this root's next run, whose code would then wait
        // at its first report for ever (a retried root stuck pending).
        node.waitsForSlot = false
        let lost = node.effectiveStop?.reason == .leaseLost
        let sleeps = node.stopReason?.suspendsRoot ?? false
        let (sequence, delay) = finish(node, result, now: now, random: random, configuration: configuration)
        let run = EndedRun(
            handle: handle, retryAt: delay.map { monotonicNow + $0 }, lost: lost,
            forget: sleeps && node.record.ownerID == nil, handedOff: node.handOffSequence != nil)
        var dispatch = Dispatch()
        if let sequence, sequence > committedSequence {
            endedRuns.append((sequence, run))
            // Whoever waits for this root (waitForTask, a retry by hand) waits for the commit: no batching window.
            dispatch.writerWindow = hurryWriter()
        } else {
            dispatch.effects = settle(run)
        }
        dispatch += self.dispatch(now: now, monotonicNow: monotonicNow)
        return RunEnd(dispatch: dispatch, retryDelay: delay, lost: lost, ended: node.record)
    }

    /// Gives a slot back without a run to record: a start that was not committed, or that the store refused (the root
    /// is dropped then: another worker has it, or an operator changed it), or a root gone meanwhile. The slot goes to
    /// the next root.
    mutating func giveUpStart(_ handle: NodeHandle, now: Date, monotonicNow: Duration) -> Dispatch {
        runQueue.release(handle)
        var dispatch = Dispatch()
        if let node = nodes[handle], node.conflicted || node.stopReason == .leaseLost {
            node.runTask = nil
            dispatch.effects = setIdle(node)
            removeRoot(node)
            // This executor's own claim took the root in the store while its start (of a job queued here unowned)
            // was on its way, and the store refused that start for it: the row is this executor's, and no other
            // takes it from a live owner; dropped without a reload, it would wait for ever.
            if node.reclaimed, !node.conflicted { dispatch.effects += reloadReclaimed(node) }
        }
        dispatch += self.dispatch(now: now, monotonicNow: monotonicNow)
        return dispatch
    }

    /// Settles a root whose end is committed: forgotten (another owner runs it, or it sleeps), waiting for its next
    /// attempt, or idle. Returns who waited for it to become idle, and whether the timer loop must wake (its retry is
    /// the earliest deadline).
    mutating func settle(_ run: EndedRun) -> GraphEffects {
        guard let node = nodes[run.handle] else { return GraphEffects() }
        node.runTask = nil
        if run.lost || run.forget {
            var effects = setIdle(node)
            removeRoot(node)
            if run.handedOff { effects.wakesClaims = true }
            if node.reclaimed, !run.lost { effects += reloadReclaimed(node) }
            return effects
        }
        node.reclaimed = false
        if let retryAt = run.retryAt, !isShutDown {
            node.phase = .delayed
            node.startsNewAttempt = true
            return GraphEffects(wakesTimers: timers.add(.retry(run.handle), at: retryAt))
        }
        return setIdle(node)
    }

    /// A root this executor claimed again in the store while memory held an older run of it (``TaskNode/reclaimed``),
    /// now that the older one left memory: loaded from the store by the next claim pass.
    mutating func reloadReclaimed(_ node: TaskNode) -> GraphEffects {
        node.reclaimed = false
        unloadedClaims.append(
            ClaimedRoot(
                id: node.record.id, status: .pending, kind: node.record.kind, priority: node.record.priority,
                createdAt: node.record.createdAt, nextAttemptAt: nil, previousOwner: ownerID))
        return GraphEffects(wakesClaims: true)
    }

    /// Settles the ended roots whose end is committed up to `sequence`, in the order they ended.
    mutating func settleEndedRuns(upTo sequence: Int64) -> GraphEffects {
        guard let first = endedRuns.first, first.sequence <= sequence else { return GraphEffects() }
        let count = endedRuns.firstIndex { $0.sequence > sequence } ?? endedRuns.count
        let settled = endedRuns.prefix(count)
        endedRuns.removeFirst(count)
        var effects = GraphEffects()
        for entry in settled { effects += settle(entry.run) }
        return effects
    }

    /// Queues a root for a slot.
    mutating func enqueue(_ node: TaskNode) {
        node.phase = .queued
        runQueue.enqueue(node.handle, priority: node.record.priority, createdAt: node.record.createdAt, kind: node.record.kind)
    }

    /// Starts queued roots while slots are free (roots of a paused kind wait): stages each one's start (a new attempt
    /// first, for an automatic retry; taking it in the store when it is unowned) and gives it the slot, or, for a
    /// resumed root whose code waits, lets that code go on. Returns what to do outside the lock.
    mutating func dispatch(now: Date, monotonicNow: Duration) -> Dispatch {
        var dispatch = Dispatch()
        guard !isShutDown else { return dispatch }
        while let handle = runQueue.next(holding: pausedKinds) {
            guard let node = nodes[handle], node.phase == .queued else {
                runQueue.release(handle)
                continue
            }
            if node.waitsForSlot {
                // Resumed while every slot was taken: its code goes on now.
                node.waitsForSlot = false
                guard (try? transition(node, .resumeRun, by: .system, now: now)) != nil else {
                    runQueue.release(handle)
                    node.phase = .suspended
                    continue
                }
                node.phase = .running
                dispatch.wakes += pauseChanged(below: node, now: monotonicNow)
                continue
            }
            guard node.record.status == .pending else {
                // Paused or finished while it waited: not run (a resume queues it again).
                runQueue.release(handle)
                dispatch.effects += setIdle(node)
                continue
            }
            if node.startsNewAttempt {
                node.startsNewAttempt = false
                _ = try? transition(node, .beginAttempt, by: .system, now: now)
                prepareRun(node)
            }
            let unowned = node.record.ownerID == nil
            if unowned {
                // Taken in the store with its start (see ``TaskUpdate/unownedWithStatus``).
                node.record.ownerID = ownerID
                markDirty(node, .owner)
            }
            let firstStart = node.record.startedAt == nil
            do {
                try transition(node, .start, by: .system, now: now)
            } catch {
                if unowned { node.record.ownerID = nil }
                runQueue.release(handle)
                dispatch.effects += setIdle(node)
                continue
            }
            if firstStart, node.record.version == nil, let kind = node.record.kind, let version = kindVersions[kind] {
                // The version of its kind's code it begins under, written with its start (``JobVersion``).
                node.record.version = version
                markDirty(node, .version)
            }
            node.stopReason = nil
            node.phase = .running
            unlaunched[handle] = .some(nil)
            dispatch.launches.append(handle)
        }
        // Their runs wait for their starts' commit: the writer writes at once.
        if !dispatch.launches.isEmpty { dispatch.writerWindow = hurryWriter() }
        dispatch.wantsClaims = runQueue.unclaimedSlots > 0
        return dispatch
    }

    /// What ``ExecutionEngine/launch(_:)`` does with a root's run task once it is made: the task is the root's (it
    /// is cancelled at once when the root was stopped meanwhile), and whoever waited for it gets it.
    struct Launched {
        var cancel = false
        var waiter: CheckedContinuation<Task<Void, Never>?, Never>?
    }

    /// Records the run task made for a root given a slot by ``dispatch(now:monotonicNow:)``.
    mutating func launched(_ handle: NodeHandle, _ task: Task<Void, Never>) -> Launched {
        var launched = Launched(waiter: unlaunched.removeValue(forKey: handle) ?? nil)
        if let node = nodes[handle] {
            node.runTask = task
            launched.cancel = node.effectiveStop != nil
        }
        return launched
    }

    /// Prepares a root (or a subtask run again) for a new run: its subtasks are found again by name and occurrence,
    /// its progress starts over from what it showed.
    mutating func prepareRun(_ node: TaskNode) {
        node.waitsForSlot = false
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
            case (.failure, .sleeping(let until)?):
                if node.isRoot {
                    try transition(node, .suspend(until: until), by: .system, now: now)
                } else {
                    try transition(node, .release, by: .system, now: now, silent: true)
                }
            case (.failure, .handedOff?):
                // Its code stopped where it waited, paused: the root is given back to the store, unowned (a paused
                // one stays paused), as a graceful stop does; its subtasks that ran are left to run again.
                try transition(node, .release, by: .system, now: now, silent: true)
                if node.isRoot { node.handOffSequence = changeSequence }
            case (.failure, .awaiting(let wait, let description, let until, let progress)?):
                if node.isRoot {
                    try transition(
                        node, .await(wait, description: description, until: until, progress: progress), by: .system,
                        now: now)
                    // What it waits for may have happened already: the tree keeper looks (and releases it).
                    treeChanges.append(TreeChange(node.record.id, .recount))
                } else {
                    try transition(node, .release, by: .system, now: now, silent: true)
                }
            case (.success(let data), .handedOff?) where node.isRoot && node.record.status == .pending:
                // Resumed to be handed off, its code returned all the same: the job completed here.
                try transition(node, .resumeRun, by: .system, now: now)
                try transition(node, .complete(result: data), by: .system, now: now)
            case (.success(let data), _):
                try transition(node, .complete(result: data), by: .system, now: now)
            case (.failure, .timedOut(let timeout)?) where stop?.own == true:
                retryDelay = try failOrRetry(node, TaskTimeoutError(timeout: timeout), now: now, random: random)
            case (.failure, .stalled(let limit, let retry)?) where stop?.own == true:
                if retry {
                    retryDelay = try failOrRetry(node, TaskStalledError(limit: limit), now: now, random: random)
                } else {
                    try transition(
                        node, .cancel, by: .system, now: now, message: TaskStalledError(limit: limit).description)
                }
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

/// The waits and hand-overs of a root's life that the engine enters the graph for.
extension GraphState {
    /// Registers `continuation` to be resumed once the root `taskID` is idle; returns `true` when it is idle now (a
    /// root unknown here is idle), the continuation not kept.
    mutating func waitUntilIdle(_ taskID: String, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
        guard let node = node(id: taskID), node.isRoot, node.phase != .idle else { return true }
        node.idleWaiters.append(continuation)
        return false
    }

    /// The callers waiting for the root `taskID` to be idle, when it is (to resume once the lock is released).
    mutating func idleWaiters(of taskID: String) -> GraphEffects {
        guard let node = node(id: taskID), node.phase == .idle else { return GraphEffects() }
        return setIdle(node)
    }

    /// New roots whose insert did not commit (the store failed, or the executor closed): they leave memory.
    mutating func newRootsNotCommitted(_ handles: [NodeHandle]) {
        for handle in handles { conflictedRoots[handle] = nil }
        removeRoots(handles.compactMap { nodes[$0] })
    }

    /// New roots whose insert committed: those whose identity was taken leave memory, stopped; returns their ids.
    mutating func newRootsCommitted(_ handles: [NodeHandle]) -> [String] {
        var conflicted: [TaskNode] = []
        var ids: [String] = []
        for handle in handles {
            // Its run, woken by the same commit, may have given up its start and removed it already.
            let taken = conflictedRoots.removeValue(forKey: handle)
            if let node = nodes[handle], node.conflicted {
                node.stopReason = .leaseLost
                conflicted.append(node)
                ids.append(node.record.id)
            } else if let taken {
                ids.append(taken)
            }
        }
        removeRoots(conflicted)
        return ids
    }

    /// The run task of a root given a slot, for a graceful stop: `.some` when it is made already (`nil` inside when
    /// it ended since), else `.none` and `continuation` resumed with it once ``launched(_:_:)`` makes it.
    mutating func awaitLaunch(
        _ handle: NodeHandle, _ continuation: CheckedContinuation<Task<Void, Never>?, Never>
    ) -> Task<Void, Never>?? {
        guard unlaunched.keys.contains(handle) else { return .some(nodes[handle]?.runTask) }
        unlaunched[handle] = continuation
        return .none
    }

    /// A root's start committed: its record to run with, or `nil` when it is not to run (its identity was taken, it
    /// left memory, or the store refused the start). A claim of this executor that took it before is what the start
    /// wrote over.
    mutating func startCommitted(_ handle: NodeHandle) -> TaskRecord? {
        guard let node = nodes[handle], !node.conflicted, !node.removed, node.stopReason != .leaseLost else { return nil }
        node.reclaimed = false
        node.startedByClaim = false
        return node.record
    }

    /// A node's code returned: it no longer runs (its timeout and pause clock stop with it).
    mutating func endExecution(_ handle: NodeHandle) {
        nodes[handle]?.execution = nil
    }
}
