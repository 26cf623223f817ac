import Foundation
import Synchronization
import Tracing

/// Subtasks, reports, checkpoints and pauses: what task code calls through its context.
extension ExecutionEngine {
    /// How a step's result is stored, so that a completed step can be skipped when its parent runs again.
    struct ResultCodec<T>: Sendable {
        let encode: @Sendable (T) throws -> Data
        let decode: @Sendable (Data) throws -> T

        /// JSON for a `T` that is `Codable`, found at run time (not by the caller's overload), so that a subtask's
        /// value is stored whether or not the code that pushed it knew its type was `Codable`; `nil` for any other `T`.
        static func json(_ type: T.Type) -> ResultCodec<T>? {
            guard type is any Codable.Type else { return nil }
            return ResultCodec(
                encode: { value in
                    // `T` conforms to `Codable`, so every `T` value is `Encodable`.
                    guard let encodable = value as? any Encodable else { throw ResultCodecError.notCodable }
                    return try JobCoding.encoder.encode(encodable)
                },
                decode: { data in
                    guard let codable = T.self as? any Codable.Type,
                        let value = try JobCoding.decoder.decode(codable, from: data) as? T
                    else {
                        throw ResultCodecError.notCodable
                    }
                    return value
                })
        }
    }

    /// A value that the codec of its type could not encode or decode as that type (cannot happen for a `Codable` `T`).
    enum ResultCodecError: Error { case notCodable }

    /// Runs the child `name` of `parent`, or returns its stored result when it completed in an earlier run. Returns
    /// (or throws) once the child's end is committed.
    func push<T: Sendable>(
        parent: NodeHandle, name: String, weight: Double, options: TaskOptions?, codec: ResultCodec<T>?,
        body: @escaping @Sendable (any TaskContext) async throws -> T
    ) async throws -> T {
        try Task.checkCancellation()
        guard weight.isFinite, weight > 0 else {
            throw ProgressionError.invalidProgressValue("weight \(weight) of '\(name)' must be a positive number")
        }
        try await waitWhilePaused(parent)
        try Task.checkCancellation()
        let pushedAt = now()
        // A completed step is skipped only when its stored result still decodes as the step's type.
        var accepts: (@Sendable (Data?) -> Bool)?
        if let codec {
            accepts = { data in
                guard let data else { return false }
                return (try? codec.decode(data)) != nil
            }
        }
        let start = try locked { state throws(ProgressionError) in
            try state.startChild(
                of: parent, name: name, weight: weight, options: options, now: pushedAt, accepts: accepts)
        }
        let child: NodeHandle
        switch start {
        case .completed(_, let data):
            if let codec, let data, let value = try? codec.decode(data) {
                publisherSignal.signal()
                return value
            }
            throw ProgressionError.invalidState(taskID: name, status: .completed, action: "read its stored result")
        case .run(let handle):
            child = handle
        }
        wakeWriter(urgent: false)
        let record = locked { $0.nodes[child]?.record }
        let span = tracer.startSpan(name, context: ServiceContext.current ?? .topLevel, ofKind: .internal)
        if let record { Self.describe(span, record) }
        var result = await ServiceContext.withValue(span.context) { await execute(child, isRoot: false, body) }
        var data: Data?
        if case .success(let value) = result, let codec {
            do { data = try codec.encode(value) } catch { result = .failure(error) }
        }
        let finished = now()
        let ended = locked { state in
            state.endChild(child, result.map { _ in data }, now: finished, configuration: configuration)
        }
        Self.end(span, result)
        if let sequence = ended.sequence { try await waitForCommit(sequence) }
        // Its end was not written: another owner holds its root now (fencing), and may run it again.
        try checkNotFenced(parent)
        switch result {
        case .success(let value):
            return value
        case .failure(let error):
            // The parent itself is being cancelled: cancellation goes on up as it is.
            if Task.isCancelled { throw CancellationError() }
            if let timedOut = ended.timedOut {
                throw ProgressionError.subtaskFailed(name: name, underlying: TaskTimeoutError(timeout: timedOut))
            }
            if case ProgressionError.subtaskFailed = error { throw error }
            throw ProgressionError.subtaskFailed(
                name: name, underlying: Self.isCancellation(error) ? ProgressionError.cancelled : error)
        }
    }

    /// Applies a validated report. Returns whether the task must wait (it or an ancestor is paused), whether too many
    /// events are queued, and whether the writer is behind.
    func report(_ handle: NodeHandle, _ progress: borrowing TaskProgress) throws(ProgressionError) -> ReportOutcome {
        let now = clock.date()
        let outcome = try state.withLock { state throws(ProgressionError) in
            try state.report(handle, progress, now: now)
        }
        if outcome.wakeWriter { wakeWriter(urgent: false) }
        return outcome
    }

    /// Stores a checkpoint; returns once it is committed.
    func checkpoint(_ handle: NodeHandle, data: Data) async throws {
        let now = now()
        let sequence = locked { state -> Int64? in
            guard let node = state.nodes[handle], !node.removed else { return nil }
            node.record.checkpoint = data
            node.record.updatedAt = now
            state.markDirty(node, [.checkpoint, .updatedAt])
            state.append(
                TaskEvent(
                    taskID: node.record.id, rootID: node.record.rootID, kind: .checkpointed, at: now,
                    attempt: node.record.attempt, progress: node.record.progress, message: "\(data.count) bytes"))
            return state.changeSequence
        }
        guard let sequence else { throw ProgressionError.notFound(taskID: "#\(handle)") }
        try await waitForCommit(sequence)
        try checkNotFenced(handle)
    }

    /// Throws `CancellationError` when another owner took the node's root (the store rejected this executor's writes
    /// for it): what was just "committed" for it was not, and its code is being stopped.
    func checkNotFenced(_ handle: NodeHandle) throws {
        if locked({ $0.nodes[handle]?.root.stopReason == .leaseLost }) { throw CancellationError() }
    }

    /// A durable sleep of a node's code until `wake`: the node gets a child named `name` that records the wake time,
    /// and the root stops and gives its slot back (it is stored pending, unowned, waiting for that time); at the wake
    /// time any worker claims it and runs its code again — completed steps are skipped, and this call, reached again,
    /// finds its child and returns. A sleep whose time has passed returns at once.
    ///
    /// - Throws: `CancellationError` when the root stops to sleep (the code must let it propagate) or is cancelled;
    ///   ``ProgressionError/notResumable(taskID:reason:)`` for a closure task.
    func sleep(_ handle: NodeHandle, until wake: Date, name: String) async throws {
        try Task.checkCancellation()
        try await waitWhilePaused(handle)
        try Task.checkCancellation()
        let now = now()
        let outcome = try locked { state throws(ProgressionError) -> SleepDecision in
            guard let node = state.nodes[handle], !node.removed else { throw .notFound(taskID: "#\(handle)") }
            return try state.sleep(node, until: wake.roundedToMilliseconds, name: name, now: now)
        }
        switch outcome {
        case .done(let sequence):
            if let sequence { try await waitForCommit(sequence) }
        case .sleep(let cancellation):
            cancellation.run()
            wakeWriter(urgent: true)
            throw CancellationError()
        }
    }

    /// Suspends while the node or an ancestor is paused. Cancelling the waiting task wakes it with
    /// `CancellationError`.
    func waitWhilePaused(_ handle: NodeHandle) async throws {
        while locked({ $0.nodes[handle]?.isEffectivelyPaused ?? false }) {
            let token = locked { $0.nextToken() }
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let immediate = locked { state in
                        state.waitWhilePaused(handle, token: token, continuation, cancelled: Task.isCancelled)
                    }
                    if let immediate { continuation.resume(with: immediate) }
                }
            } onCancel: {
                let continuation = locked { $0.nodes[handle]?.pauseWaiters.removeValue(forKey: token) }
                continuation?.resume(throwing: CancellationError())
            }
        }
    }
}

extension ExecutionEngine {
    /// What a durable sleep call does: return (its time has passed; the sequence of its step's completion to wait
    /// for), or stop the root (the cancellation to run).
    enum SleepDecision {
        case done(Int64?)
        case sleep(Cancellation)
    }
}

/// How a child starts.
enum ChildStart {
    /// A new child, or one whose earlier run did not complete: run its code (its start is staged).
    case run(NodeHandle)
    /// A child that completed in an earlier run: return its stored result without running it.
    case completed(NodeHandle, result: Data?)
}

/// What a report asks of the task code after it: wait (paused), wait for the writer (too many events queued), or
/// give the writer its thread (it is behind).
struct ReportOutcome: Sendable {
    var paused = false
    var backlogged = false
    var writerBehind = false
    var wakeWriter = false
}

extension GraphState {
    /// Finds (or creates) the sleep child `name` of `node` and decides: its time has passed (it completes), or the root
    /// stops until then.
    mutating func sleep(
        _ node: TaskNode, until wake: Date, name: String, now: Date
    ) throws(ProgressionError) -> ExecutionEngine.SleepDecision {
        let root = node.root
        guard root.record.kind != nil, root.body != nil else {
            throw .notResumable(
                taskID: root.record.id,
                reason: "it is a closure task, whose code no other process has; only a job (a registered kind) can "
                    + "sleep durably (use Task.sleep to wait in memory)")
        }
        let occurrence = node.nameCounts[name, default: 0]
        node.nameCounts[name] = occurrence + 1
        let child: TaskNode
        if let existing = node.childIndex[name]?[occurrence] {
            if existing.record.status == .completed { return .done(nil) }
            child = existing
        } else {
            let record = TaskRecord(
                id: TaskIdentifier.child(of: root.record.id, number: root.childCount + 1), parentID: node.record.id,
                rootID: root.record.id, name: name, occurrence: occurrence, options: node.record.options,
                status: .pending, step: "sleeping until \(wake.formatted(.iso8601))", priority: node.record.priority,
                createdAt: now, nextAttemptAt: wake)
            root.childCount += 1
            child = addChild(record, to: node)
            markDirty(child, .all)
        }
        let until = child.record.nextAttemptAt ?? now
        if until <= now {
            // Its time has come (or `run-now` ended it): the sleep step completes.
            _ = try? transition(child, .rerun, by: .system, now: now, silent: true)
            child.record.nextAttemptAt = nil
            child.record.step = nil
            markDirty(child, [.nextAttemptAt, .step])
            return .done(try transition(child, .complete(result: nil), by: .system, now: now))
        }
        return .sleep(ExecutionEngine.stop(root, .sleeping(until: until)))
    }

    /// Applies a validated report of a node's code: its step name (an event when it changes) and its amounts.
    mutating func report(
        _ handle: NodeHandle, _ progress: borrowing TaskProgress, now: Date
    ) throws(ProgressionError) -> ReportOutcome {
        guard let node = nodes[handle], !node.removed else { return ReportOutcome() }
        // The writer sleeps while nothing is dirty: wake it when this report makes the first change.
        let wasIdle = dirtyNodes.isEmpty && events.isEmpty
        if progress.fraction != nil || progress.total != nil || progress.completedUnits != nil {
            try applyReport(progress, to: node, now: now)
        }
        if let name = progress.name, name != node.record.step {
            node.record.step = name
            node.record.updatedAt = now
            markDirty(node, [.step, .updatedAt])
            append(
                TaskEvent(
                    taskID: node.record.id, rootID: node.record.rootID, kind: .step, at: now,
                    attempt: node.record.attempt, progress: node.record.progress, message: name))
        }
        return ReportOutcome(
            paused: node.isEffectivelyPaused, backlogged: events.count >= eventBacklogLimit, writerBehind:
                now.timeIntervalSince(lastBatchAt) > writerLagTolerance, wakeWriter: wasIdle)
    }

    /// Creates the child `name` of `parent`, or finds it again (same name and occurrence) when the parent runs again,
    /// and stages its start.
    mutating func startChild(
        of parentHandle: NodeHandle, name: String, weight: Double, options: TaskOptions?, now: Date,
        accepts: ((Data?) -> Bool)?
    ) throws(ProgressionError) -> ChildStart {
        guard let parent = nodes[parentHandle], !parent.removed else {
            throw ProgressionError.notFound(taskID: "#\(parentHandle)")
        }
        let occurrence = parent.nameCounts[name, default: 0]
        parent.nameCounts[name] = occurrence + 1
        if let existing = parent.childIndex[name]?[occurrence] {
            if existing.record.status == .completed, let accepts, accepts(existing.record.result) {
                join(existing, parent: parent, weight: weight, contribution: 1, now: now)
                bank(existing, completed: true, now: now)
                return .completed(existing.handle, result: existing.record.result)
            }
            join(existing, parent: parent, weight: weight, contribution: existing.record.progress ?? 0, now: now)
            return try restartChild(existing.handle, now: now)
        }
        // By default a child takes its parent's cancel, pause and retry rights; the parent's timeout already covers
        // the subtree, and automatic retries are for roots.
        var childOptions = options ?? parent.record.options.with { $0.timeout = nil }
        childOptions.retryPolicy = nil
        let root = parent.root
        root.childCount += 1
        let record = TaskRecord(
            id: TaskIdentifier.child(of: root.record.id, number: root.childCount), parentID: parent.record.id,
            rootID: root.record.id, name: name, occurrence: occurrence, options: childOptions, status: .pending,
            weight: weight, priority: parent.record.priority, createdAt: now)
        let node = addChild(record, to: parent)
        markDirty(node, .all)
        join(node, parent: parent, weight: weight, contribution: 0, now: now)
        try transition(node, .start, by: .system, now: now)
        return .run(node.handle)
    }

    /// Runs a known child again (it did not complete, or its stored result cannot be used): same identity, a new
    /// attempt once it had started, its own completed children found again when it pushes them.
    private mutating func restartChild(_ handle: NodeHandle, now: Date) throws(ProgressionError) -> ChildStart {
        guard let node = nodes[handle] else { throw ProgressionError.notFound(taskID: "#\(handle)") }
        try transition(node, .rerun, by: .system, now: now)
        prepareRun(node)
        return .run(handle)
    }
}
