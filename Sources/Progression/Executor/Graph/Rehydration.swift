import Foundation
import Synchronization

// A stored tree brought into memory.

extension GraphState {
    /// Adds a stored tree to memory and decides, through the lifecycle, what happens to its root: a job that was
    /// running counts an interruption (and fails after too many: a crash loop); a closure task fails as interrupted
    /// (no other process has its code); a paused one stays paused; one waiting for its next attempt waits; a pending
    /// job is queued for a slot. Subtasks that were under way go back to pending: they run again when their parent
    /// pushes them, completed ones are skipped.
    mutating func rehydrate(
        _ tree: [TaskRecord], previousOwner: String?, body: RootBody?, kindOptions: TaskOptions? = nil, owner: String,
        now: Date, maxInterruptions: Int, clock: TaskClock
    ) -> GraphEffects {
        guard var rootRecord = tree.first, rootRecord.isRoot, node(id: rootRecord.id) == nil else { return GraphEffects() }
        // The claim changed the stored owner already: the one it took the root from is the claim's.
        let formerOwner = previousOwner
        rootRecord.ownerID = owner
        let root = addRoot(rootRecord, stored: true)
        root.body = body
        // A job submitted by a process that did not know its kind's options gets them now.
        if rootRecord.options.givenFields != nil, let kindOptions {
            root.record.options = rootRecord.options.filled(from: kindOptions)
            root.record.priority = root.record.options.priority
            markDirty(root, [.options, .priority])
        }
        root.progress.floor = rootRecord.progress
        for record in tree.dropFirst() {
            guard let parentID = record.parentID, let parent = node(id: parentID) else { continue }
            let child = attachStored(record, to: parent)
            child.progress.floor = record.progress
        }
        // A link's state is its child's (kept by the tree keeper), not this tree's to release.
        for child in root.subtree.dropFirst() where child.record.status == .running && !child.isLink {
            _ = try? transition(child, .release, by: .system, now: now, silent: true)
        }
        guard !root.record.status.isFinished else { return GraphEffects() }
        if root.record.status == .running {
            _ = try? transition(
                root, .interrupt, by: .system, now: now,
                message: "the process running it (owner \(formerOwner ?? "none")) stopped")
        }
        guard body != nil else {
            // A closure task: no other process has its code.
            _ = try? transition(
                root, .fail(TaskFailure(ProgressionError.interrupted(taskID: root.record.id))), by: .system, now: now)
            return GraphEffects()
        }
        if root.record.interruptions > maxInterruptions {
            let error = ProgressionError.tooManyInterruptions(taskID: root.record.id, count: root.record.interruptions)
            _ = try? transition(root, .fail(TaskFailure(error)), by: .system, now: now)
            return GraphEffects()
        }
        if formerOwner != nil, formerOwner != owner {
            appendEvent(of: root, .recovered, at: now, message: "claimed by owner \(owner)")
        }
        guard root.record.status == .pending else { return GraphEffects() }  // paused: a resume queues it
        if root.record.nextAttemptAt != nil, root.record.waitReason == .retry { root.startsNewAttempt = true }
        if let next = root.record.nextAttemptAt, next > now {
            root.phase = .delayed
            let delay = Duration.milliseconds(Int64(next.timeIntervalSince(now) * 1000))
            return GraphEffects(wakesTimers: timers.add(.retry(root.handle), at: clock.now() + delay))
        }
        enqueue(root)
        return GraphEffects()
    }
}

extension GraphState {
    /// A claim of this executor took a root in the store, and its tree was read: what memory does with it.
    /// - A root that ended here and was run again since (a child job its parent retried): what memory holds of it is
    ///   out of date; it is loaded afresh.
    /// - A root whose previous run here is still ending (it gave its slot back to wait, and what it waited for
    ///   happened at once), or whose hand-off to the fleet committed and has not settled yet: marked ``TaskNode/
    ///   reclaimed``, and loaded afresh once that has settled.
    /// - A job of this worker's queue: it is this worker's now, queued if idle. Given a slot and not launched yet, its
    ///   start may be on its way already, written for a job still unowned, and refused then; the start given up loads
    ///   it again (`giveUpStart`).
    /// - A root not in memory: loaded (``rehydrate(_:previousOwner:body:kindOptions:owner:now:maxInterruptions:clock:)``).
    mutating func loadClaimed(
        _ claimed: ClaimedRoot, tree: [TaskRecord], body: RootBody?, kindOptions: TaskOptions?, now: Date,
        monotonicNow: Duration, maxInterruptions: Int, clock: TaskClock
    ) -> Dispatch {
        var effects = GraphEffects()
        if claimed.started {
            if node(id: claimed.id) == nil, let record = tree.first, tree.count == 1 {
                var result = loadStartedByClaim(record, body: body, now: now)
                result += dispatch(now: now, monotonicNow: monotonicNow)
                return result
            }
            // Memory took the root meanwhile (``takeClaimStartSlot(for:kind:)`` refuses one it holds): its slot goes
            // back, and it is handled as any claimed root.
            runQueue.giveBackClaimStarts(1)
        }
        if let known = node(id: claimed.id) {
            if known.phase == .idle, known.record.status.isFinished, !tree.isEmpty {
                effects = setIdle(known)
                removeRoot(known)
            } else if (known.phase == .running && known.runTask != nil) || known.handOffSequence != nil {
                known.reclaimed = true
            } else {
                known.record.ownerID = ownerID
                known.committed.ownerID = ownerID
                if known.phase == .idle, known.record.status == .pending { enqueue(known) }
                if known.phase == .running { known.reclaimed = true }
            }
        }
        if node(id: claimed.id) == nil, !tree.isEmpty {
            effects += rehydrate(
                tree, previousOwner: claimed.previousOwner, body: body, kindOptions: kindOptions, owner: ownerID,
                now: now, maxInterruptions: maxInterruptions, clock: clock)
        }
        if isShutDown, let root = node(id: claimed.id), root.phase != .running, root.execution == nil,
            !root.record.status.isFinished, root.record.ownerID == ownerID
        {
            // The stop began while this claim was on its way (it may have taken a job the stop had just released):
            // handed back as the stop hands back a queued root, with what it flushes, rather than kept owned here
            // where nothing will run it.
            _ = try? transition(root, .release, by: .system, now: now, silent: true)
            effects += setIdle(root)
        }
        var result = dispatch(now: now, monotonicNow: monotonicNow)
        result.effects += effects
        return result
    }

    /// Takes a slot for a job that a claim of this executor starts in its transaction (``ClaimStarts``): one that is
    /// free, for a root memory does not hold, of a kind not paused here, while the executor runs.
    mutating func takeClaimStartSlot(for id: String, kind: String) -> Bool {
        guard !isShutDown, schedulerEnabled, node(id: id) == nil, !pausedKinds.contains(kind) else { return false }
        return runQueue.takeClaimStart()
    }

    /// A job whose claim started it (its start committed with the claim): it takes the slot the claim took for it and
    /// is launched at once, with no start of its own to write. When the executor stops meanwhile, it is released (left
    /// pending and unowned for the next worker, as a graceful stop leaves a job).
    private mutating func loadStartedByClaim(_ record: TaskRecord, body: RootBody?, now: Date) -> Dispatch {
        var dispatch = Dispatch()
        let root = addRoot(record, stored: true)
        root.body = body
        root.progress.floor = record.progress
        runQueue.holdClaimStart(root.handle)
        guard !isShutDown, body != nil else {
            runQueue.release(root.handle)
            _ = try? transition(root, .release, by: .system, now: now, message: "executor shut down")
            dispatch.effects += setIdle(root)
            return dispatch
        }
        root.startedByClaim = true
        root.phase = .running
        unlaunched[root.handle] = .some(nil)
        dispatch.launches.append(root.handle)
        return dispatch
    }

    /// A claimed root whose tree could not be read (the store failed): loaded by a later pass. It is this worker's in
    /// the store, so no other takes it meanwhile.
    mutating func deferClaim(_ claimed: ClaimedRoot) {
        unloadedClaims.append(claimed)
    }

    /// The claimed roots whose trees could not be read before, to load now.
    mutating func takeUnloadedClaims() -> [ClaimedRoot] {
        defer { unloadedClaims.removeAll() }
        return unloadedClaims
    }

    /// The scheduler runs: claims, schedules and the recovery of dead owners' roots begin.
    mutating func enableScheduler() {
        schedulerEnabled = true
    }

    /// The version a kind registered here declares (``JobVersion``): claims leave jobs it cannot continue.
    mutating func recordVersion(_ version: String, of kind: String) {
        kindVersions[kind] = version
    }
}
