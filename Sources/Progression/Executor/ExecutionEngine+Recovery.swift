import CoreMetrics
import Foundation
import Logging
import Synchronization

/// Recovery: taking the roots of dead owners (and unowned jobs) and bringing them back into memory.
///
/// A pass claims back to back, a chunk at a time (growing from a small first chunk, so that the first job runs at
/// once), until a chunk comes back short or this executor holds ``TaskExecutor/Configuration/claimBacklogLimit``
/// claimed roots that wait for a slot. A claimed root is queued without its tree; the tree is loaded when a slot is
/// free for it (paused roots are loaded at once, so that a resume finds them). Loading a root writes its interruption,
/// its recovery and its start in the start's commit.
extension ExecutionEngine {
    /// One recovery pass. Returns how many roots it claimed.
    @discardableResult
    func recoverOnce() async -> Int {
        let now = now()
        let staleAfter = configuration.ownerStaleAfter
        let host = configuration.hostName
        let dead: [String]
        do {
            dead = try await store.owners().filter { owner in
                owner.id != ownerID && !owner.liveness(now: now, staleAfter: staleAfter, host: host).isAlive
            }.map(\.id)
        } catch {
            Self.noteStorageFailure(error, outage: storageOutage, logger: logger, what: "reading owners to recover")
            return 0
        }
        let kinds = registry.names
        var chunk = min(configuration.claimBatchSize, max(256, configuration.maxConcurrentTasks * 4))
        var total = 0
        while true {
            let room = locked { state in
                state.isShutDown ? 0 : configuration.claimBacklogLimit - state.runQueue.claimedWaiting
            }
            guard room > 0 else { break }
            let limit = min(chunk, room)
            let claimed: [ClaimedRoot]
            do {
                claimed = try await store.claimRoots(
                    RootClaim(fromOwners: [nil] + dead, kinds: kinds, newOwner: ownerID, limit: limit))
            } catch {
                Self.noteStorageFailure(error, outage: storageOutage, logger: logger, what: "claiming tasks")
                break
            }
            total += claimed.count
            metrics.claimed.increment(by: Int64(claimed.count))
            if !claimed.isEmpty {
                logger.info("claimed tasks", metadata: ["count": "\(claimed.count)", "deadOwners": "\(dead)"])
            }
            queue(claimed, now: now)
            if claimed.count < limit { break }
            chunk = min(configuration.claimBatchSize, chunk * 4)
        }
        return total
    }

    /// Queues claimed roots: paused ones are loaded at once, those waiting for a later attempt wait for it, the others
    /// wait for a slot.
    private func queue(_ claimed: [ClaimedRoot], now: Date) {
        var paused: [ClaimedRoot] = []
        let (launches, wake) = locked { state -> ([RootLaunch], Bool) in
            var wake = false
            for root in claimed {
                if root.status == .paused {
                    paused.append(root)
                } else if let next = root.nextAttemptAt, next > now {
                    let delay = Duration.milliseconds(Int64(next.timeIntervalSince(now) * 1000))
                    wake = state.timers.add(.claimed(root), at: clock.now() + delay) || wake
                } else {
                    state.runQueue.enqueue(.claimed(root), priority: root.priority, createdAt: root.createdAt)
                }
                if root.status != .paused { state.claimedIDs.insert(root.id) }
            }
            return (state.dispatch(now: now), wake)
        }
        if wake { timerSignal.signal() }
        launch(launches)
        if !paused.isEmpty {
            let key = "paused:\(paused[0].id)"
            let task = Task.detached {
                for root in paused { await self.loadPaused(root) }
                self.locked { _ = $0.claimedRuns.removeValue(forKey: key) }
            }
            locked { $0.claimedRuns[key] = task }
        }
    }

    /// Loads a claimed paused root so that a resume finds it; it stays paused.
    private func loadPaused(_ claimed: ClaimedRoot) async {
        do {
            let tree = try await store.tree(of: claimed.id)
            let now = now()
            let body = tree.first.flatMap { registry.body(for: $0) }
            let kindOptions = tree.first?.kind.flatMap { registry.kind($0)?.options }
            locked { state in
                _ = state.rehydrate(
                    tree, previousOwner: claimed.previousOwner, body: body, kindOptions: kindOptions, owner: ownerID,
                    now: now, maxInterruptions: configuration.maxInterruptions, clock: clock)
            }
        } catch {
            retryLater(claimed, error: error)
        }
    }

    /// Loads a claimed root that got a slot and runs it; a root that cannot run (a closure task, a crash loop, paused)
    /// gives the slot back.
    func runClaimed(_ claimed: ClaimedRoot) async {
        let tree: [TaskRecord]
        do {
            tree = try await store.tree(of: claimed.id)
        } catch {
            retryLater(claimed, error: error)
            locked { _ = $0.claimedRuns.removeValue(forKey: claimed.id) }
            releaseSlot()
            return
        }
        let now = now()
        let body = tree.first.flatMap { registry.body(for: $0) }
        let kindOptions = tree.first?.kind.flatMap { registry.kind($0)?.options }
        let outcome = locked { state -> (NodeHandle?, Task<Void, Never>?) in
            let task = state.claimedRuns.removeValue(forKey: claimed.id)
            guard tree.first != nil else { return (nil, task) }
            let handle = state.rehydrate(
                tree, previousOwner: claimed.previousOwner, body: body, kindOptions: kindOptions, owner: ownerID,
                now: now, maxInterruptions: configuration.maxInterruptions, clock: clock, startNow: true)
            if let handle, let node = state.nodes[handle] { node.runTask = task }
            state.claimedIDs.remove(claimed.id)
            let waiters = state.claimWaiters.removeValue(forKey: claimed.id) ?? []
            if let node = state.node(id: claimed.id), node.phase != .idle {
                node.idleWaiters += waiters
            } else {
                for waiter in waiters { waiter.resume() }
            }
            return (handle, task)
        }
        guard let handle = outcome.0 else {
            releaseSlot()
            return
        }
        wakeWriter(urgent: true)
        await runRoot(handle)
    }

    /// A claimed root could not be loaded (the store failed): it is queued again after a backoff, never stranded.
    private func retryLater(_ claimed: ClaimedRoot, error: any Error) {
        Self.noteStorageFailure(error, outage: storageOutage, logger: logger, what: "loading a claimed task")
        let wake = locked { state in
            state.timers.add(.claimed(claimed), at: clock.now() + .seconds(1))
        }
        if wake { timerSignal.signal() }
    }

    /// Brings a failed or cancelled root that is no longer in memory back from the store, for a retry: it takes the
    /// tree over from its owner (compare-and-set) and loads it.
    ///
    /// - Throws: `notFound`, `notRetryable`.
    func loadForRetry(_ taskID: String) async throws {
        guard let stored = try await store.task(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
        _ = try TaskLifecycle.outcome(
            of: .retry, status: stored.status, options: stored.options, isRoot: stored.isRoot,
            hasKind: stored.kind != nil, taskID: taskID, by: .user)
        guard let body = registry.body(for: stored) else {
            throw ProgressionError.notRetryable(
                taskID: taskID,
                reason: stored.kind.map { "no job kind '\($0)' is registered here" }
                    ?? "it is a closure task whose code is no longer in memory")
        }
        let taken = try await store.transferTree(
            of: taskID, ifStatusIn: [.failed, .cancelled], from: stored.ownerID, to: ownerID)
        guard taken else { throw ProgressionError.notRetryable(taskID: taskID, reason: "it changed meanwhile") }
        let tree = try await store.tree(of: taskID)
        let now = now()
        locked { state in
            _ = state.rehydrate(
                tree, previousOwner: nil, body: body, owner: ownerID, now: now,
                maxInterruptions: configuration.maxInterruptions, clock: clock)
        }
    }
}

extension GraphState {
    /// Adds a stored tree to memory and decides, through the lifecycle, what happens to its root: a job that was
    /// running counts an interruption (and fails after too many: a crash loop); a closure task fails as interrupted
    /// (no other process has its code); a paused one stays paused; one waiting for its next attempt waits; with
    /// `startNow`, a pending job starts (its slot taken by the caller). Subtasks that were under way go back to
    /// pending: they run again when their parent pushes them, completed ones are skipped. Returns the root's handle
    /// when it starts.
    mutating func rehydrate(
        _ tree: [TaskRecord], previousOwner: String?, body: (@Sendable (any TaskContext) async throws -> Void)?,
        kindOptions: TaskOptions? = nil, owner: String, now: Date, maxInterruptions: Int, clock: TaskClock,
        startNow: Bool = false
    ) -> NodeHandle? {
        guard var rootRecord = tree.first, rootRecord.isRoot, node(id: rootRecord.id) == nil else { return nil }
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
        for child in root.subtree.dropFirst() where child.record.status == .running {
            _ = try? transition(child, .release, by: .system, now: now, silent: true)
        }
        guard !root.record.status.isFinished else { return nil }
        if root.record.status == .running {
            _ = try? transition(
                root, .interrupt, by: .system, now: now,
                message: "the process running it (owner \(formerOwner ?? "none")) stopped")
        }
        guard body != nil else {
            // A closure task: no other process has its code.
            _ = try? transition(
                root, .fail(TaskFailure(ProgressionError.interrupted(taskID: root.record.id))), by: .system, now: now)
            return nil
        }
        if root.record.interruptions > maxInterruptions {
            let error = ProgressionError.tooManyInterruptions(taskID: root.record.id, count: root.record.interruptions)
            _ = try? transition(root, .fail(TaskFailure(error)), by: .system, now: now)
            return nil
        }
        if formerOwner != nil, formerOwner != owner {
            append(
                TaskEvent(
                    taskID: root.record.id, rootID: root.record.id, kind: .recovered, at: now,
                    attempt: root.record.attempt, progress: root.record.progress, message: "claimed by owner \(owner)"))
        }
        guard root.record.status == .pending else { return nil }  // paused: a resume queues it
        if root.record.nextAttemptAt != nil { root.startsNewAttempt = true }
        if let next = root.record.nextAttemptAt, next > now {
            root.phase = .delayed
            let delay = Duration.milliseconds(Int64(next.timeIntervalSince(now) * 1000))
            _ = timers.add(.retry(root.handle), at: clock.now() + delay)
            return nil
        }
        guard startNow else {
            root.phase = .queued
            runQueue.enqueue(.node(root.handle), priority: root.record.priority, createdAt: root.record.createdAt)
            return nil
        }
        if root.startsNewAttempt {
            root.startsNewAttempt = false
            _ = try? transition(root, .beginAttempt, by: .system, now: now)
        }
        prepareRun(root)
        guard (try? transition(root, .start, by: .system, now: now)) != nil else { return nil }
        root.phase = .running
        return root.handle
    }
}
