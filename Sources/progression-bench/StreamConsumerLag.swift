import Progression

/// The one-task report scenario (SQLite store) with one slow consumer of the progress stream, which takes 100 ms
/// per graph. The stream must coalesce: when the executor has shut down, the consumer finds at most one graph still
/// buffered, however many were published while it slept. Also reports the report rate with the consumer attached.
enum StreamConsumerLag {
    static let scenario = Scenario(
        name: "stream",
        keys: ["stream_consumer_lag", "reports_per_s_1task_slow_consumer", "stream_graphs_received"]
    ) { context in
        let reports = context.sizes.reportsOneTask
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let opened = try StoreKind.sqlite.makeStore(in: scratch)
        let executor = try TaskExecutor(store: opened.store)
        let producerDone = Flag()
        let stream = executor.progressStream
        let consumer = Task { () -> (received: Int, bufferedAtEnd: Int) in
            var received = 0
            var bufferedAtEnd = 0
            for await _ in stream {
                received += 1
                if producerDone.isSet {
                    bufferedAtEnd += 1
                } else {
                    try? await Task.sleep(for: .milliseconds(100))
                }
            }
            return (received, bufferedAtEnd)
        }
        let start = Latch(count: 1)
        let id = try await executor.addTask(name: "reporter") { context in
            await start.wait()
            let total = Double(reports)
            for report in 1...reports {
                try await context.report(.progress(Double(report) / total))
            }
        }
        let begin = ContinuousClock.now
        start.arrive()
        await executor.waitForTask(id)
        try await executor.flush()
        let elapsed = ContinuousClock.now - begin
        try await ReportThroughput.verify(executor, store: opened.store, ids: [id])
        await executor.shutdown()
        producerDone.set()
        let outcome = await consumer.value
        await opened.close()
        let rate = Double(reports) / elapsed.inSeconds
        context.log(
            "slow consumer: \(outcome.received) graphs received, \(outcome.bufferedAtEnd) buffered at the end, "
                + "\(FigureFormat.number(rate)) reports/s")
        return [
            Figure(
                "stream_consumer_lag", Double(outcome.bufferedAtEnd), unit: "graphs", target: .atMost(1),
                note: "graphs still buffered for a 100 ms/graph consumer after shutdown", allowsZero: true),
            Figure(
                "stream_graphs_received", Double(outcome.received), unit: "graphs",
                note: "graphs the slow consumer received in all"),
            Figure(
                "reports_per_s_1task_slow_consumer", rate, unit: "reports/s",
                note: "1 task × \(FigureFormat.number(Double(reports))) reports with the slow consumer (one run)"),
        ]
    }
}
