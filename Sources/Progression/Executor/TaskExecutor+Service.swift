import Foundation
import Synchronization
import Logging
import ServiceLifecycle

extension TaskExecutor {
    /// The executor's life, one value: made, running its background loops (the writer, timers, the publisher,
    /// maintenance, control requests, claims, schedules, the tree keeper, retention, gauges), or shut down.
    enum Life {
        /// Made: no loop runs yet.
        case idle
        /// Its background loops run in this task.
        case running(Task<Void, Never>)
        /// Shut down: nothing starts again. The loops (`nil`: they never started) are awaited by a later
        /// ``shutdown(gracePeriod:)``.
        case shutDown(Task<Void, Never>?)
    }

    // MARK: Starting

    /// Starts the background loops (once). The owner record is written by the first heartbeat, or by ``start()``.
    func startIfNeeded() throws {
        switch life {
        case .shutDown: throw ProgressionError.shutDown
        case .running: return
        case .idle:
            // Detached, for two reasons. The seed's API runs tasks without a service (addTask, then await the
            // stream): the loops start with the first call that needs them and outlive that call, without its
            // cancellation, priority or task-locals. And in a service, `run()`'s cancellation (a forced stop: another
            // service failed, or the graceful period ran out) must not cancel the writer before shutdown()'s last
            // flush, which leaves running jobs resumable (`pending`, no owner): a child task of `run()` would be
            // cancelled with it. They are not lost: the executor keeps them in its ``Life``, shutdown() cancels them
            // and waits for their end (`value`, which no cancellation cuts short), and `run()` returns after that.
            let engine = engine
            life = .running(Task.detached { await engine.runLoops() })
            engine.loopsStarted.store(true, ordering: .releasing)
        }
    }

    /// ``startIfNeeded()`` from outside the actor: a submit once the loops run (nearly every one) makes no hop onto
    /// it. A submit that passes this check while a shutdown begins is refused by the graph
    /// (``GraphState/addRoots(_:now:monotonicNow:)``), as one that came just before it is handed back.
    nonisolated func ensureStarted() async throws {
        if engine.loopsStarted.load(ordering: .acquiring) { return }
        try await startIfNeeded()
    }

    /// Starts the scheduler: registers this executor as an owner, recovers at once the tasks of dead owners and the
    /// jobs nobody runs (this returns after that first pass), then keeps doing so every
    /// ``Configuration/recoveryInterval``. Register job kinds first.
    ///
    /// A claimed job that was running when its owner died runs again (its completed steps are skipped, its last
    /// checkpoint is there) with `interruptions` + 1, or fails when interrupted more than
    /// ``Configuration/maxInterruptions`` times; a paused one comes back paused; a pending one waits for its next
    /// attempt time; a closure task that was running fails as interrupted, since no other process has its code.
    ///
    /// - Throws: ``ProgressionError/shutDown``; the store's error when the owner record cannot be written.
    public func start() async throws {
        try startIfNeeded()
        guard !engine.locked({ $0.schedulerEnabled }) else { return }
        let engine = engine
        try await engine.retryingStorage("registering the owner") {
            try await engine.store.saveOwner(engine.ownerRecord(heartbeatAt: engine.now()))
            try await engine.capabilities.fleet?.saveKinds(engine.registry.stored, at: engine.now())
        }
        try await engine.declareSchedules()
        await engine.refreshPausedKinds()
        engine.locked { $0.enableScheduler() }
        if await engine.claimOnce().full { engine.storeChanged.store(true, ordering: .relaxed) }
        engine.claimSignal.signal()
    }

    // MARK: Shutting down

    /// Stops gracefully: starts nothing more; asks running code to stop at its next report (or any cancellation
    /// point) and leaves those tasks resumable — `pending` with no owner, or `paused` when they were paused; hands
    /// queued jobs back; flushes; ends the progress stream and every background loop, and returns once they ended.
    /// Code still running after `gracePeriod` is left to the process's exit (its tasks are then recovered as
    /// interrupted). The whole stop is bounded by the grace period, even when the store cannot be reached: what is left
    /// to write (and the owner's stop record) gets what remains of it, at least a second.
    public func shutdown(gracePeriod: Duration? = nil) async {
        let loops: Task<Void, Never>?
        switch life {
        case .shutDown(let stopping):
            await stopping?.value
            return
        case .idle:
            loops = nil
        case .running(let running):
            loops = running
        }
        life = .shutDown(loops)
        engine.loopsStarted.store(false, ordering: .releasing)
        let grace = gracePeriod ?? engine.configuration.shutdownGracePeriod
        let begun = engine.beginShutdown()
        engine.logger.info("shutting down", metadata: ["running": "\(begun.running.count + begun.unlaunched.count)"])
        // Wait for running code (and the recording of how it ended) up to the grace period, including roots given a
        // slot whose run task was not made yet (it is cancelled as it is made). Code still running then is left to the
        // process's exit: the wait does not hold the stop.
        let engine = engine
        let began = engine.clock.now()
        await Self.wait(atMost: grace, clock: engine.clock) {
            // A claim pass under way may start jobs in its transaction: once it has loaded them, they are released
            // (pending, unowned) with what the stop flushes below.
            await engine.claimPassesEnded()
            for task in begun.running { await task.value }
            for handle in begun.unlaunched { await engine.runTask(launching: handle)?.value }
        }
        // What is left to write and the owner's stop record, in what remains of the grace period (at least a second),
        // unless the store keeps failing or cannot be reached past it.
        let remaining = max(grace - (engine.clock.now() - began), min(grace, .seconds(1)))
        let started = loops != nil
        await Self.wait(atMost: remaining, clock: engine.clock) {
            try? await engine.flush()
            if started {
                let now = engine.now()
                try? await engine.store.saveOwner(engine.ownerRecord(heartbeatAt: now, stoppedAt: now))
            }
        }
        // Waits for commits that will not come now fail, and the writer stores what it can before it ends.
        engine.close()
        loops?.cancel()
        await loops?.value
    }
}

extension TaskExecutor {
    /// Runs `body` and waits for it at most `timeout` on `clock`; past that, `body` goes on without being waited for
    /// (it may wait for code that ignores cancellation, or for a store that cannot be reached).
    static func wait(atMost timeout: Duration, clock: TaskClock, _ body: @escaping @Sendable () async -> Void) async {
        let waiter = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let resume: @Sendable () -> Void = {
            let continuation = waiter.withLock { state in
                defer { state = nil }
                return state
            }
            continuation?.resume()
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiter.withLock { $0 = continuation }
            let timer = Task {
                try? await clock.sleep(timeout)
                resume()
            }
            Task {
                await body()
                resume()
                timer.cancel()
            }
        }
    }
}

extension ExecutionEngine {
    /// The first step of a graceful stop: no new work; running roots are asked to stop (their code records a release);
    /// queued, paused and waiting roots are handed back now. Returns the tasks to wait for.
    func beginShutdown() -> GraphState.ShutdownBegun {
        let now = now()
        let stopping = locked { state in state.beginShutdown(now: now) }
        perform(stopping.effects)
        stopping.cancellation.run()
        return stopping
    }
}

/// The executor as a long-running part of a service: `run()` starts the scheduler, runs until a graceful shutdown
/// (SIGTERM or SIGINT through a `ServiceGroup`), then shuts down within
/// ``TaskExecutor/Configuration/shutdownGracePeriod``.
///
/// ```swift
/// let executor = try TaskExecutor()
/// try executor.register("import", input: ImportInput.self) { input, context in … }
/// let group = ServiceGroup(services: [executor], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
extension TaskExecutor: Service {
    /// Starts the scheduler, waits for a graceful shutdown (or the cancellation of the calling task), then shuts down
    /// and returns once every background loop ended.
    public func run() async throws {
        try startIfNeeded()
        do {
            try await start()
        } catch {
            await shutdown()
            throw error
        }
        try? await gracefulShutdown()
        await shutdown()
    }
}
