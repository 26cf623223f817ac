import Foundation
import Synchronization

/// Runs task code: the attempts of a root, the children pushed by a context, timeouts, and what each outcome means
/// for the task's state. Shared by the executor and every context, so that reports and pushes need no actor hop.
final class ExecutionEngine: Sendable {
    let graph: ExecutionGraph
    let store: any TaskStore
    let ownerID: String
    let configuration: TaskExecutor.Configuration

    init(store: any TaskStore, ownerID: String, configuration: TaskExecutor.Configuration) {
        self.store = store
        self.ownerID = ownerID
        self.configuration = configuration
        graph = ExecutionGraph(
            eventBacklogLimit: configuration.eventBacklogLimit,
            writerLagTolerance: max(0.01, configuration.writeWindow.seconds * 2.5))
    }

    static func now() -> Date { Date.currentMillisecond() }

    /// Waits until the changes up to `sequence` are committed (and so shown on the progress stream).
    func commit(_ sequence: Int64?) async throws {
        guard let sequence else { return }
        try await graph.waitForCommit(sequence)
    }

    // MARK: Roots

    /// Runs a root's attempts until it completes, fails for good, is cancelled, or is stopped by a shutdown.
    func runRoot(_ handle: NodeHandle, body: @escaping @Sendable (any TaskContext) async throws -> Void) async {
        while true {
            do {
                try await graph.waitWhilePaused(handle)
                try Task.checkCancellation()
            } catch {
                await finishUnstarted(handle)
                return
            }
            do {
                try await begin(handle, waitForCommit: true)
            } catch {
                return  // the store refused the start (shut down, or the task is held by another owner)
            }
            let result = await execute(handle) { context in try await body(context) }
            guard let delay = await finish(handle, result.map { nil }) else { return }
            // An automatic retry: wait for the backoff (cancellable), then run again.
            do {
                try await Task.sleep(for: delay)
                try await graph.waitWhilePaused(handle)
                try Task.checkCancellation()
            } catch {
                await finishUnstarted(handle)
                return
            }
            let sequence = graph.transition(handle, event: .retried, now: Self.now()) { node in
                node.record.attempt += 1
                node.record.nextAttemptAt = nil
            }
            graph.resetForNewAttempt(handle)
            try? await commit(sequence)
        }
    }

    /// A root stopped before its code ran (cancelled while paused or waiting for a retry, or shut down).
    private func finishUnstarted(_ handle: NodeHandle) async {
        let reason = graph.stopReason(handle)
        if case .shutdown = reason { return }
        if case .leaseLost = reason { return }
        let sequence = graph.transition(handle, event: .cancelled, now: Self.now()) { node in
            node.record.status = .cancelled
            node.record.finishedAt = Self.now()
            node.record.nextAttemptAt = nil
        }
        try? await commit(sequence)
    }

    /// pending/paused → running.
    ///
    /// A root's start is committed before its code runs: a process that dies while running it must leave it
    /// `running`, or recovery could not count the interruption (and a job that kills its process would loop
    /// forever). A subtask's start is committed with the writer's next batch, before its completion (written after
    /// it), and shown on the progress stream only then: nobody waits for it, so a step costs one commit round trip
    /// (its end) instead of two.
    func begin(_ handle: NodeHandle, waitForCommit: Bool) async throws {
        graph.clearStop(handle)
        let now = Self.now()
        let sequence = graph.transition(handle, event: .started, now: now) { node in
            node.record.status = node.isPaused ? .paused : .running
            node.record.startedAt = now
            node.record.finishedAt = nil
            node.record.errorType = nil
            node.record.errorDescription = nil
            node.record.nextAttemptAt = nil
            node.record.ownerID = node.record.ownerID ?? self.ownerID
        }
        guard sequence != nil else { throw ProgressionError.notFound(taskID: "#\(handle)") }
        if waitForCommit { try await commit(sequence) }
    }

    /// Runs a node's code in a Swift task of its own (so that the node can be cancelled by id), cancelled with its
    /// caller, under the node's timeout.
    func execute<T: Sendable>(
        _ handle: NodeHandle, _ body: @escaping @Sendable (any TaskContext) async throws -> T
    ) async -> Result<T, any Error> {
        let context = LiveTaskContext(handle: handle, taskID: graph.record(handle)?.id ?? "", engine: self)
        let work = Task { try await body(context) }
        graph.setExecuting(handle, true, cancel: { work.cancel() })
        let timeout = graph.record(handle)?.options.timeout
        let watchdog = timeout.map { startWatchdog(handle, timeout: $0) }
        // If the stop came before the cancel handle was set, apply it now.
        if graph.stopReason(handle) != nil { work.cancel() }
        let result = await withTaskCancellationHandler {
            await work.result
        } onCancel: {
            work.cancel()
        }
        watchdog?.cancel()
        graph.setExecuting(handle, false, cancel: nil)
        return result
    }

    /// Cancels a node's code when it has run `timeout` (paused time not counted).
    private func startWatchdog(_ handle: NodeHandle, timeout: Duration) -> Task<Void, Never> {
        Task.detached { [graph] in
            while !Task.isCancelled {
                guard let active = graph.activeTime(handle) else { return }
                let remaining = timeout - active
                if remaining <= .zero {
                    graph.requestStop(handle, .timedOut(timeout))?()
                    return
                }
                do { try await Task.sleep(for: remaining) } catch { return }
            }
        }
    }

    /// Records how a run ended. Returns the delay before an automatic retry, or `nil` when the task is done.
    /// `result` holds, on success, the step result to store.
    func finish(_ handle: NodeHandle, _ result: Result<Data?, any Error>) async -> Duration? {
        let now = Self.now()
        let reason = graph.stopReason(handle)
        var retryDelay: Duration?
        var sequence: Int64?
        switch (result, reason) {
        case (_, .leaseLost?):
            return nil
        case (.failure, .shutdown?):
            // Left resumable: the next start runs it again.
            sequence = graph.transition(handle, event: .interrupted, message: "executor shut down", now: now) { node in
                node.record.status = .pending
                node.record.ownerID = nil
            }
        case (.success(let data), _):
            sequence = graph.transition(handle, event: .completed, now: now) { node in
                node.record.status = .completed
                node.record.finishedAt = now
                node.record.result = data
            }
        case (.failure, .timedOut(let timeout)?):
            let error = TaskTimeoutError(timeout: timeout)
            (sequence, retryDelay) = failOrRetry(handle, error: error, now: now)
        case (.failure(let error), _) where Self.isCancellation(error) || reason != nil:
            sequence = graph.transition(handle, event: .cancelled, now: now) { node in
                node.record.status = .cancelled
                node.record.finishedAt = now
            }
        case (.failure(let error), _):
            (sequence, retryDelay) = failOrRetry(handle, error: error, now: now)
        }
        try? await commit(sequence)
        return retryDelay
    }

    private func failTransition(_ handle: NodeHandle, error: any Error, now: Date) -> Int64? {
        let description = ProgressionError.describe(error)
        let type = String(reflecting: Swift.type(of: error))
        return graph.transition(handle, event: .failed, message: description, errorType: type, now: now) { node in
            node.record.status = .failed
            node.record.finishedAt = now
            node.record.errorType = type
            node.record.errorDescription = description
        }
    }

    /// Fails the task, or (its retry policy allowing) puts it back to `pending` until its next attempt.
    private func failOrRetry(_ handle: NodeHandle, error: any Error, now: Date) -> (Int64?, Duration?) {
        guard let record = graph.record(handle), let policy = record.options.retryPolicy, record.parentID == nil,
            policy.allowsRetry(after: error, attempt: record.attempt)
        else {
            return (failTransition(handle, error: error, now: now), nil)
        }
        let delay = policy.delay(afterAttempt: record.attempt, random: Double.random(in: 0..<1))
        let description = ProgressionError.describe(error)
        let type = String(reflecting: Swift.type(of: error))
        let next = now.addingTimeInterval(delay.seconds).roundedToMilliseconds
        let sequence = graph.transition(handle, event: .failed, message: description, errorType: type, now: now) {
            node in
            node.record.status = node.isPaused ? .paused : .pending
            node.record.errorType = type
            node.record.errorDescription = description
            node.record.nextAttemptAt = next
        }
        return (sequence, delay)
    }

    static func isCancellation(_ error: any Error) -> Bool {
        if error is CancellationError { return true }
        if case ProgressionError.cancelled = error { return true }
        return false
    }

    // MARK: Children

    /// How a step's result is stored, so that a completed step can be skipped when its parent runs again.
    struct ResultCodec<T>: Sendable {
        let encode: @Sendable (T) throws -> Data
        let decode: @Sendable (Data) throws -> T
    }

    /// Runs the child `name` of `parent`, or returns its stored result when it completed in an earlier run.
    func push<T: Sendable>(
        parent: NodeHandle, name: String, weight: Double, options: TaskOptions?, codec: ResultCodec<T>?,
        body: @escaping @Sendable (any TaskContext) async throws -> T
    ) async throws -> T {
        try Task.checkCancellation()
        guard weight.isFinite, weight > 0 else {
            throw ProgressionError.invalidProgressValue("weight \(weight) of '\(name)' must be a positive number")
        }
        try await graph.waitWhilePaused(parent)
        try Task.checkCancellation()
        let start = try graph.startChild(
            of: parent, name: name, weight: weight, options: options, id: { TaskIdentifier.make() }, now: Self.now(),
            canSkip: codec != nil)
        let child: NodeHandle
        switch start {
        case .completed(let handle, let data):
            if let codec, let data, let value = try? codec.decode(data) {
                graph.publishSoon()
                return value
            }
            // The stored result no longer decodes as the step's type: run the step again.
            graph.restartChild(handle)
            child = handle
        case .run(let handle):
            child = handle
        }
        try await begin(child, waitForCommit: false)
        var result = await execute(child, body)
        var data: Data?
        if case .success(let value) = result, let codec {
            do { data = try codec.encode(value) } catch { result = .failure(error) }
        }
        _ = await finish(child, result.map { _ in data })
        switch result {
        case .success(let value):
            return value
        case .failure(let error):
            // The parent itself is being cancelled: cancellation goes on up as it is.
            if Task.isCancelled { throw CancellationError() }
            if case .timedOut(let timeout)? = graph.stopReason(child) {
                throw ProgressionError.subtaskFailed(name: name, underlying: TaskTimeoutError(timeout: timeout))
            }
            if case ProgressionError.subtaskFailed = error { throw error }
            throw ProgressionError.subtaskFailed(
                name: name, underlying: Self.isCancellation(error) ? ProgressionError.cancelled : error)
        }
    }

    // MARK: Checkpoints

    func checkpoint(_ handle: NodeHandle, data: Data) async throws {
        let sequence = graph.transition(handle, event: .checkpointed, message: "\(data.count) bytes", now: Self.now()) {
            node in
            node.record.checkpoint = data
        }
        try await commit(sequence)
    }
}
