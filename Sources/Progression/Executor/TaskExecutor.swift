import Foundation
import Logging

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
/// ``Configuration/writeWindow``; ``flush()`` waits until everything reported so far is committed.
public actor TaskExecutor {
    /// How the executor behaves.
    public struct Configuration: Sendable {
        /// How long a completed root stays in memory (and on the progress stream). Its rows stay in the store.
        public var completedTaskVisibility: Duration = .seconds(5)
        /// How long a failed or cancelled root stays in memory; `nil`: until ``TaskExecutor/remove(taskID:)``.
        public var failedTaskVisibility: Duration?
        /// How long the writer lets changes gather before it writes them (progress is write-behind).
        public var writeWindow: Duration = .milliseconds(20)
        /// The progress stream publishes at most once per interval.
        public var publishInterval: Duration = .milliseconds(50)
        /// Progress values are sampled into the history at most once per interval per task.
        public var progressSampleInterval: Duration = .seconds(1)
        /// Reports wait for the writer when this many history events are queued.
        public var eventBacklogLimit = 100_000
        /// This executor's owner id in the store; random by default.
        public var ownerID: String?
        /// At most this many roots run at once; the others wait, by priority then age.
        public var maxConcurrentTasks = Int.max
        /// A job interrupted more times than this (its process died while it ran: a crash loop) fails instead of
        /// running again.
        public var maxInterruptions = 3
        /// How often the scheduler looks for tasks of dead owners and jobs nobody runs.
        public var recoveryInterval: Duration = .seconds(1)
        /// How many roots the scheduler claims at a time.
        public var claimBatchSize = 1000
        /// How often the executor checks the store for control requests of another process (a cheap check of
        /// SQLite's `data_version` when nothing changed).
        public var controlPollInterval: Duration = .milliseconds(100)
        /// How often the owner's heartbeat is written; an owner on another host whose heartbeat is older than
        /// `ownerStaleAfter` is dead.
        public var heartbeatInterval: Duration = .seconds(2)
        public var ownerStaleAfter: Duration = .seconds(15)
        /// How long a graceful shutdown waits for running code to stop at its next report.
        public var shutdownGracePeriod: Duration = .seconds(10)
        /// Where the executor logs what happens out of the task code's sight: recoveries and claims, lost leases,
        /// failed writes, control requests, shutdown. Silent by default.
        public var logger = Logger(label: "progression", factory: { _ in SwiftLogNoOpLogHandler() })

        public init() {}
    }

    /// Where tasks are stored.
    public nonisolated let store: any TaskStore
    /// This executor's id as the owner of its tasks in the store.
    public nonisolated let ownerID: String
    nonisolated let engine: ExecutionEngine
    private nonisolated let publisher = GraphPublisher()
    nonisolated var publisherForLoops: GraphPublisher { publisher }
    var runs: [NodeHandle: RootRun] = [:]
    /// Roots whose code runs now, counted against ``Configuration/maxConcurrentTasks``.
    var running: Set<NodeHandle> = []
    /// Roots waiting for a free slot, by priority then age.
    var queue: [(priority: Int, createdAt: Date, handle: NodeHandle)] = []
    /// Registered job kinds.
    var kinds: [String: JobKind] = [:]
    var backgroundTasks: [Task<Void, Never>] = []
    var started = false
    var schedulerStarted = false
    var isShutDown = false
    let ownerStartedAt = ExecutionEngine.now()
    var lastHeartbeat = ContinuousClock.now

    /// A root's code and the Swift task running it.
    struct RootRun {
        var body: @Sendable (any TaskContext) async throws -> Void
        var task: Task<Void, Never>?
    }

    /// An executor on `store`.
    public init(store: any TaskStore, configuration: Configuration = .init()) {
        self.store = store
        let ownerID = configuration.ownerID ?? TaskIdentifier.make()
        self.ownerID = ownerID
        engine = ExecutionEngine(store: store, ownerID: ownerID, configuration: configuration)
    }

    /// An executor on the SQLite database at `path` (by default ``SQLiteTaskStore/defaultPath``, whose directory is
    /// created when missing).
    ///
    /// - Throws: ``TaskStoreError`` when the database cannot be opened.
    public init(path: String? = nil, configuration: Configuration = .init()) throws {
        let path = path ?? SQLiteTaskStore.defaultPath
        if path == SQLiteTaskStore.defaultPath {
            let directory = (path as NSString).deletingLastPathComponent
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        self.init(store: try SQLiteTaskStore(path: path), configuration: configuration)
    }

    deinit {
        for task in backgroundTasks { task.cancel() }
        engine.graph.close()
    }

    /// Graphs of every task in memory, published when something changes (at most once per publish interval). Each
    /// access makes a new subscription that starts with the latest graph; a slow consumer gets the latest graph, never
    /// a backlog.
    public nonisolated var progressStream: AsyncStream<TaskGraph> {
        publisher.subscribe()
    }

    // MARK: Adding tasks

    /// Adds a task and starts it. Returns once the task's row is committed.
    ///
    /// - Parameters:
    ///   - id: the task's id; a UUID when `nil`.
    /// - Throws: ``ProgressionError/duplicateID(_:)`` when a task with this id exists (in memory or in the store);
    ///   ``TaskStoreError`` when the store fails.
    @discardableResult
    public func addTask(
        name: String, id: String? = nil, options: TaskOptions = .default,
        _ body: @escaping @Sendable (any TaskContext) async throws -> Void
    ) async throws -> String {
        try await startIfNeeded()
        let id = id ?? TaskIdentifier.make()
        guard engine.graph.handle(of: id) == nil else { throw ProgressionError.duplicateID(id) }
        let now = ExecutionEngine.now()
        let record = TaskRecord(
            id: id, name: name, options: options, status: .pending, ownerID: ownerID, createdAt: now)
        let handle = try await insertNewRoot(
            record, event: TaskEvent(taskID: id, rootID: id, kind: .created, at: now, attempt: 1, message: name))
        runs[handle] = RootRun(body: body)
        launch(handle)
        return id
    }

    /// Inserts a new root through the writer (one commit for all the roots and transitions of a window) and waits
    /// for its commit.
    ///
    /// - Throws: ``ProgressionError/duplicateID(_:)`` when its identity was taken (nothing is written then), or the
    ///   store's error.
    func insertNewRoot(_ record: TaskRecord, event: TaskEvent) async throws -> NodeHandle {
        let (handle, sequence) = engine.graph.addNewRoot(record, event: event)
        do {
            try await engine.commit(sequence)
        } catch {
            engine.graph.removeRoot(handle)
            throw error
        }
        if engine.graph.didConflict(handle) {
            engine.graph.removeRoot(handle)
            throw ProgressionError.duplicateID(record.id)
        }
        return handle
    }

    /// Starts a root's code, or queues it while ``Configuration/maxConcurrentTasks`` roots run.
    func launch(_ handle: NodeHandle) {
        guard runs[handle] != nil, !running.contains(handle) else { return }
        guard running.count < engine.configuration.maxConcurrentTasks else {
            guard let record = engine.graph.record(handle) else { return }
            let entry = (priority: record.priority, createdAt: record.createdAt, handle: handle)
            let index = queue.firstIndex { ($0.priority, entry.createdAt) < (entry.priority, $0.createdAt) } ?? queue.endIndex
            queue.insert(entry, at: index)
            return
        }
        start(handle)
    }

    private func start(_ handle: NodeHandle) {
        guard let body = runs[handle]?.body else { return }
        running.insert(handle)
        let engine = engine
        runs[handle]?.task = Task.detached { [self] in
            await engine.runRoot(handle, body: body)
            await self.runEnded(handle)
        }
    }

    private func runEnded(_ handle: NodeHandle) {
        running.remove(handle)
        // Swept from memory while its run was ending: nothing will run it again here.
        if engine.graph.record(handle) == nil { runs[handle] = nil }
        while running.count < engine.configuration.maxConcurrentTasks, !queue.isEmpty, !isShutDown {
            start(queue.removeFirst().handle)
        }
    }

    // MARK: Control

    /// Pauses a task (root or subtask) and everything below it: their code suspends at its next report, push or
    /// checkpoint. Returns once the paused state is committed.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/notPausable(taskID:)``,
    ///   ``ProgressionError/invalidState(taskID:status:action:)`` for a finished task.
    public func pause(taskID: String) async throws {
        try await setPaused(taskID, true)
    }

    /// Resumes a paused task and what it paused below it.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/invalidState(taskID:status:action:)``
    ///   when the task was not paused.
    public func resume(taskID: String) async throws {
        try await setPaused(taskID, false)
    }

    private func setPaused(_ taskID: String, _ paused: Bool) async throws {
        let (handle, record) = try node(taskID)
        guard record.options.canPause else { throw ProgressionError.notPausable(taskID: taskID) }
        guard !record.status.isFinished else {
            throw ProgressionError.invalidState(taskID: taskID, status: record.status, action: paused ? "pause" : "resume")
        }
        if engine.graph.isPausedExplicitly(handle) == paused {
            guard paused else {
                throw ProgressionError.invalidState(taskID: taskID, status: record.status, action: "resume")
            }
            return  // paused already
        }
        engine.graph.setPaused(handle, paused, now: ExecutionEngine.now())
        try await engine.graph.waitForCommit()
        // A root that came back paused from the store has no code running yet.
        if !paused, record.parentID == nil, runs[handle]?.task == nil { launch(handle) }
    }

    /// Asks a task (root or subtask) to stop: its code and everything below it are cancelled, and it ends
    /// `cancelled` once its code has stopped (at its next report, or any cancellation point). Returns without waiting
    /// for that.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/notCancellable(taskID:)``,
    ///   ``ProgressionError/invalidState(taskID:status:action:)`` for a finished task.
    public func cancel(taskID: String) async throws {
        let (handle, record) = try node(taskID)
        guard record.options.canCancel else { throw ProgressionError.notCancellable(taskID: taskID) }
        guard !record.status.isFinished else {
            throw ProgressionError.invalidState(taskID: taskID, status: record.status, action: "cancel")
        }
        if record.parentID == nil, !running.contains(handle) {
            // Queued, paused before it started, or waiting for its next attempt: no code to stop.
            queue.removeAll { $0.handle == handle }
            runs[handle]?.task?.cancel()
            let now = ExecutionEngine.now()
            let sequence = engine.graph.transition(handle, event: .cancelled, now: now) { node in
                node.record.status = .cancelled
                node.record.finishedAt = now
                node.record.nextAttemptAt = nil
            }
            try await engine.commit(sequence)
            return
        }
        stop(handle, .cancelled)
    }

    func stop(_ handle: NodeHandle, _ reason: StopReason) {
        engine.graph.requestStop(handle, reason)?()
        runs[handle]?.task?.cancel()
    }

    /// Cancels every running task whose options allow it.
    public func cancelAll() async {
        for (handle, record, _) in engine.graph.roots() where !record.status.isFinished && record.options.canCancel {
            stop(handle, .cancelled)
        }
    }

    /// Runs a failed or cancelled root again under the same id, with its attempt count + 1. Subtasks that completed
    /// are not run again (their stored results are returned). When called right after ``cancel(taskID:)``, it waits
    /// for the cancelled code to stop first.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/notRetryable(taskID:reason:)``.
    @discardableResult
    public func retry(taskID: String) async throws -> String {
        if engine.graph.handle(of: taskID) == nil {
            _ = try await loadForRetry(taskID)
        }
        let (handle, record) = try node(taskID)
        guard record.parentID == nil else {
            throw ProgressionError.notRetryable(taskID: taskID, reason: "it is a subtask: retry its root")
        }
        guard record.options.canRetry else {
            throw ProgressionError.notRetryable(taskID: taskID, reason: "its options do not allow retries")
        }
        if !record.status.isFinished, engine.graph.stopReason(handle) == nil {
            throw ProgressionError.notRetryable(taskID: taskID, reason: "it is \(record.status)")
        }
        // Let the previous run end, its bookkeeping included (a cancellation may be under way).
        await runs[handle]?.task?.value
        guard let current = engine.graph.record(handle), current.status == .failed || current.status == .cancelled else {
            let status = engine.graph.record(handle)?.status ?? record.status
            throw ProgressionError.notRetryable(taskID: taskID, reason: "it is \(status)")
        }
        let sequence = engine.graph.transition(
            handle, event: .retried, message: "attempt \(current.attempt + 1)", now: ExecutionEngine.now()
        ) { node in
            node.record.attempt += 1
            node.record.status = node.isPaused ? .paused : .pending
            node.record.finishedAt = nil
            node.record.errorType = nil
            node.record.errorDescription = nil
            node.record.nextAttemptAt = nil
        }
        engine.graph.resetForNewAttempt(handle)
        try await engine.commit(sequence)
        launch(handle)
        return taskID
    }

    /// Removes a finished root: from memory, and from the store with its subtree and history. A root that is no longer
    /// in memory is removed from the store.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``, ``ProgressionError/invalidState(taskID:status:action:)``
    ///   for a task that has not finished (cancel it first).
    public func remove(taskID: String) async throws {
        if let handle = engine.graph.handle(of: taskID), let record = engine.graph.record(handle) {
            guard record.parentID == nil else {
                throw ProgressionError.invalidState(taskID: taskID, status: record.status, action: "remove a subtask of")
            }
            guard record.status.isFinished else {
                throw ProgressionError.invalidState(taskID: taskID, status: record.status, action: "remove")
            }
            await runs[handle]?.task?.value
            try await engine.graph.waitForCommit()
            engine.graph.removeRoot(handle)
            runs[handle] = nil
        } else {
            guard let stored = try await store.task(id: taskID) else { throw ProgressionError.notFound(taskID: taskID) }
            guard stored.status.isFinished else {
                throw ProgressionError.invalidState(taskID: taskID, status: stored.status, action: "remove")
            }
        }
        let finished = Set(TaskStatus.allCases.filter(\.isFinished))
        guard try await store.deleteTree(of: taskID, ifStatusIn: finished) != nil else {
            let status = try await store.task(id: taskID)?.status ?? .pending
            throw ProgressionError.invalidState(taskID: taskID, status: status, action: "remove")
        }
    }

    /// Waits until everything reported so far is committed.
    public func flush() async throws {
        try await engine.graph.waitForCommit()
    }

    /// The snapshot of a task (root or subtask) in memory, or `nil`.
    public func snapshot(of taskID: String) -> TaskSnapshot? {
        engine.graph.handle(of: taskID).flatMap { engine.graph.snapshot(of: $0) }
    }

    /// Every task in memory, now.
    public func graph() -> TaskGraph {
        engine.graph.snapshot()
    }

    /// Waits for a root's code to end (the current run; an automatic retry is part of it).
    public func waitForTask(_ taskID: String) async {
        guard let handle = engine.graph.handle(of: taskID) else { return }
        await runs[handle]?.task?.value
    }

    func node(_ taskID: String) throws -> (NodeHandle, TaskRecord) {
        guard let handle = engine.graph.handle(of: taskID), let record = engine.graph.record(handle) else {
            throw ProgressionError.notFound(taskID: taskID)
        }
        return (handle, record)
    }
}
