import Progression

/// Latency of single calls, on the SQLite store: `report()` (timed one by one: it must never wait for the disk), and a
/// `push` of an empty child, which returns only after its start and its completion are committed.
///
/// The in-memory store's push latency is given beside it: the difference is what durability costs a transition.
enum ReportLatency {
    static let scenario = Scenario(
        name: "latency",
        keys: [
            "report_p50_ns", "report_p99_ns", "report_max_us", "push_p50_us", "push_p99_us", "memory_push_p50_us",
            "memory_push_p99_us",
        ]
    ) { context in
        let sizes = context.sizes
        let reports = try await reportLatencies(count: sizes.latencyReports)
        let pushes = try await pushLatencies(.sqlite, count: sizes.latencyPushes)
        let memoryPushes = try await pushLatencies(.memory, count: sizes.latencyPushes)
        let reportCount = FigureFormat.number(Double(reports.count))
        return [
            Figure(
                "report_p50_ns", Measurement.percentile(sorted: reports, 0.5), unit: "ns",
                note: "report(.progress) on the SQLite store, \(reportCount) calls timed one by one"),
            Figure("report_p99_ns", Measurement.percentile(sorted: reports, 0.99), unit: "ns", note: "same calls"),
            Figure("report_max_us", (reports.last ?? .nan) / 1e3, unit: "µs", note: "slowest of the same calls"),
            Figure(
                "push_p50_us", Measurement.percentile(sorted: pushes, 0.5), unit: "µs",
                note: "push of an empty child on the SQLite store: start + completion committed, \(pushes.count) pushes"),
            Figure("push_p99_us", Measurement.percentile(sorted: pushes, 0.99), unit: "µs", note: "same pushes"),
            Figure(
                "memory_push_p50_us", Measurement.percentile(sorted: memoryPushes, 0.5), unit: "µs",
                note: "the same pushes on the in-memory store (baseline)"),
            Figure(
                "memory_push_p99_us", Measurement.percentile(sorted: memoryPushes, 0.99), unit: "µs",
                note: "same, in-memory"),
        ]
    }

    /// Nanoseconds of each of `count` reports of one task, sorted.
    static func reportLatencies(count: Int) async throws -> [Double] {
        try await withTask(.sqlite) { context in
            var samples = [Double](repeating: 0, count: count)
            let clock = ContinuousClock()
            let total = Double(count)
            for index in 0..<count {
                let start = clock.now
                try await context.report(.progress(Double(index + 1) / total))
                samples[index] = (clock.now - start).inNanoseconds
            }
            return samples
        }.sorted()
    }

    /// Microseconds of each of `count` pushes of an empty child, sorted.
    static func pushLatencies(_ kind: StoreKind, count: Int) async throws -> [Double] {
        try await withTask(kind) { context in
            var samples = [Double](repeating: 0, count: count)
            let clock = ContinuousClock()
            for index in 0..<count {
                let start = clock.now
                try await context.push("step") { _ in }
                samples[index] = (clock.now - start).inNanoseconds / 1e3
            }
            return samples
        }.sorted()
    }

    /// Runs `body` as the code of one root on a fresh executor and store, and returns what it returned.
    private static func withTask(
        _ kind: StoreKind, _ body: @escaping @Sendable (any TaskContext) async throws -> [Double]
    ) async throws -> [Double] {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let opened = try kind.makeStore(in: scratch)
        let executor = try TaskExecutor(store: opened.store)
        let output = SharedValue<Result<[Double], any Error>?>(nil)
        let id = try await executor.addTask(name: "latency") { context in
            do {
                let samples = try await body(context)
                output.value = .success(samples)
            } catch {
                output.value = .failure(error)
                throw error
            }
        }
        await executor.waitForTask(id)
        await executor.shutdown()
        await opened.close()
        guard let result = output.value else { throw BenchFailure("the latency task did not run") }
        return try result.get()
    }
}
