import Foundation
import Synchronization
import HeapModule
import Logging
import Metrics
import Tracing

/// Runs hierarchical tasks, reports their progress, and keeps every task in a ``TaskStore``.
///
/// ```swift
/// let executor = try TaskExecutor()                      // SQLite at SQLiteTaskStore.defaultPath
/// let id = try await executor.addTask(name: "Import", options: .interactive) { context in
///     try await context.report(.named("Reading"))
///     try await context.push("Parse") { parse in try await parse.report(.progress(1)) }
/// }
/// for await graph in executor.progressStream { print(graph.task(id)?.progress ?? 0) }
/// ```
///
/// Durability: `addTask` returns once the task's row is committed; a transition (start, pause, resume, complete, fail,
/// cancel, retry) is committed before it is published or returned; progress is written behind by one writer within
/// ``Configuration/writeWindow``; ``flush()`` waits until everything reported so far is committed. While the store
/// fails (a full disk, an I/O error), tasks wait at their next transition and the writer retries; nothing fails
/// because the store did.
public actor TaskExecutor {
    /// How the executor behaves.
    public struct Configuration: Sendable {
        /// How long a completed root stays in memory (and on the progress stream). Its rows stay in the store.
        public var completedTaskVisibility: Duration = .seconds(5)
        /// How long a failed or cancelled root stays in memory; `nil`: until ``TaskExecutor/remove(taskID:)``.
        public var failedTaskVisibility: Duration?
        /// How long finished jobs stay in the store before the fleet deletes them (by default completed and cancelled
        /// ones a day, failed ones a week); ``RetentionPolicy/keepEverything`` deletes nothing.
        public var retention: RetentionPolicy = .default
        /// How often the fleet's gauges (``FleetGauges``: jobs by kind and state, the oldest ready job's age, live
        /// workers, slots, schedule lag) are read from the store and recorded through swift-metrics, by one executor
        /// of the fleet at a time (it keeps the turn while it lives); `nil`: never by this executor.
        public var gaugeInterval: Duration? = .seconds(15)
        /// How long the writer lets changes gather before it writes them (progress is write-behind).
        public var writeWindow: Duration = .milliseconds(20)
        /// After a commit that resumed waiting tasks, while more changes wait to be written, the writer pauses up to
        /// this long (and at most a tenth of that commit's duration) before its next batch, so that what the resumed
        /// tasks do next (a job whose start committed ends at once; a caller whose task was added adds another) shares
        /// that batch rather than the one after. A pause shorter than 20 µs is not taken; `.zero` turns it off.
        /// `progression-bench` measures it on PostgreSQL (`jobs_per_s_postgres_8` beside
        /// `jobs_per_s_postgres_8_ungathered`).
        public var commitGatheringWindow: Duration = .microseconds(100)
        /// The progress stream publishes at most once per interval.
        public var publishInterval: Duration = .milliseconds(50)
        /// Progress values are sampled into the history at most once per interval per task.
        public var progressSampleInterval: Duration = .seconds(1)
        /// Reports wait for the writer when this many history events are queued.
        public var eventBacklogLimit = 100_000
        /// This executor's owner id in the store; random by default.
        public var ownerID: String?
        /// At most this many roots run at once; the others wait, by priority then age. By default twice the number of
        /// cores, at least 8: enough for jobs that wait on I/O, bounded so that a burst of submissions does not start
        /// thousands of jobs at once.
        public var maxConcurrentTasks = max(8, 2 * ProcessInfo.processInfo.activeProcessorCount)
        /// A job interrupted more times than this (its process died while it ran: a crash loop) fails instead of
        /// running again.
        public var maxInterruptions = 3
        /// How often the scheduler looks for tasks of dead owners, even when nothing else says the store changed.
        /// Jobs submitted by other processes are claimed when their commit is seen (every
        /// ``controlPollInterval``), and jobs that wait for a time when it comes.
        public var recoveryInterval: Duration = .seconds(1)
        /// How long a change of a task held by another live executor (``TaskExecutor/pause(taskID:)`` of a job that
        /// runs elsewhere) waits for that executor's answer.
        public var controlAnswerTimeout: Duration = .seconds(5)
        /// A schedule's tick that a worker sees later than this is missed (its schedule's ``MissedTicks`` policy
        /// decides): a worker that starts a little after a tick still runs it.
        public var scheduleGrace: Duration = .seconds(60)
        /// How often the executor checks the store for control requests and jobs of another process (a cheap check
        /// of SQLite's `data_version` when nothing changed). A ``JobClient`` of this process on the same database says
        /// when it submitted: the executor looks for work at once then.
        public var controlPollInterval: Duration = .milliseconds(100)
        /// How often the owner's heartbeat is written; an owner on another host whose heartbeat is older than
        /// `ownerStaleAfter` is dead.
        public var heartbeatInterval: Duration = .seconds(2)
        /// When an owner on another host counts as dead (see ``heartbeatInterval``).
        public var ownerStaleAfter: Duration = .seconds(15)
        /// The host this executor's owner record names: an owner of the same host is dead as soon as its process is
        /// gone, one of another host when its heartbeat is older than ``ownerStaleAfter``. By default the machine's
        /// host name, or `$PROGRESSION_HOST` (e.g. for containers that share a database and a host name).
        public var hostName: String = OwnerRecord.currentHost
        /// How often the store's write-ahead log is checkpointed, off the commit path.
        public var checkpointInterval: Duration = .seconds(1)
        /// The largest job input accepted, in bytes of JSON (16 MiB): a larger one is refused with
        /// ``JobInputTooLargeError`` and nothing is stored.
        public var maxInputBytes = 16 << 20
        /// How long a graceful shutdown waits for running code to stop at its next report.
        public var shutdownGracePeriod: Duration = .seconds(10)
        /// Where the executor logs what happens out of the task code's sight — recoveries and claims, retries, lost
        /// leases, a failing store, control requests, shutdown — and the logger task code gets from its context
        /// (``TaskContext/logger``, with the task's id, kind and attempt as metadata). By default a logger labelled
        /// `progression` of the application's logging system (swift-log's `LoggingSystem`).
        public var logger = Logger(label: "progression")
        /// Where the executor's counters and timers go (`progression.tasks.*`, `progression.writer.*`: the article
        /// <doc:Observability> lists them). `nil`: the application's `MetricsSystem` (a no-op until it bootstraps one).
        public var metricsFactory: (any MetricsFactory)?
        /// The tracer of the span each root run and each step gets (attributes `progression.task.id`, `.kind`,
        /// `.attempt`). `nil`: the application's `InstrumentationSystem.tracer` (a no-op until it bootstraps one).
        public var tracer: (any Tracer)?
        /// The clock of timeouts, backoffs, intervals and rates; tests give one they control. With the default the
        /// stored times are the system's. The owner record's start is the wall clock's whatever the clock (the
        /// executors of a host compare it with the system's start time of its pid).
        public var clock: any Clock<Duration> = ContinuousClock()

        /// The defaults.
        public init() {}
    }

    /// Where tasks are stored.
    public nonisolated let store: any TaskStore
    /// This executor's id as the owner of its tasks in the store.
    public nonisolated let ownerID: String
    nonisolated let engine: ExecutionEngine
    /// Where the executor is in its life, and where its background loops run (``Life``).
    var life = Life.idle

    /// An executor on a SQLite database.
    public init(store: SQLiteTaskStore, configuration: Configuration = .init()) {
        self.init(backend: store, configuration: configuration)
    }

    /// An executor on a store in memory (tests, and tasks that need not survive the process).
    public init(store: InMemoryTaskStore, configuration: Configuration = .init()) {
        self.init(backend: store, configuration: configuration)
    }

    /// An executor on a store known only as a ``TaskStore`` (one opened from a URL, say): this package's stores
    /// (``SQLiteTaskStore``, ``InMemoryTaskStore``, `PostgresTaskStore`) run tasks; any other is refused.
    ///
    /// - Throws: ``ProgressionError/unsupportedStore(_:)`` for a store of another type: the executor's write side
    ///   (claims, fencing, one writer) is the package's own: a ``TaskStore`` of yours can be read through its API, but
    ///   cannot run tasks.
    public init(store: any TaskStore, configuration: Configuration = .init()) throws(ProgressionError) {
        guard let backend = store as? any TaskStoreBackend else {
            throw .unsupportedStore(String(describing: type(of: store)))
        }
        self.init(backend: backend, configuration: configuration)
    }

    /// An executor on one of the package's stores.
    package init(backend: any TaskStoreBackend, configuration: Configuration = .init()) {
        self.init(core: backend, configuration: configuration)
    }

    /// An executor on a store that may have no more than the core of one (``TaskStoreCore``): it does without what
    /// the store lacks, as ``TaskStoreCore`` says; ``store`` reads tasks and trees of such a store, and refuses the
    /// rest of ``TaskStore``.
    package init(core: any TaskStoreCore, configuration: Configuration = .init()) {
        store = core as? any TaskStore ?? CoreStoreReader(core: core)
        let ownerID = configuration.ownerID ?? TaskIdentifier.random()
        self.ownerID = ownerID
        engine = ExecutionEngine(store: core, ownerID: ownerID, configuration: configuration)
    }

    /// An executor on the SQLite database at `path` (by default ``SQLiteTaskStore/defaultPath``, whose directory is
    /// created when missing).
    ///
    /// - Throws: ``TaskStoreError`` when the database cannot be opened.
    public init(path: String? = nil, configuration: Configuration = .init()) throws {
        let path = path ?? SQLiteTaskStore.defaultPath
        if path == SQLiteTaskStore.defaultPath {
            try SQLiteTaskStore.createParentDirectories(of: path)
        }
        self.init(store: try SQLiteTaskStore(path: path), configuration: configuration)
    }

    deinit {
        if case .running(let loops) = life { loops.cancel() }
    }

    /// Graphs of every task in memory, published when something changes (at most once per publish interval). Each
    /// access makes a new subscription that starts with the current graph; a slow consumer gets the latest graph,
    /// never a backlog.
    public nonisolated var progressStream: AsyncStream<TaskGraph> {
        let published = engine.publisher.publishCount
        return engine.publisher.subscribe(current: engine.locked { $0.graph() }, publishedSince: published)
    }

    /// How many of the executor's background loops run now: 0 before it started and once ``shutdown(gracePeriod:)``
    /// returned.
    package nonisolated var runningLoops: Int {
        engine.runningLoops.load(ordering: .relaxed)
    }

    /// The executor's inner state in one line, for tools that investigate a stuck run.
    package nonisolated var diagnostics: String {
        engine.locked { state in
            let waiting = state.commits.waiters.map(\.sequence)
            let phases = Dictionary(grouping: state.roots, by: { "\($0.phase)" }).mapValues(\.count)
            return "slots \(state.runQueue.running)/\(state.runQueue.maxConcurrent), queued \(state.runQueue.queued), "
                + "phases \(phases), change \(state.changeSequence), "
                + "committed \(state.committedSequence), waiters \(waiting.count) (lowest \(waiting.min() ?? -1)), "
                + "dirty \(state.dirtyNodes.count), events \(state.events.count), timers \(state.timers.earliest.map { "\($0)" } ?? "none"), "
                + "storage \(state.storage), urgent \(state.urgent)"
        }
    }

    /// Whether writes reach the store now.
    public nonisolated var storageHealth: StorageHealth {
        engine.locked { $0.storage }
    }

    // MARK: Adding tasks

    /// Adds a task and starts it (when a slot is free). Returns once the task's row is committed.
    ///
    /// - Parameters:
    ///   - name: what the task is called in snapshots, history and `progressctl`.
    ///   - id: the task's id; a new short id drawn from the store's sequence (`3xjggyz2`) when `nil`.
    ///   - options: what may be done to it (cancel, pause, retry), its timeout and its priority.
    ///   - body: the task's code; it runs when a slot is free, after the task's start is committed.
    /// - Throws: ``ProgressionError/duplicateID(_:)`` when a task with this id exists (in memory or in the store);
    ///   ``ProgressionError/shutDown``.
    @discardableResult
    public nonisolated func addTask(
        name: String, id: String? = nil, options: TaskOptions = .default,
        _ body: @escaping @Sendable (any TaskContext) async throws -> Void
    ) async throws -> String {
        try await ensureStarted()
        let id = if let id { id } else { try await engine.identifiers.next() }
        let record = TaskRecord(
            id: id, name: name, options: options, status: .pending, ownerID: ownerID, createdAt: engine.now())
        let (handles, sequence) = try engine.addRoots([
            NewRoot(record: record, body: { context in
                try await body(context)
                return nil
            })
        ])
        if try await !engine.commitNewRoots(handles, sequence: sequence).isEmpty {
            throw ProgressionError.duplicateID(id)
        }
        return id
    }

    // MARK: Control

    /// Pauses a task (root or subtask): its code, and the code of everything below it, suspends at its next report,
    /// push or checkpoint. Returns once the paused state is committed. Pausing a paused task does nothing.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/notPausable(taskID:)``,
    ///   ``ProgressionError/invalidState(taskID:status:action:)`` for a finished task.
    public func pause(taskID: String) async throws {
        try await engine.change(.pause, taskID)
    }

    /// Resumes a paused task and what it paused below it.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/invalidState(taskID:status:action:)``
    ///   when the task was not paused.
    public func resume(taskID: String) async throws {
        try await engine.change(.resume, taskID)
    }

    /// Asks a task (root or subtask) to stop: its code and everything below it are cancelled, and it ends
    /// `cancelled` once its code has stopped (at its next report, or any cancellation point). Returns without waiting
    /// for that.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/notCancellable(taskID:)``,
    ///   ``ProgressionError/invalidState(taskID:status:action:)`` for a finished task.
    public func cancel(taskID: String) async throws {
        try await engine.change(.cancel, taskID)
    }

    /// Runs a job that waits for a time — a run-at, a retry's backoff, a durable sleep — as soon as a worker has a free
    /// slot. Works wherever the job is: here, in the store, or held by another live executor.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/invalidState(taskID:status:action:)`` for a
    ///   subtask, a finished job or one that waits for no time.
    public func runNow(taskID: String) async throws {
        try await engine.change(.runNow, taskID)
    }

    /// Cancels every unfinished task whose options allow it.
    public func cancelAll() async {
        await engine.cancelAll()
    }

    /// Runs a failed or cancelled root again under the same id, with its attempt count + 1. Subtasks that completed
    /// are not run again (their stored results are returned). When called right after ``cancel(taskID:)``, it waits
    /// for the cancelled code to stop first. A root no longer in memory is loaded from the store (a job of a kind
    /// registered here).
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/notRetryable(taskID:reason:)``.
    @discardableResult
    public func retry(taskID: String) async throws -> String {
        if engine.locked({ $0.node(id: taskID) == nil }) {
            // A job this worker's version leaves is retried in the store, for a worker that can continue it.
            guard try await engine.loadForRetry(taskID) else { return taskID }
        }
        try await engine.retry(taskID)
        return taskID
    }

    /// Removes a finished root: from memory, and from the store with its subtree and history. A root that is no
    /// longer in memory is removed from the store.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/invalidState(taskID:status:action:)``
    ///   for a subtask or a task that has not finished (cancel it first).
    public func remove(taskID: String) async throws {
        try await engine.remove(taskID, force: false)
    }

    /// Waits until everything reported so far is committed.
    public func flush() async throws {
        try await engine.flush()
    }

    /// The snapshot of a task (root or subtask) in memory, or `nil`.
    public nonisolated func snapshot(of taskID: String) -> TaskSnapshot? {
        engine.locked { state in state.node(id: taskID).map { state.snapshot(of: $0) } }
    }

    /// Every task in memory, now.
    public nonisolated func graph() -> TaskGraph {
        engine.locked { $0.graph() }
    }

    /// Waits until a root is idle: its run (automatic retries included) has ended and its end is committed; a root
    /// paused before it started, or not in memory, is idle.
    public nonisolated func waitForTask(_ taskID: String) async {
        await engine.waitUntilIdle(taskID)
    }
}
