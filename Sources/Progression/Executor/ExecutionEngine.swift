import Foundation
import Logging
import Metrics
import Tracing
import Synchronization

/// The executor's machinery, shared by the executor, every task context and the background loops: the graph of tasks
/// behind one lock (``GraphState``), the store, the job kinds, the clock, and the signals that wake the writer, the
/// timer loop and the publisher. Reports and pushes use it directly, without an actor hop.
///
/// Its work is spread over files by concern: roots and their runs (`+Roots`), subtasks, reports and checkpoints
/// (`+Children`), child jobs and durable waits (`+ChildJobs`), control (`+Control`), recovery (`+Recovery`), the
/// background loops (`+Loops`), the writer (`StoreWriter.swift`). Each carries out what a part of the graph decides
/// (Graph/: the tree, root runs, subtasks, child job steps, pauses, the write set, …), entered through ``locked(_:)``.
final class ExecutionEngine: Sendable {
    /// The executor's state: entered only through ``locked(_:)``.
    private let state: Mutex<GraphState>
    let store: any TaskStoreCore
    /// What the store can do beyond running jobs on one host (``TaskStoreCore``): asked once, here.
    let capabilities: StoreCapabilities
    let ownerID: String
    /// When this executor started, as its owner record says: the wall clock's time even when the executor runs on a
    /// clock of its own (``TaskExecutor/Configuration/clock``), since an executor of the same host compares it with
    /// the system's start time of the owner's pid to tell a reused pid (a simulated start before this boot made every
    /// owner of the process look dead to the others, which then took its jobs and ran them again).
    let startedAt: Date
    let configuration: TaskExecutor.Configuration
    let clock: TaskClock
    let registry = JobRegistry()
    let identifiers: IdentifierPool
    let publisher = GraphPublisher()
    let metrics: ExecutorMetrics
    let tracer: any Tracer
    /// Whether a storage failure was logged since writes last succeeded (logged once per outage).
    let storageOutage = StorageOutage()
    /// How many background loops run now (0 once a shutdown returned).
    let runningLoops = Atomic<Int>(0)
    /// The executor's loops were started and it is not shut down (``TaskExecutor/ensureStarted()``).
    let loopsStarted = Atomic<Bool>(false)

    private let writerWake: AsyncStream<Void>.Continuation
    let writerSignals: AsyncStream<Void>
    let timerSignal = WakeSignal()
    let publisherSignal = WakeSignal()
    /// Wakes the claim loop: a slot freed with nothing queued, or the store changed.
    let claimSignal = WakeSignal()
    /// Wakes the schedule loop: the store changed (a schedule paused, resumed or added).
    let scheduleSignal = WakeSignal()
    /// Wakes the tree keeper: this executor wrote a change of a job tree, or the store changed.
    let treeSignal = WakeSignal()
    /// Another process committed since the claim loop last looked: the store may hold jobs to claim.
    let storeChanged = Atomic<Bool>(true)
    /// The dead owners, as last read (the claim loop reads them at most once per recovery interval).
    let ownerCache = Mutex<(readAt: Date, dead: [String: Date])?>(nil)
    /// The schedules this executor declared.
    let declaredSchedules = Mutex<[String: Schedule]>([:])

    /// A report yields its thread when the writer has not taken a batch for this long (seconds): task code that
    /// reports in a tight loop on every thread of Swift's cooperative pool would otherwise keep the writer from
    /// running.
    let writerLagTolerance: TimeInterval

    var logger: Logger { configuration.logger }

    init(store: any TaskStoreCore, ownerID: String, configuration: TaskExecutor.Configuration) {
        self.store = store
        capabilities = StoreCapabilities(store)
        self.ownerID = ownerID
        self.configuration = configuration
        let clock = TaskClock(configuration.clock)
        self.clock = clock
        startedAt = Date()
        let (writerSignals, writerWake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        (self.writerSignals, self.writerWake) = (writerSignals, writerWake)
        let writerLagTolerance = max(0.01, configuration.writeWindow.seconds * 2.5)
        state = Mutex(
            GraphState(
                ownerID: ownerID, maxConcurrentTasks: configuration.maxConcurrentTasks, writerWake: writerWake,
                eventBacklogLimit: configuration.eventBacklogLimit, writerLagTolerance: writerLagTolerance,
                sweepsFailed: configuration.failedTaskVisibility != nil))
        self.writerLagTolerance = writerLagTolerance
        metrics = ExecutorMetrics(factory: configuration.metricsFactory ?? MetricsSystem.factory)
        tracer = configuration.tracer ?? InstrumentationSystem.tracer
        let logger = configuration.logger
        let outage = storageOutage
        identifiers = IdentifierPool(store: store, clock: clock) { error in
            Self.noteStorageFailure(error, outage: outage, logger: logger, what: "reserving task ids")
        }
    }

    /// The wall-clock time, to the millisecond.
    @inline(__always)
    func now() -> Date { clock.date() }

    /// The job kind of a node's root (a subtask has none of its own).
    func rootKind(of record: TaskRecord) -> String? {
        locked { $0.node(id: record.rootID)?.record.kind }
    }

    /// Runs `body` under the graph's lock: the one way into the executor's state. `body` calls one function of a part
    /// of the graph (the tree, the run queue, the write set, pauses, …, each tested alone in
    /// Tests/ProgressionTests/Graph) or reads it; it never changes the state itself. What a change leaves to do outside
    /// it comes back in `body`'s value (``GraphEffects``, ``Dispatch``, ``GraphState/Committed``) and is carried out
    /// once the lock is released: a continuation is never resumed under the lock.
    func locked<T: Sendable, E: Error>(_ body: (inout GraphState) throws(E) -> T) throws(E) -> T {
        try state.withLock { state throws(E) -> T in try body(&state) }
    }

    /// Carries out what a change of the graph left to do, the lock released: resumes the callers of `waitForTask`
    /// whose roots became idle, and wakes the timer loop for a deadline earlier than those it waits for.
    func perform(_ effects: GraphEffects) {
        for waiter in effects.idleWaiters { waiter.resume() }
        if effects.wakesTimers { timerSignal.signal() }
        if effects.wakesClaims {
            storeChanged.store(true, ordering: .relaxed)
            claimSignal.signal()
        }
    }

    // MARK: Signals

    /// Wakes the writer; `urgent` (someone waits for a commit) also cuts its batching window short.
    func wakeWriter(urgent: Bool) {
        if urgent {
            let waiter = locked { $0.endWindow(urgent: true) }
            waiter?.resume()
        }
        writerWake.yield()
    }

    // MARK: Commits

    /// Waits until the changes up to `sequence` are committed (and so shown on the progress stream). While writes
    /// fail, it waits for the writer's next successful batch.
    ///
    /// - Throws: ``ProgressionError/shutDown`` (or the store's last error) when the executor closed before the
    ///   commit.
    /// - Parameter looksFirst: whether to look whether it is committed before making a continuation (`false` when the
    ///   caller just found it is not: the registration finds it committed meanwhile all the same).
    func waitForCommit(_ sequence: Int64, looksFirst: Bool = true) async throws {
        if looksFirst, locked({ $0.committedSequence >= sequence }) { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let (immediate, window) = locked { $0.waitForCommitSoon(sequence, continuation) }
            if let immediate { continuation.resume(with: immediate) }
            window?.resume()
        }
    }

    /// Waits until everything changed so far is committed.
    func flush() async throws {
        try await waitForCommit(locked { $0.changeSequence })
    }

    /// Ends the graph: later waits fail with `error`, and the writer stops once it stored what is left.
    func close(error: any Error = ProgressionError.shutDown) {
        let (waiters, effects) = locked { state in
            let waiters = state.commits.close(error)
            // Nothing waits for their commits any more: ended roots are settled now.
            return (waiters, state.settleEndedRuns(upTo: .max))
        }
        perform(effects)
        for waiter in waiters { waiter.resume(throwing: error) }
        writerWake.finish()
        publisherSignal.signal()
        timerSignal.signal()
    }

    // MARK: Storage health

    /// Logs a storage failure once per outage, as a warning.
    static func noteStorageFailure(_ error: any Error, outage: StorageOutage, logger: Logger, what: String) {
        // A call cut short because the caller's task was cancelled (the executor stopping) is no outage: what it did
        // is done again by the next executor (a claim, a heartbeat). The writer says what it did not store itself.
        if Task.isCancelled, error is CancellationError || (error as? TaskStoreError)?.reason == .cancelled { return }
        let first = outage.logged.withLock { logged in
            defer { logged = true }
            return !logged
        }
        if first {
            logger.warning(
                "storage failing; tasks wait and writes are retried with backoff",
                metadata: ["error": "\(ProgressionError.describe(error))", "while": "\(what)"])
        }
    }

    func noteStorageRecovered() {
        let wasFailing = storageOutage.logged.withLock { logged in
            defer { logged = false }
            return logged
        }
        if wasFailing { logger.notice("storage writes succeed again") }
    }

    /// Runs `body` until it succeeds, waiting with backoff while the store fails transiently (logged once per outage).
    ///
    /// - Throws: a final error of the store; `CancellationError` when the calling task is cancelled.
    func retryingStorage(_ what: String, _ body: () async throws -> Void) async throws {
        var failures = 0
        while true {
            do {
                try await body()
                if failures > 0 { noteStorageRecovered() }
                return
            } catch let error as TaskStoreError where error.isTransient {
                Self.noteStorageFailure(error, outage: storageOutage, logger: logger, what: what)
                failures += 1
                try await clock.sleep(StoreWriter.backoff(afterFailures: failures))
            }
        }
    }

    static func isCancellation(_ error: any Error) -> Bool {
        if error is CancellationError { return true }
        if case ProgressionError.cancelled = error { return true }
        return false
    }
}

/// Whether a storage failure was logged since writes last succeeded.
final class StorageOutage: Sendable {
    let logged = Mutex(false)
}

/// A one-slot wake-up: `signal()` wakes the current (or next) `wait`, which also ends after a timeout on a clock or
/// when its task is cancelled.
final class WakeSignal: Sendable {
    private let state = Mutex<(signaled: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func signal() {
        let waiter = state.withLock { state in
            defer { state.waiter = nil }
            if state.waiter == nil { state.signaled = true }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Waits for a signal (one that came since the last wait counts).
    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.signaled || Task.isCancelled {
                        state.signaled = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    /// Waits for a signal or until `deadline` on `clock` (a time of its `now`), whichever comes first.
    func wait(until deadline: Duration, clock: TaskClock) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleepUntil(deadline) }
            group.addTask { await self.wait() }
            await group.next()
            group.cancelAll()
        }
    }

    /// Waits for a signal or for `timeout` on `clock`, whichever comes first.
    func wait(timeout: Duration, clock: TaskClock) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(timeout) }
            group.addTask { await self.wait() }
            await group.next()
            group.cancelAll()
        }
    }
}
