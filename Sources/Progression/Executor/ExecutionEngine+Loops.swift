import CoreMetrics
import Foundation
import Synchronization
import Logging

/// The executor's background work, each a child task of ``runLoops(scheduler:)``: the writer, the timer loop
/// (timeouts, automatic retries, delayed recoveries), the publisher, maintenance (sweeping finished roots, the owner's
/// heartbeat, WAL checkpoints), control requests of other processes, and recovery. They end when the task running them
/// is cancelled (the writer when the graph closes), and the executor awaits them on shutdown.
extension ExecutionEngine {
    /// Runs every loop until cancelled.
    func runLoops() async {
        let writer = StoreWriter(engine: self)
        // A JobClient of this process waiting for a root this executor runs waits for its end told (``RootEnds``).
        let ends = capabilities.beacons?.ends
        let owner = ownerID
        let teller = ends?.addTeller { [weak self] id in
            self?.locked { $0.willTellEnd(of: id, owner: owner) } ?? false
        }
        defer { if let ends, let teller { ends.removeTeller(teller) } }
        let loops: [@Sendable () async -> Void] = [
            { await writer.run() }, { await self.runTimers() }, { await self.runPublisher() },
            { await self.runMaintenance() }, { await self.runControlRequests() }, { await self.runClaims() },
            { await self.runSchedules() }, { await self.runTreeKeeper() }, { await self.runRetention() },
            { await self.runGauges() },
        ]
        await withTaskGroup(of: Void.self) { group in
            for loop in loops {
                runningLoops.add(1, ordering: .relaxed)
                group.addTask {
                    defer { self.runningLoops.subtract(1, ordering: .relaxed) }
                    await loop()
                }
            }
            // The writer ends when the graph closes (or it is cancelled), the others when cancelled.
            await group.waitForAll()
        }
    }

    /// Fires due deadlines: timeouts (paused time not counted) and automatic retries.
    func runTimers() async {
        while !Task.isCancelled {
            let earliest = locked { $0.timers.earliest }
            if let earliest {
                // Until the deadline itself: a clock that moves before the sleep begins does not push it later.
                if earliest > clock.now() { await timerSignal.wait(until: earliest, clock: clock) }
            } else {
                await timerSignal.wait()
            }
            guard !Task.isCancelled else { return }
            fireTimers()
        }
    }

    func fireTimers() {
        let monotonicNow = clock.now()
        let now = now()
        let fired = locked { state in state.fireTimers(now: now, monotonicNow: monotonicNow) }
        fired.cancellation.run()
        carry(fired.dispatch)
    }

    /// Publishes the graph when it changed, at most once per publish interval, and only while someone listens.
    func runPublisher() async {
        while !Task.isCancelled {
            await publisherSignal.wait()
            guard !Task.isCancelled else { break }
            if publisher.hasSubscribers, let graph = locked({ $0.snapshotIfChanged() }) {
                publisher.publish(graph)
            }
            try? await clock.sleep(configuration.publishInterval)
        }
        publisher.publish(locked { $0.graph() })
        publisher.finish()
    }

    /// Sweeps finished roots past their visibility, writes the owner's heartbeat when due, and checkpoints the
    /// store's log off the commit path: passively while changes come (commits past 4,000 log frames ask for more), and
    /// once with truncation when nothing changed for a whole interval, so that an idle service leaves an empty log.
    func runMaintenance() async {
        var lastHeartbeat = clock.now()
        var lastCheckpoint = clock.now()
        var sequenceAtCheckpoint = locked { $0.changeSequence }
        var truncated = true
        var lastLinkRefresh = clock.now()
        // Finished roots stay in memory for their visibility plus up to one period: with a short visibility and
        // many jobs a second, a fixed 250 ms would keep thousands more of them (at 50,000 a second, 12,500).
        let period = min(.milliseconds(250), max(.milliseconds(10), configuration.completedTaskVisibility / 2))
        while !Task.isCancelled {
            do { try await clock.sleep(period) } catch { return }
            sweepFinished()
            let now = clock.now()
            if now - lastLinkRefresh >= .milliseconds(500) {
                lastLinkRefresh = now
                await refreshLinks()
            }
            if now - lastHeartbeat >= configuration.heartbeatInterval {
                lastHeartbeat = now
                // An executor whose writes fail renews no lease: other executors take its roots once it is stale,
                // and its late writes are rejected (fencing) when it can write again.
                if locked({ $0.storage.isHealthy }) {
                    do {
                        try await store.saveOwner(ownerRecord(heartbeatAt: self.now()))
                    } catch {
                        Self.noteStorageFailure(error, outage: storageOutage, logger: logger, what: "writing the heartbeat")
                    }
                }
            }
            if now - lastCheckpoint >= configuration.checkpointInterval {
                lastCheckpoint = now
                let sequence = locked { $0.changeSequence }
                if sequence != sequenceAtCheckpoint {
                    sequenceAtCheckpoint = sequence
                    truncated = false
                    try? await capabilities.housekeeping?.maintain(.passiveCheckpoint)
                } else if !truncated {
                    // Briefly: a reader of another process (progressctl watch) must not hold this executor's writes.
                    truncated =
                        (try? await capabilities.housekeeping?.maintain(
                            .truncatingCheckpoint(patience: .milliseconds(50)))) != nil
                }
            }
        }
    }

    /// Deletes finished jobs past their retention (``RetentionPolicy``), when this executor takes the fleet's turn.
    func runRetention() async {
        let policy = configuration.retention
        guard policy.deletesAnything else { return }
        guard capabilities.housekeeping != nil else {
            logger.notice("retention: this store cannot delete finished jobs; they are kept")
            return
        }
        while !Task.isCancelled {
            await retentionTurn(policy)
            do { try await clock.sleep(policy.interval) } catch { return }
        }
    }

    /// One turn of the retention, if the fleet's turn is this executor's: batches of jobs deleted, each its own
    /// transaction, until none is left or the turn's batches are spent. Returns the jobs deleted by status.
    @discardableResult
    func retentionTurn(_ policy: RetentionPolicy) async -> [TaskStatus: Int] {
        let now = now()
        var deleted: [TaskStatus: Int] = [:]
        guard let housekeeping = capabilities.housekeeping else { return [:] }
        do {
            guard
                try await housekeeping.takeDutyTurn(
                    "retention", owner: ownerID, now: now, nextAt: now.addingTimeInterval(policy.interval.seconds))
            else { return [:] }
            var batches = 0
            for (status, cutoff) in policy.cutoffs(at: now) {
                while batches < policy.maxBatchesPerTurn, !Task.isCancelled {
                    batches += 1
                    let result = try await housekeeping.prune(
                        finishedBefore: cutoff, statuses: [status], dryRun: false, limit: policy.batchSize)
                    deleted[status, default: 0] += result.roots
                    metrics.retentionDeleted[status]?.increment(by: result.roots)
                    if result.roots < policy.batchSize { break }
                    // Others' writes go between two batches.
                    await Task.yield()
                }
            }
        } catch {
            logger.warning("retention: deleting finished jobs failed; tried again at the next turn", metadata: ["error": "\(error)"])
        }
        let total = deleted.values.reduce(0, +)
        if total > 0 {
            logger.info(
                "retention: deleted finished jobs",
                metadata: deleted.sorted { $0.key.rawValue < $1.key.rawValue }.reduce(into: [:]) {
                    $0[$1.key.rawValue] = "\($1.value)"
                })
        }
        return deleted
    }

    /// Reads the fleet's gauges and records them, while this executor holds the fleet's turn (it renews it each
    /// interval; another takes it once it has not for two).
    func runGauges() async {
        guard let interval = configuration.gaugeInterval, interval > .zero else { return }
        guard let store = capabilities.backend else {
            logger.notice("gauges: this store cannot count the fleet's jobs; no gauges are recorded")
            return
        }
        let reporter = FleetGaugeReporter(factory: metrics.factory)
        while !Task.isCancelled {
            let now = now()
            let mine = (try? await store.takeDutyTurn(
                "gauges", owner: ownerID, now: now, nextAt: now.addingTimeInterval(2 * interval.seconds))) ?? false
            if mine, let gauges = try? await FleetGauges.read(
                from: store, at: now, ownerStaleAfter: configuration.ownerStaleAfter)
            {
                reporter.record(gauges)
            } else if !mine {
                reporter.stop()
            }
            do { try await clock.sleep(interval) } catch { break }
        }
        reporter.stop()
    }

    /// The owner record of this executor.
    func ownerRecord(heartbeatAt: Date, stoppedAt: Date? = nil) -> OwnerRecord {
        OwnerRecord(
            id: ownerID, host: configuration.hostName, pid: ProcessInfo.processInfo.processIdentifier,
            startedAt: startedAt, heartbeatAt: heartbeatAt, stoppedAt: stoppedAt, kinds: registry.names.sorted(),
            slots: configuration.maxConcurrentTasks, versions: registry.versions)
    }

    /// Removes from memory the finished roots whose committed finish is older than their visibility, in one pass.
    /// Their rows stay in the store.
    func sweepFinished() {
        let now = now()
        let completedBefore = now.addingTimeInterval(-configuration.completedTaskVisibility.seconds)
        let failedBefore = configuration.failedTaskVisibility.map { now.addingTimeInterval(-$0.seconds) }
        _ = locked { $0.sweepFinished(completedBefore: completedBefore, failedBefore: failedBefore) }
    }

    /// Applies control requests written by other processes (progressctl) for this owner, when the store changed
    /// since the last look (SQLite's `data_version`: an idle look costs one pragma).
    /// Another process's commit may also be a job to claim (a producer's submit, a resume, a retry), or a kind paused
    /// or resumed: the claim loop looks, and the kinds are read again.
    func runControlRequests() async {
        var lastCounter: Int64?
        // A producer of this process that committed work (a JobClient on a store of the same database) says so: the
        // claims look at once rather than at the next poll. Its post signals the claim loop itself, on the producer's
        // thread: this loop, which would only pass it on, is not woken for it.
        let submissions = capabilities.beacons?.submissions
        let listening = submissions?.listen { [weak self] in
            guard let self else { return }
            self.storeChanged.store(true, ordering: .relaxed)
            self.claimSignal.signal()
        }
        defer { if let submissions, let listening { submissions.stopListening(listening) } }
        var nextLook = clock.now()
        while !Task.isCancelled {
            if clock.now() >= nextLook, await storeMoved(since: &lastCounter) {
                await applyControlRequests()
                await refreshPausedKinds()
                await checkChildJobsHeld()
                storeChanged.store(true, ordering: .relaxed)
                claimSignal.signal()
                scheduleSignal.signal()
                treeSignal.signal()
            }
            if clock.now() >= nextLook { nextLook = clock.now() + configuration.controlPollInterval }
            do { try await clock.sleepUntil(nextLook) } catch { return }
        }
    }

    /// Whether the store's change counter moved since `last` (recorded there when it did). A store without a change
    /// counter is read at every look; a counter that cannot be read now is taken as unmoved.
    private func storeMoved(since last: inout Int64?) async -> Bool {
        guard let housekeeping = capabilities.housekeeping else { return true }
        guard let counter = try? await housekeeping.changeCounter(), counter != last else { return false }
        last = counter
        return true
    }

    /// Jobs (or a signal) written to the store for any worker: this executor's claims look at once, and so do those of
    /// the other executors of the database in this process.
    func noteNewWorkInStore() {
        storeChanged.store(true, ordering: .relaxed)
        claimSignal.signal()
        capabilities.beacons?.submissions.post()
    }

    /// Stops the code of child jobs running here that the store no longer gives this executor: their parent's end or
    /// pause took them (the tree keeper clears their owner), and their code stops now rather than at its next write.
    func checkChildJobsHeld() async {
        let ids = locked { state in
            state.roots.lazy.filter { root in
                root.record.parentJobID != nil && root.execution != nil && root.stopReason == nil
                    && root.committed.ownerID == self.ownerID
            }.prefix(1_000).map(\.record.id)
        }
        guard !ids.isEmpty, let jobTrees = capabilities.jobTrees, let rows = try? await jobTrees.tasks(ids: Array(ids))
        else { return }
        // Another owner's: the job was claimed away (this executor's lease went stale), which is a lost lease, said as
        // such; no owner (or no row): its parent's end or pause took it back.
        let owners = Dictionary(rows.map { ($0.id, $0.ownerID) }, uniquingKeysWith: { first, _ in first })
        let claimedAway = ids.filter { id in owners[id].flatMap { $0 }.map { $0 != ownerID } ?? false }
        let takenBack = ids.filter { id in owners[id].flatMap { $0 } == nil }
        if !claimedAway.isEmpty { leaseLost(claimedAway) }
        if !takenBack.isEmpty { leaseLost(takenBack, childJobsTaken: true) }
    }

    /// Reads the kinds paused across the fleet; a kind resumed lets its queued roots start.
    func refreshPausedKinds() async {
        guard let fleet = capabilities.fleet, let paused = try? await fleet.pausedKinds() else { return }
        let names = Set(paused.keys)
        let now = now()
        let monotonicNow = clock.now()
        let dispatch = locked { $0.setPausedKinds(names, now: now, monotonicNow: monotonicNow) }
        carry(dispatch)
    }

    func applyControlRequests() async {
        guard let queue = capabilities.controlQueue, let requests = try? await queue.pendingControlRequests(for: ownerID)
        else { return }
        for request in requests {
            var outcome = "applied"
            do {
                let known = locked { $0.node(id: request.taskID) != nil }
                switch request.action {
                case .retry:
                    // A job this worker's version leaves is retried in the store, for a worker that can continue it.
                    var loaded = known
                    if !known { loaded = try await loadForRetry(request.taskID) }
                    if loaded { try await retry(request.taskID) }
                case .remove: try await remove(request.taskID, force: true)
                case _ where !known:
                    // Not in memory (it was dropped, or it left when it slept): changed in the store, as by an
                    // operator when no live owner holds it.
                    try await changeInStore(request.taskID, ControlRequest.transition(of: request.action))
                case .pause: try await change(.pause, request.taskID)
                case .resume: try await change(.resume, request.taskID)
                case .cancel: try await change(.cancel, request.taskID)
                case .runNow: try await change(.runNow, request.taskID)
                }
            } catch {
                outcome = "refused: \(ProgressionError.describe(error))"
            }
            logger.info(
                "control request",
                metadata: ["task": "\(request.taskID)", "action": "\(request.action)", "outcome": "\(outcome)"])
            try? await queue.completeControlRequest(id: request.id, outcome: outcome, at: now())
        }
    }

    /// The tree keeper: carries out the changes of job trees queued in the store (``JobTreeKeeper``) — a child's
    /// state into its parent's tree, a parent's end, pause or resume into its children, a finished job's dependents,
    /// a job that began to wait — when this executor wrote one, when another process committed, and every recovery
    /// interval. Every worker runs it; the store lets one pass run at a time.
    func runTreeKeeper() async {
        guard let jobTrees = capabilities.jobTrees else { return }
        var limit = TreeKeeperPassLimit()
        while !Task.isCancelled {
            await treeSignal.wait(timeout: configuration.recoveryInterval, clock: clock)
            guard !Task.isCancelled else { return }
            guard locked({ $0.schedulerEnabled && !$0.isShutDown }) else { continue }
            var total = 0
            do {
                while !Task.isCancelled {
                    let asked = limit.changes
                    let taken = try await jobTrees.resolveJobTrees(at: now(), limit: asked)
                    total += taken
                    limit.succeeded(taking: taken)
                    if taken < asked { break }
                }
            } catch {
                limit.failed()
                Self.noteStorageFailure(error, outage: storageOutage, logger: logger, what: "carrying out job trees' changes")
            }
            if total > 0 {
                // A job released from its wait (or a child run again) waits for a worker: this one looks too.
                storeChanged.store(true, ordering: .relaxed)
                claimSignal.signal()
            }
        }
    }

    /// Claims jobs from the store: when slots are free and the store may hold something to run — another process
    /// committed, a waiting job's time came, or a recovery interval passed (owners may have died) — and at the time
    /// the earliest waiting job is due.
    func runClaims() async {
        var nextWake: Date?
        var lastPass = clock.now()
        while !Task.isCancelled {
            var wait = configuration.recoveryInterval
            if let nextWake {
                wait = min(wait, .milliseconds(max(0, Int64(nextWake.timeIntervalSince(now()) * 1000))))
            }
            await claimSignal.wait(timeout: wait, clock: clock)
            guard !Task.isCancelled else { return }
            let (shutDown, enabled, room) = locked {
                ($0.isShutDown, $0.schedulerEnabled, $0.runQueue.unclaimedSlots)
            }
            guard enabled, !shutDown else { continue }
            // Without a free slot nothing is claimed, and a change seen meanwhile is kept for when one frees.
            guard room > 0 else { continue }
            let due = nextWake.map { $0 <= now() } ?? false
            let interval = clock.now() - lastPass >= configuration.recoveryInterval
            let changed = storeChanged.exchange(false, ordering: .relaxed)
            guard due || interval || changed else { continue }
            lastPass = clock.now()
            let pass = await claimOnce()
            if pass.full {
                // It filled every free slot: more may wait; look again as soon as a slot frees.
                storeChanged.store(true, ordering: .relaxed)
            } else if let read = pass.nextWaitingTime {
                // The claim read it in its transaction.
                nextWake = read
            } else {
                // Without the fleet's capability, a job that waits for its time is found by a later pass (the next
                // recovery interval, or the next control look when the store has no change counter either).
                nextWake = try? await capabilities.fleet?.nextWaitingTime(after: now())
            }
        }
    }

    /// Removes a finished root from memory and from the store (with its subtree and history); with `force`, an
    /// unfinished one is cancelled first and removed once its code has stopped.
    ///
    /// - Throws: `notFound`, `invalidState` (a subtask, or unfinished without `force`), `notCancellable`.
    func remove(_ taskID: String, force: Bool) async throws {
        let known = locked { state -> (isRoot: Bool, status: TaskStatus)? in
            state.node(id: taskID).map { ($0.isRoot, $0.record.status) }
        }
        if let known {
            guard known.isRoot else {
                throw ProgressionError.invalidState(taskID: taskID, status: known.status, action: "remove a subtask (remove its root)")
            }
            if !known.status.isFinished {
                guard force else {
                    throw ProgressionError.invalidState(
                        taskID: taskID, status: known.status, action: "remove it before it has finished (cancel it first)")
                }
                try await change(.cancel, taskID)
            }
            await waitUntilIdle(taskID)
            try await flush()
            locked { $0.removeRoot(id: taskID) }
        }
        guard let stored = try await store.task(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
        _ = try await store.change(
            TaskChangeRequest(
                taskID: taskID, transition: .remove, requester: .user, expectedStatus: stored.status, at: now()))
    }
}

/// How many queued changes of job trees one pass of the tree keeper takes: 500 while passes succeed, a quarter as many
/// after each that failed (down to 4), twice as many again after each full one that succeeded. A pass is one
/// transaction under the fleet's keeper lock, and its time grows with what it takes: on a loaded server a pass of 500
/// outlived the store's call deadline, failed, and was tried again whole, for ever, while every parent waited for its
/// release (a two-host run stopped at 8 of 200 jobs). Smaller passes finish, and the queue drains.
package struct TreeKeeperPassLimit: Equatable {
    package static let most = 500
    package static let least = 4
    package private(set) var changes = most

    package init() {}

    package mutating func failed() {
        changes = max(Self.least, changes / 4)
    }

    package mutating func succeeded(taking taken: Int) {
        if taken >= changes { changes = min(Self.most, changes * 2) }
    }
}
