import Foundation

extension ExecutionEngine {
    /// The one writer: waits for changes, lets them gather for the batching window (skipped when someone waits for a
    /// commit), and stores every dirty node's latest state with the queued events in one transaction. Returns when
    /// the graph closes.
    func runWriter() async {
        let window = configuration.writeWindow
        let sampleInterval = configuration.progressSampleInterval.seconds
        for await _ in graph.writerSignals {
            await graph.batchingWindow(window)
            await writePending(sampleInterval: sampleInterval)
        }
        // Closing: store what is left.
        await writePending(sampleInterval: sampleInterval)
    }

    /// Writes batches until nothing is left. A failed batch is queued again (and its waiters learn the error) after a
    /// pause, so that a transient fault (a busy database) does not lose writes.
    func writePending(sampleInterval: TimeInterval) async {
        var failures = 0
        while let (batch, sequence) = graph.takeBatch(now: Self.now(), sampleInterval: sampleInterval, owner: ownerID) {
            do {
                let result = try await store.apply(batch)
                graph.committed(upTo: sequence)
                failures = 0
                if !result.rejectedTaskIDs.isEmpty { leaseLost(result.rejectedTaskIDs) }
            } catch {
                graph.failed(batch, error: error)
                failures += 1
                if failures > 3 { return }  // retried at the next wake
                try? await Task.sleep(for: .milliseconds(50 * failures))
            }
        }
    }

    /// Another owner holds these tasks now: stop their code here without writing anything more for them.
    func leaseLost(_ ids: [String]) {
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
