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
        var result = await ServiceContext.withValue(span.context) {
            await execute(child, taskID: record?.id ?? "", body)
        }
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
        let outcome = try locked { state throws(ProgressionError) in
            try state.report(handle, progress, now: now)
        }
        if outcome.wakeWriter { wakeWriter(urgent: false) }
        return outcome
    }

    /// Stores a checkpoint; returns once it is committed.
    func checkpoint(_ handle: NodeHandle, data: Data) async throws {
        let now = now()
        let sequence = locked { $0.checkpoint(handle, data: data, now: now) }
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
            return try state.sleep(node, until: wake.roundedUpToMilliseconds, name: name, now: now)
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
                let continuation = locked { $0.cancelPauseWait(handle, token: token) }
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
