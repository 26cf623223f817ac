import Foundation
import Logging
import ProgressionSQLite

/// The one writer of an executor. It runs on a serial executor of its own (a dispatch queue), so that task code that
/// reports in a tight loop, keeping every thread of Swift's cooperative pool busy, cannot starve it: the store keeps
/// up within the write window.
actor StoreWriter {
    private let engine: ExecutionEngine
    private let queue = DispatchSerialExecutor(label: "progression.writer")

    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }

    init(engine: ExecutionEngine) {
        self.engine = engine
    }

    /// Waits for changes, lets them gather for the batching window (skipped when someone waits for a commit), and
    /// stores every dirty node's latest state with the queued events in one transaction; one batch per window.
    /// Returns when the graph closes, after storing what is left.
    func run() async {
        let graph = engine.graph
        let window = engine.configuration.writeWindow
        let sampleInterval = engine.configuration.progressSampleInterval.seconds
        var failures = 0
        for await _ in graph.writerSignals {
            await graph.batchingWindow(window)
            guard let (batch, sequence) = graph.takeBatch(
                now: ExecutionEngine.now(), sampleInterval: sampleInterval, owner: engine.ownerID)
            else { continue }
            if await write(batch, upTo: sequence) {
                failures = 0
            } else {
                // Queued again by `failed`; back off, then the loop takes it again.
                failures += 1
                try? await Task.sleep(for: .milliseconds(min(1000, 50 * failures)))
                graph.wakeWriter(urgent: false)
            }
            if graph.pendingWork { graph.wakeWriter(urgent: false) }
        }
        // Closing: store what is left.
        while let (batch, sequence) = graph.takeBatch(
            now: ExecutionEngine.now(), sampleInterval: sampleInterval, owner: engine.ownerID)
        {
            guard await write(batch, upTo: sequence) else { break }
        }
    }

    /// Stores one batch; on failure its content is queued again and its waiters learn the error.
    private func write(_ batch: TaskBatch, upTo sequence: Int64) async -> Bool {
        do {
            let result = try await engine.store.apply(batch)
            // Conflicts first, so that who waits for the commit sees them when woken.
            let children = result.conflictingTaskIDs.isEmpty ? [] : engine.graph.insertsConflicted(result.conflictingTaskIDs)
            engine.graph.committed(upTo: sequence)
            if !result.rejectedTaskIDs.isEmpty || !children.isEmpty {
                engine.leaseLost(result.rejectedTaskIDs + children)
            }
            return true
        } catch {
            let tasks = batch.records.count + batch.updates.count + batch.progress.count
            engine.configuration.logger.warning(
                "write failed; retrying", metadata: ["error": "\(error)", "tasks": "\(tasks)"])
            engine.graph.failed(batch, error: error)
            return false
        }
    }
}

extension ExecutionEngine {
    /// Another owner holds these tasks now: stop their code here without writing anything more for them.
    func leaseLost(_ ids: [String]) {
        configuration.logger.warning("lost tasks to another owner; stopping them here", metadata: ["tasks": "\(ids)"])
        for id in ids {
            guard let handle = graph.handle(of: id) else { continue }
            graph.requestStop(handle, .leaseLost)?()
        }
    }

    /// Publishes the graph when it changed, at most once per publish interval.
    func runPublisher(_ publisher: GraphPublisher) async {
        for await _ in graph.publisherSignals {
            if let snapshot = graph.snapshotIfChanged() { publisher.publish(snapshot) }
            try? await Task.sleep(for: configuration.publishInterval)
        }
        publisher.publish(graph.snapshot())
        publisher.finish()
    }
}
