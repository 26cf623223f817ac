import CoreMetrics
import Foundation
import Logging
import Synchronization

/// Claims: taking jobs from the store — unowned ones (submitted by a producer, queued by another worker, due after a
/// wait) and the roots of dead owners — and bringing them into memory to run.
///
/// A worker claims only what it can start now: as many roots as it has slots that no queued root will take. A pass
/// claims back to back while claims come back full. A claimed root's tree is loaded at once and the root queued (it
/// starts in the same pass); loading a root writes its interruption, its recovery and its start in the start's
/// commit. Paused roots are not claimed: a paused root that no live owner holds is changed in the store directly, and
/// claimed like any other once it is resumed.
extension ExecutionEngine {
    /// One claim pass: fills the slots that are free now, once. Returns how many roots it claimed, whether it
    /// claimed all it had room for (the store may hold more: the claim loop looks again when slots free up), and the
    /// next time a root waits for when the store read it in the claim (``ClaimStarts/nextWaitingTime``).
    ///
    /// One round only: with a backlog of quick jobs, slots free as fast as a pass fills them, and a pass that went on
    /// while claims come back full would never end (`start()` would not return, and a graceful stop would wait for the
    /// whole backlog).
    @discardableResult
    func claimOnce() async -> (claimed: Int, full: Bool, nextWaitingTime: Date??) {
        await loadUnloadedClaims()
        let kinds = registry.names
        // The room is reserved until the claimed roots are queued: two passes at once (the first one of `start()` and
        // the loop's) never claim the same slots.
        let room = locked { state in
            guard !state.isShutDown, state.schedulerEnabled else { return 0 }
            let room = state.runQueue.reserveForClaim()
            if room > 0 { state.claimPassesUnderWay += 1 }
            return room
        }
        guard room > 0 else { return (0, false, nil) }
        defer {
            let waiters = locked { state -> [CheckedContinuation<Void, Never>] in
                state.runQueue.endClaim(reserved: room)
                state.claimPassesUnderWay -= 1
                guard state.claimPassesUnderWay == 0 else { return [] }
                defer { state.claimPassesWaiters.removeAll() }
                return state.claimPassesWaiters
            }
            for waiter in waiters { waiter.resume() }
        }
        let dead: [String: Date]
        do {
            dead = try await deadOwners()
        } catch {
            Self.noteStorageFailure(error, outage: storageOutage, logger: logger, what: "reading owners to recover")
            return (0, false, nil)
        }
        let claimed: [ClaimedRoot]
        let now = now()
        // The jobs it takes from no owner start in its transaction, each with a slot taken meanwhile: a root loaded
        // started turns its slot into its own (``GraphState/loadClaimed(_:tree:body:kindOptions:now:monotonicNow:maxInterruptions:clock:)``),
        // and what was taken for none is given back below.
        let starts = ClaimStarts(
            kinds: kinds, versions: registry.versions, clock: { [self] in self.now() },
            takeSlot: { [self] id, kind in locked { $0.takeClaimStartSlot(for: id, kind: kind) } },
            giveBack: { [self] count in giveBackClaimStarts(count) })
        var startsLoaded = 0
        defer { giveBackClaimStarts(starts.close() - startsLoaded) }
        do {
            LatencyTimeline.mark(.claimBegan)
            defer { LatencyTimeline.mark(.claimReturned) }
            claimed = try await store.claimRoots(
                RootClaim(
                    fromOwners: [nil] + dead.keys.sorted(), kinds: kinds, newOwner: ownerID, limit: room, now: now,
                    judgedHeartbeats: dead, readsTrees: true, versions: registry.versions, starts: starts))
        } catch {
            Self.noteStorageFailure(error, outage: storageOutage, logger: logger, what: "claiming tasks")
            return (0, false, nil)
        }
        let kept = await giveBackWhatHasNoSlot(claimed)
        metrics.claimed.increment(by: Int64(kept.count))
        let recovered = claimed.compactMap(\.previousOwner)
        if !recovered.isEmpty {
            logger.info(
                "claimed tasks of stopped owners",
                metadata: ["count": "\(recovered.count)", "owners": "\(Set(recovered).sorted())"])
        }
        for root in kept {
            await load(root)
            if root.started { startsLoaded += 1 }
        }
        if startsLoaded > 0 {
            // Shown running (no commit of the writer's tells the publisher), and a child job's start is its parent's
            // to mirror (the claim queued that work, as a writer's batch does).
            publisherSignal.signal()
            if kept.contains(where: { $0.started && $0.tree?.first?.parentJobID != nil }) { treeSignal.signal() }
        }
        return (kept.count, claimed.count == room, starts.nextWaitingTime)
    }

    /// Returns once no claim pass is under way (at once when none is).
    func claimPassesEnded() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = locked { state -> Bool in
                guard state.claimPassesUnderWay > 0 else { return true }
                state.claimPassesWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Gives back `count` slots that a claim took for starts it did not make (its transaction failed, or the store found
    /// the root with subtasks), and starts what waits for them.
    private func giveBackClaimStarts(_ count: Int) {
        guard count > 0 else { return }
        let now = now()
        let monotonicNow = clock.now()
        carry(
            locked { state in
                state.runQueue.giveBackClaimStarts(count)
                return state.dispatch(now: now, monotonicNow: monotonicNow)
            })
    }

    /// The claimed roots this worker has a slot for now; the others — pending jobs taken from no owner, beyond the
    /// slots free now (jobs submitted here took the slots the claim counted on while it was under way) — are given
    /// back in the store at once (compare-and-set: still this worker's and pending), so that a worker holds only what
    /// it can run. Nothing of them was loaded or written here. Roots of dead owners are always kept (recovery).
    private func giveBackWhatHasNoSlot(_ claimed: [ClaimedRoot]) async -> [ClaimedRoot] {
        // The roots the claim started hold slots of their own (taken in its transaction): the others share what is left.
        let free = locked { max(0, $0.runQueue.maxConcurrent - $0.runQueue.running - $0.runQueue.claimStarts) }
        let notStarted = claimed.filter { !$0.started }
        guard notStarted.count > free else { return claimed }
        var kept: [ClaimedRoot] = []
        var keptNotStarted = 0
        for root in claimed {
            if root.started {
                kept.append(root)
                continue
            }
            if keptNotStarted >= free, root.previousOwner == nil, root.status == .pending,
                (try? await store.transferTree(of: root.id, ifStatusIn: [.pending], from: ownerID, to: nil)) == true
            {
                continue
            }
            kept.append(root)
            keptNotStarted += 1
        }
        return kept
    }

    /// The owners whose roots may be taken: dead ones (another host's stale heartbeat, a gone process of this host),
    /// with the heartbeat each was judged by. Read at most once per recovery interval; the claim reads each one's
    /// heartbeat again in its transaction and leaves an owner whose heartbeat has moved since.
    func deadOwners() async throws -> [String: Date] {
        let now = now()
        if let cached = ownerCache.withLock({ $0 }),
            now.timeIntervalSince(cached.readAt) < configuration.recoveryInterval.seconds
        {
            return cached.dead
        }
        let staleAfter = configuration.ownerStaleAfter
        let host = configuration.hostName
        var dead: [String: Date] = [:]
        for owner in try await store.owners()
        where owner.id != ownerID && !owner.liveness(now: now, staleAfter: staleAfter, host: host).isAlive {
            dead[owner.id] = owner.heartbeatAt
        }
        // Dead owners that hold nothing unfinished are deleted (a restarted service leaves one per run, and each
        // would be read by every claim); one that comes back is recorded again by its next heartbeat.
        if !dead.isEmpty, let fleet = capabilities.fleet,
            (try? await fleet.forgetIdleOwners(dead.keys.sorted())) ?? 0 > 0
        {
            let remaining = Set(try await store.owners().map(\.id))
            dead = dead.filter { remaining.contains($0.key) }
        }
        ownerCache.withLock { $0 = (now, dead) }
        return dead
    }

    /// Loads a claimed root's tree and queues it. A root whose tree cannot be read now (the store fails) is kept and
    /// loaded by a later pass: it is this worker's in the store, so no other takes it meanwhile.
    private func load(_ claimed: ClaimedRoot) async {
        let tree: [TaskRecord]
        do {
            if let read = claimed.tree {
                tree = read
            } else {
                tree = try await store.tree(of: claimed.id)
            }
        } catch {
            Self.noteStorageFailure(error, outage: storageOutage, logger: logger, what: "loading a claimed task")
            locked { $0.deferClaim(claimed) }
            return
        }
        let now = now()
        let body = tree.first.flatMap { registry.body(for: $0) }
        let kindOptions = tree.first?.kind.flatMap { registry.kind($0)?.options }
        let monotonicNow = clock.now()
        let dispatch = locked { state in
            state.loadClaimed(
                claimed, tree: tree, body: body, kindOptions: kindOptions, now: now, monotonicNow: monotonicNow,
                maxInterruptions: configuration.maxInterruptions, clock: clock)
        }
        carry(dispatch)
        wakeWriter(urgent: true)
    }

    /// Loads the claimed roots whose trees could not be read before.
    private func loadUnloadedClaims() async {
        let claims = locked { $0.takeUnloadedClaims() }
        for claimed in claims { await load(claimed) }
    }

    /// Brings a failed or cancelled root that is no longer in memory back from the store, for a retry: it takes the
    /// tree over from its owner (compare-and-set) and loads it.
    ///
    /// - Throws: `notFound`, `notRetryable`.
    /// A job that a version this worker's code cannot continue began, of a kind that leaves such jobs, is not taken:
    /// it is retried in the store, unowned, for a worker whose version can (returns `false`: nothing more to do here).
    func loadForRetry(_ taskID: String) async throws -> Bool {
        guard let stored = try await store.task(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
        _ = try TaskLifecycle.outcome(
            of: .retry, status: stored.status, options: stored.options, isRoot: stored.isRoot,
            hasKind: stored.kind != nil, taskID: taskID, by: .user)
        if let kind = stored.kind, let version = registry.kind(kind)?.version, version.otherwise == .leave,
            !version.canContinue(stored.version)
        {
            try await changeInStore(taskID, .retry, expecting: stored)
            return false
        }
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
        perform(
            locked { state in
                state.rehydrate(
                    tree, previousOwner: nil, body: body, owner: ownerID, now: now,
                    maxInterruptions: configuration.maxInterruptions, clock: clock)
            })
        return true
    }
}
