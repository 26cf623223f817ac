import Foundation
import Logging
import Synchronization

/// What task code receives: report progress, push subtasks, record checkpoints.
///
/// ```swift
/// try await executor.addTask(name: "Import") { context in
///     try await context.report(.named("Reading"))
///     let rows = try await context.push("Parse", weight: 3) { parse in
///         try await parse.report(.progress(0.5))
///         return 42
///     }
///     try await context.report(.step(2, of: 2))
/// }
/// ```
///
/// Every call checks for cancellation (throwing `CancellationError`) and suspends while the task or one of its
/// ancestors is paused.
public protocol TaskContext: AnyObject, Sendable {
    /// The id of the task this context reports for.
    var taskID: String { get }

    /// A logger for the task's code: the executor's (``TaskExecutor/Configuration/logger``) with the task's id, root,
    /// kind and attempt as metadata (`task.id`, `task.root`, `task.kind`, `task.attempt`).
    var logger: Logger { get }

    /// Reports progress: a step name, a fraction, step *n* of *m*. Updates memory at once; the store follows within
    /// the writer's window.
    ///
    /// - Throws: `CancellationError` when the task was cancelled; ``ProgressionError/invalidProgressValue(_:)`` for a
    ///   value out of range (nothing changes then).
    func report(_ progress: TaskProgress) async throws

    /// Runs a subtask that returns nothing. Its completion is committed before `push` returns; when the parent runs
    /// again (after a crash, or a retry), a completed subtask of the same name and occurrence is not run again.
    ///
    /// - Parameters:
    ///   - name: the subtask's name: with the number of earlier siblings of that name, its identity under the parent
    ///     (give concurrent subtasks distinct names, such as the file each one reads).
    ///   - weight: the subtask's share of the parent's progress: units of the parent's declared total (`.total(_:)`),
    ///     else relative to the siblings pushed in the same step (<doc:ProgressRule>).
    ///   - options: the subtask's own options (a timeout, say); by default the parent's cancel, pause and retry
    ///     rights, without its timeout (which covers the subtree already) or automatic retries.
    ///   - step: the subtask's code.
    /// - Throws: ``ProgressionError/subtaskFailed(name:underlying:)`` when the subtask fails or is cancelled on its
    ///   own; `CancellationError` when the parent is cancelled.
    func push(
        _ name: String, weight: Double, options: TaskOptions?,
        _ step: @escaping @Sendable (any TaskContext) async throws -> Void
    ) async throws

    /// Runs a subtask and returns its value.
    ///
    /// When the value's type is `Codable` (`T` itself, checked when the subtask runs, so generic code whose `T` is only
    /// `Sendable` behaves the same), the value is stored with the subtask's completion and, when the parent runs
    /// again, a completed subtask returns its stored value without running. A value of another type cannot be stored:
    /// that subtask runs again whenever its parent does. A `Codable` value that cannot be encoded (a `Double.nan`, say)
    /// fails the subtask with the encoder's error.
    func push<T: Sendable>(
        _ name: String, weight: Double, options: TaskOptions?,
        _ step: @escaping @Sendable (any TaskContext) async throws -> T
    ) async throws -> T

    /// Stores a checkpoint durably: returns once it is committed. A later run of the task reads it back with
    /// ``lastCheckpoint(as:)``.
    func checkpoint<T: Encodable & Sendable>(_ value: T) async throws

    /// The last checkpoint stored for this task, or `nil`.
    ///
    /// - Throws: `DecodingError` when the stored checkpoint is not a `T`.
    func lastCheckpoint<T: Decodable>(as type: T.Type) throws -> T?

    /// Sleeps durably until `deadline`: the job gives its slot back (other jobs run in it) and is stored as
    /// *sleeping*, pending with that wake time and no owner; at the wake time any worker that registered its kind
    /// runs its code again — steps that completed are skipped, checkpoints are read back — and this call, reached
    /// again, returns. It survives a restart or a crash of the worker, and the job can be paused, cancelled or run now
    /// meanwhile (`progressctl`). A deadline that has passed returns at once.
    ///
    /// Each call is a step named `name` (its occurrence under the task counts, as for `push`), so code that sleeps in
    /// a loop sleeps once per iteration.
    ///
    /// - Throws: `CancellationError` when the job stops to sleep — let it propagate (code after the call runs when
    ///   the job continues) — or is cancelled; ``ProgressionError/notResumable(taskID:reason:)`` in a closure task
    ///   (only a job's code can run again elsewhere).
    func sleep(until deadline: Date, name: String) async throws

    /// Sleeps durably for `duration` from now, on the executor's clock; see ``sleep(until:name:)``. When the job
    /// continues after a restart, the wake time is the one first stored, not a new `duration` from then.
    ///
    /// - Throws: as ``sleep(until:name:)``; ``ProgressionError/invalidArgument(_:)`` for a duration that cannot be
    ///   stored.
    func sleep(for duration: Duration, name: String) async throws

    /// Starts child jobs (the untyped form of ``startChildren(_:inputs:options:)``, which see): each a job of its own
    /// that any worker claims, standing in this task's tree for its progress. Returns them in the order of
    /// `requests`, once committed; a parent that runs again gets the same ones back.
    func startChildJobs(_ requests: [ChildJobRequest]) async throws -> [ChildJobReference]

    /// Waits durably for child jobs of this job (the untyped form of ``wait(for:)`` and ``completions(of:)``): until
    /// every one has finished (`all`), or at least one. Returns how those that finished ended.
    ///
    /// - Throws: `CancellationError` when the job stops to wait (let it through); ``ProgressionError/notAChildJob(taskID:jobID:)``.
    func awaitChildJobs(_ ids: [String], all: Bool) async throws -> [ChildJobOutcome]

    /// Waits durably for a signal (the untyped form of ``signal(_:as:timeout:)``); returns its payload (JSON).
    func waitForSignal(_ name: String, timeout: Duration?) async throws -> Data?
}

extension TaskContext {
    /// Sleeps durably until `deadline` (a step named `sleep`); see ``sleep(until:name:)``.
    public func sleep(until deadline: Date) async throws {
        try await sleep(until: deadline, name: "sleep")
    }

    /// Sleeps durably for `duration` from now (a step named `sleep`); see ``sleep(for:name:)``.
    public func sleep(for duration: Duration) async throws {
        try await sleep(for: duration, name: "sleep")
    }

    /// Durable sleep is the executor's: a context of another kind cannot sleep durably.
    public func sleep(until deadline: Date, name: String) async throws {
        throw ProgressionError.notResumable(taskID: taskID, reason: "this context cannot store a wake time")
    }

    /// Durable sleep is the executor's: a context of another kind cannot sleep durably.
    public func sleep(for duration: Duration, name: String) async throws {
        throw ProgressionError.notResumable(taskID: taskID, reason: "this context cannot store a wake time")
    }

    /// Runs a subtask that returns nothing, with weight 1 and the parent's options.
    public func push(_ name: String, _ step: @escaping @Sendable (any TaskContext) async throws -> Void) async throws {
        try await push(name, weight: 1, options: nil, step)
    }

    /// Runs a subtask that returns nothing, with the parent's options.
    public func push(
        _ name: String, weight: Double, _ step: @escaping @Sendable (any TaskContext) async throws -> Void
    ) async throws {
        try await push(name, weight: weight, options: nil, step)
    }

    /// Runs a subtask and returns its value (stored when it is `Codable`), with weight 1 and the parent's options.
    public func push<T: Sendable>(
        _ name: String, _ step: @escaping @Sendable (any TaskContext) async throws -> T
    ) async throws -> T {
        try await push(name, weight: 1, options: nil, step)
    }

    /// Runs a subtask and returns its value (stored when it is `Codable`), with the parent's options.
    public func push<T: Sendable>(
        _ name: String, weight: Double, _ step: @escaping @Sendable (any TaskContext) async throws -> T
    ) async throws -> T {
        try await push(name, weight: weight, options: nil, step)
    }
}

/// The context the executor gives to task code.
final class LiveTaskContext: TaskContext {
    let handle: NodeHandle
    let taskID: String
    let engine: ExecutionEngine

    init(handle: NodeHandle, taskID: String, engine: ExecutionEngine) {
        self.handle = handle
        self.taskID = taskID
        self.engine = engine
    }

    var logger: Logger {
        var logger = engine.logger
        let record = engine.locked { $0.nodes[handle]?.record }
        logger[metadataKey: "task.id"] = .string(taskID)
        if let record {
            logger[metadataKey: "task.root"] = .string(record.rootID)
            logger[metadataKey: "task.kind"] = .string(record.kind ?? engine.rootKind(of: record) ?? "closure")
            logger[metadataKey: "task.attempt"] = .string(String(record.attempt))
        }
        return logger
    }

    func report(_ progress: TaskProgress) async throws {
        try Task.checkCancellation()
        try progress.validate()
        let outcome = try engine.report(handle, progress)
        if outcome.paused {
            try await engine.waitWhilePaused(handle)
            try Task.checkCancellation()
        }
        if outcome.backlogged {
            try await engine.flush()
        } else if outcome.writerBehind {
            await Task.yield()
        }
    }

    func push(
        _ name: String, weight: Double, options: TaskOptions?,
        _ step: @escaping @Sendable (any TaskContext) async throws -> Void
    ) async throws {
        let codec = ExecutionEngine.ResultCodec<Void>(encode: { _ in Data("null".utf8) }, decode: { _ in () })
        try await engine.push(parent: handle, name: name, weight: weight, options: options, codec: codec, body: step)
    }

    func push<T: Sendable>(
        _ name: String, weight: Double, options: TaskOptions?,
        _ step: @escaping @Sendable (any TaskContext) async throws -> T
    ) async throws -> T {
        try await engine.push(
            parent: handle, name: name, weight: weight, options: options, codec: .json(T.self), body: step)
    }

    func checkpoint<T: Encodable & Sendable>(_ value: T) async throws {
        try Task.checkCancellation()
        try await engine.waitWhilePaused(handle)
        let data = try JobCoding.encoder.encode(value)
        try await engine.checkpoint(handle, data: data)
    }

    func sleep(until deadline: Date, name: String) async throws {
        try await engine.sleep(handle, until: deadline, name: name)
    }

    func sleep(for duration: Duration, name: String) async throws {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        let now = engine.now()
        guard seconds.isFinite, seconds >= 0, seconds < JobOptions.latestRunAt.timeIntervalSince(now) else {
            throw ProgressionError.invalidArgument("a sleep of \(duration) cannot be stored")
        }
        try await engine.sleep(handle, until: now.addingTimeInterval(seconds), name: name)
    }

    func lastCheckpoint<T: Decodable>(as type: T.Type) throws -> T? {
        guard let data = engine.locked({ $0.nodes[handle]?.record.checkpoint }) else { return nil }
        return try JobCoding.decoder.decode(T.self, from: data)
    }

    func startChildJobs(_ requests: [ChildJobRequest]) async throws -> [ChildJobReference] {
        try await engine.startChildJobs(handle, requests)
    }

    func awaitChildJobs(_ ids: [String], all: Bool) async throws -> [ChildJobOutcome] {
        try await engine.awaitChildJobs(handle, ids, all: all)
    }

    func waitForSignal(_ name: String, timeout: Duration?) async throws -> Data? {
        try await engine.waitForSignal(handle, name, timeout: timeout)
    }
}
