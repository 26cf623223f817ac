import Foundation
import Logging
import ServiceLifecycle

extension TaskExecutor {
    // MARK: Starting

    /// Registers this executor as an owner and starts the writer, the publisher and the maintenance loops.
    func startIfNeeded() async throws {
        guard !isShutDown else { throw ProgressionError.shutDown }
        guard !started else { return }
        started = true
        try await store.saveOwner(ownerRecord(heartbeatAt: ExecutionEngine.now()))
        let engine = engine
        let publisher = publisherForLoops
        let writer = StoreWriter(engine: engine)
        backgroundTasks.append(Task.detached { await writer.run() })
        backgroundTasks.append(Task.detached { await engine.runPublisher(publisher) })
        // The loops hold the executor only during each pass, so that an executor nobody shuts down is still released.
        backgroundTasks.append(
            Task.detached { [weak self] in
                while !Task.isCancelled, let interval = await self?.maintainOnce() {
                    try? await Task.sleep(for: interval)
                }
            })
        backgroundTasks.append(
            Task.detached { [weak self] in
                var lastCounter: Int64?
                while !Task.isCancelled, let interval = await self?.pollControlRequestsOnce(&lastCounter) {
                    try? await Task.sleep(for: interval)
                }
            })
    }

    /// Starts the scheduler: recovers at once the tasks of dead owners and the jobs nobody runs (this returns after
    /// that first pass), then keeps doing so every ``Configuration/recoveryInterval``. Register job kinds first.
    ///
    /// A claimed job that was running when its owner died runs again (its completed steps are skipped, its last
    /// checkpoint is there) with `interruptions` + 1, or fails when interrupted more than
    /// ``Configuration/maxInterruptions`` times; a paused one comes back paused; a pending one waits for its next
    /// attempt time; a closure task that was running fails as interrupted, since no other process has its code.
    public func start() async throws {
        try await startIfNeeded()
        guard !schedulerStarted else { return }
        schedulerStarted = true
        await recover()
        backgroundTasks.append(
            Task.detached { [weak self, interval = engine.configuration.recoveryInterval] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    guard await self?.recoverIfRunning() == true else { return }
                }
            })
    }

    func ownerRecord(heartbeatAt: Date, stoppedAt: Date? = nil) -> OwnerRecord {
        OwnerRecord(
            id: ownerID, host: OwnerRecord.currentHost, pid: ProcessInfo.processInfo.processIdentifier,
            startedAt: ownerStartedAt, heartbeatAt: heartbeatAt, stoppedAt: stoppedAt)
    }

    // MARK: Recovery

    /// Claims roots of dead owners and unowned jobs of registered kinds, as many as there is room for, and brings
    /// them into the graph.
    func recover() async {
        let room = engine.configuration.claimBatchSize - queue.count
        guard room > 0, !isShutDown else { return }
        let now = Date()
        do {
            let staleAfter = engine.configuration.ownerStaleAfter
            let dead = try await store.owners().filter { owner in
                owner.id != ownerID && !owner.liveness(now: now, staleAfter: staleAfter).isAlive
            }
            let claimed = try await store.claimRoots(
                heldBy: [nil] + dead.map(\.id), statuses: [.pending, .running, .paused], kinds: Set(kinds.keys),
                newOwner: ownerID, limit: room, now: now)
            if !claimed.isEmpty {
                engine.configuration.logger.info(
                    "claimed tasks", metadata: ["count": "\(claimed.count)", "deadOwners": "\(dead.map(\.id))"])
            }
            for root in claimed {
                try await rehydrate(root)
            }
        } catch {
            // The store refused (busy, shut down): the next pass tries again.
            engine.configuration.logger.warning("recovery pass failed", metadata: ["error": "\(error)"])
        }
    }

    /// Loads a claimed root's tree into the graph and decides what happens to it (see ``start()``).
    func rehydrate(_ claimed: TaskRecord) async throws {
        guard engine.graph.handle(of: claimed.id) == nil else { return }
        var tree = try await store.tree(of: claimed.id)
        guard !tree.isEmpty else { return }
        var root = tree.removeFirst()
        let now = ExecutionEngine.now()
        var events: [TaskEvent] = []
        func event(_ kind: TaskEvent.Kind, _ message: String? = nil, errorType: String? = nil) {
            events.append(
                TaskEvent(
                    taskID: root.id, rootID: root.id, kind: kind, at: now, attempt: root.attempt, progress: root.progress,
                    message: message, errorType: errorType))
        }
        func fail(_ error: ProgressionError) {
            root.status = .failed
            root.finishedAt = now
            root.nextAttemptAt = nil
            root.errorType = String(reflecting: ProgressionError.self)
            root.errorDescription = error.description
            event(.failed, error.description, errorType: root.errorType)
        }
        let body = body(for: root)
        let wasRunning = claimed.status == .running
        if wasRunning {
            root.interruptions += 1
            event(.interrupted, "the process running it (owner \(claimed.ownerID ?? "none")) stopped")
        }
        if body == nil {
            if !root.status.isFinished { fail(.interrupted(taskID: root.id)) }
        } else if wasRunning {
            if root.interruptions > engine.configuration.maxInterruptions {
                fail(.tooManyInterruptions(taskID: root.id, count: root.interruptions))
            } else {
                root.status = .pending
                event(.recovered, "claimed by owner \(ownerID)")
            }
        } else if claimed.ownerID != nil {
            event(.recovered, "claimed by owner \(ownerID)")
        }
        root.updatedAt = now
        // Subtasks that were under way run again when their parent pushes them (completed ones are skipped).
        var changed = [root]
        for index in tree.indices where !tree[index].status.isFinished && tree[index].status != .pending {
            tree[index].status = .pending
            tree[index].updatedAt = now
            changed.append(tree[index])
        }
        let result = try await store.apply(TaskBatch(records: changed, events: events, owner: ownerID))
        guard result.rejectedTaskIDs.isEmpty else { return }  // another owner took it meanwhile
        engine.configuration.logger.info(
            "recovered task",
            metadata: [
                "task": "\(root.id)", "kind": "\(root.kind ?? "closure")", "status": "\(root.status)",
                "interruptions": "\(root.interruptions)", "previousOwner": "\(claimed.ownerID ?? "none")",
            ])
        let handle = engine.graph.addRoot(root)
        engine.graph.attachStoredChildren(tree, to: handle)
        guard let body, !root.status.isFinished else { return }
        runs[handle] = RootRun(body: body)
        guard root.status != .paused else { return }  // resumed later, then launched
        if let next = root.nextAttemptAt, next > Date() {
            runs[handle]?.task = Task.detached { [self] in
                try? await Task.sleep(for: .milliseconds(Int64(next.timeIntervalSinceNow * 1000)))
                guard !Task.isCancelled else { return }
                await self.launch(handle)
            }
        } else {
            launch(handle)
        }
    }

    /// Brings a finished root that is no longer in memory back from the store, for a retry.
    func loadForRetry(_ taskID: String) async throws -> NodeHandle {
        guard let stored = try await store.task(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
        guard stored.parentID == nil else {
            throw ProgressionError.notRetryable(taskID: taskID, reason: "it is a subtask: retry its root")
        }
        guard stored.status == .failed || stored.status == .cancelled else {
            throw ProgressionError.notRetryable(taskID: taskID, reason: "it is \(stored.status)")
        }
        guard stored.options.canRetry else {
            throw ProgressionError.notRetryable(taskID: taskID, reason: "its options do not allow retries")
        }
        guard let body = body(for: stored) else {
            throw ProgressionError.notRetryable(
                taskID: taskID,
                reason: stored.kind.map { "no job kind '\($0)' is registered here" }
                    ?? "it is a closure task whose code is no longer in memory")
        }
        let taken = try await store.transferTree(
            of: taskID, ifStatusIn: [.failed, .cancelled], from: stored.ownerID, to: ownerID)
        guard taken, engine.graph.handle(of: taskID) == nil else {
            throw ProgressionError.notRetryable(taskID: taskID, reason: "it changed meanwhile")
        }
        var tree = try await store.tree(of: taskID)
        let root = tree.removeFirst()
        let handle = engine.graph.addRoot(root)
        engine.graph.attachStoredChildren(tree, to: handle)
        runs[handle] = RootRun(body: body)
        return handle
    }

    // MARK: Maintenance

    /// One pass of maintenance: forgets finished roots past their visibility, and writes the owner's heartbeat when
    /// it is due. Returns the wait before the next pass, or `nil` once shut down.
    func maintainOnce() async -> Duration? {
        guard !isShutDown else { return nil }
        sweepFinished(now: ExecutionEngine.now())
        if ContinuousClock.now - lastHeartbeat >= engine.configuration.heartbeatInterval {
            lastHeartbeat = .now
            try? await store.saveOwner(ownerRecord(heartbeatAt: ExecutionEngine.now()))
        }
        return .milliseconds(250)
    }

    /// One recovery pass, unless shut down. Returns whether the executor still runs.
    func recoverIfRunning() async -> Bool {
        guard !isShutDown else { return false }
        await recover()
        return true
    }

    func sweepFinished(now: Date) {
        let configuration = engine.configuration
        let removed = engine.graph.sweepFinished(
            completedBefore: now.addingTimeInterval(-configuration.completedTaskVisibility.seconds),
            failedBefore: configuration.failedTaskVisibility.map { now.addingTimeInterval(-$0.seconds) })
        for handle in removed where !running.contains(handle) {
            runs[handle] = nil
        }
    }

    /// Applies control requests written by another process (progressctl) for this owner, when the store changed
    /// since the last pass: SQLite's `data_version` changes only when another connection commits, so an idle pass costs
    /// one pragma. Returns the wait before the next pass, or `nil` once shut down.
    func pollControlRequestsOnce(_ lastCounter: inout Int64?) async -> Duration? {
        guard !isShutDown else { return nil }
        if let counter = try? await store.changeCounter(), counter != lastCounter {
            lastCounter = counter
            await applyControlRequests()
        }
        return engine.configuration.controlPollInterval
    }

    func applyControlRequests() async {
        guard let requests = try? await store.pendingControlRequests(for: ownerID) else { return }
        for request in requests {
            var outcome = "applied"
            do {
                switch request.action {
                case .pause: try await pause(taskID: request.taskID)
                case .resume: try await resume(taskID: request.taskID)
                case .cancel: try await cancel(taskID: request.taskID)
                case .retry: try await retry(taskID: request.taskID)
                case .remove: try await remove(taskID: request.taskID)
                }
            } catch {
                outcome = "refused: \(ProgressionError.describe(error))"
            }
            engine.configuration.logger.info(
                "control request",
                metadata: ["task": "\(request.taskID)", "action": "\(request.action)", "outcome": "\(outcome)"])
            try? await store.completeControlRequest(id: request.id, outcome: outcome, at: ExecutionEngine.now())
        }
    }

    // MARK: Shutting down

    /// Stops gracefully: starts nothing more; asks running code to stop at its next report (or any cancellation
    /// point) and leaves those tasks `pending` with no owner, so that the next start runs them again; gives queued
    /// jobs back; flushes; ends the progress stream. Code still running after `gracePeriod` is left to the process's
    /// exit (its tasks are then recovered as interrupted).
    public func shutdown(gracePeriod: Duration? = nil) async {
        guard !isShutDown else { return }
        isShutDown = true
        engine.configuration.logger.info("shutting down", metadata: ["running": "\(running.count)"])
        let now = ExecutionEngine.now()
        for (handle, record, _) in engine.graph.roots() where !record.status.isFinished {
            if running.contains(handle) {
                stop(handle, .shutdown)
            } else {
                // Queued, paused or waiting for a retry: give it back.
                runs[handle]?.task?.cancel()
                engine.graph.transition(handle, event: nil, now: now) { node in node.record.ownerID = nil }
            }
        }
        queue.removeAll()
        let tasks = running.compactMap { runs[$0]?.task }
        let grace = gracePeriod ?? engine.configuration.shutdownGracePeriod
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for task in tasks { await task.value }
            }
            group.addTask { try? await Task.sleep(for: grace) }
            await group.next()
            group.cancelAll()
        }
        try? await engine.graph.waitForCommit()
        if started {
            let stopped = ExecutionEngine.now()
            try? await store.saveOwner(ownerRecord(heartbeatAt: stopped, stoppedAt: stopped))
        }
        engine.graph.close()
        for task in backgroundTasks { task.cancel() }
        backgroundTasks.removeAll()
    }
}

/// The executor as a long-running part of a service: `run()` starts the scheduler, runs until a graceful shutdown
/// (SIGTERM or SIGINT through a `ServiceGroup`), then shuts down within ``TaskExecutor/Configuration/shutdownGracePeriod``.
///
/// ```swift
/// let executor = try TaskExecutor()
/// await executor.register("import", input: ImportInput.self) { input, context in … }
/// let group = ServiceGroup(services: [executor], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
extension TaskExecutor: Service {
    public func run() async throws {
        try await start()
        try? await gracefulShutdown()
        await shutdown()
    }
}
