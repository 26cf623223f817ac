import Foundation
import Progression

/// The latency of one job (issue 38): a producer enqueues one job with a ``JobClient`` and waits for its result
/// (`result(of:as:)`), one at a time, while a worker executor on its own connection to the same database runs it —
/// the web process that enqueues a job and waits for the answer. Both in this process, each with a store connection
/// of its own, as two processes have (on SQLite, two instances of `SQLiteTaskStore` on one file). From the submit's
/// call to the result's return, after 20 jobs of warm-up; p50 and p99.
enum JobLatency {
    static func keys(_ suffix: String) -> [String] {
        ["job_latency_p50_ms" + suffix, "job_latency_p99_ms" + suffix]
    }

    static let scenario = Scenario(name: "job-latency", keys: keys("_sqlite")) { context in
        try await figures(on: { try BenchDatabase.sqlite() }, suffix: "_sqlite", p50Target: 0.5, context: context)
    }

    /// A job whose result is its input.
    struct Echo: JobKind {
        struct Input: Codable, Sendable { var n: Int }
        static let name = "bench.echo"
        func run(_ input: Input, context: any TaskContext) async throws -> Int { input.n }
    }

    static func figures(
        on make: @escaping @Sendable () async throws -> BenchDatabase, suffix: String, p50Target: Double,
        context: BenchContext
    ) async throws -> [Figure] {
        let count = context.options.quick ? 50 : 500
        let (times, name) = try await BenchDatabase.with(make) { database in
            (try await latencies(count: count, on: database), database.name)
        }
        let sorted = times.sorted()
        let p50 = Measurement.percentile(sorted: sorted, 0.5)
        let p99 = Measurement.percentile(sorted: sorted, 0.99)
        context.log(
            "job latency, \(name): p50 \(String(format1: p50, decimals: 2)) ms, p99 \(String(format1: p99, decimals: 2)) ms")
        if LatencyTimeline.isRecording { logStages(LatencyTimeline.stages(LatencyTimeline.take()), context: context) }
        let shape = "\(name), a JobClient and a worker (8 slots) on connections of their own, one job at a time, \(count) jobs"
        return [
            Figure(
                "job_latency_p50_ms" + suffix, p50, unit: "ms", target: .below(p50Target),
                note: "enqueue to result read (JobClient.submit, then result(of:as:)), \(shape)"),
            Figure("job_latency_p99_ms" + suffix, p99, unit: "ms", note: "the same, 99th percentile"),
        ]
    }

    static func latencies(count: Int, on database: BenchDatabase) async throws -> [Double] {
        let (workerStore, closeWorker) = try await database.connect()
        var configuration = TaskExecutor.Configuration()
        configuration.maxConcurrentTasks = 8
        configuration.completedTaskVisibility = .milliseconds(100)
        let worker = try TaskExecutor(store: workerStore, configuration: configuration)
        try worker.register(Echo())
        try await worker.start()
        let (clientStore, closeClient) = try await database.connect()
        let client = try JobClient(store: clientStore)
        var times: [Double] = []
        for n in 0..<(count + 20) {
            let start = ContinuousClock.now
            let id = try await client.submit(Echo.self, input: .init(n: n))
            let result = try await client.result(of: id, as: Echo.self, timeout: .seconds(30))
            let elapsed = ContinuousClock.now - start
            guard result == n else { throw BenchFailure("job \(id) returned \(result), not \(n)") }
            if n >= 20 { times.append(elapsed.inMilliseconds) }
            // The timeline (a build with the LatencyTimeline trait) keeps the measured jobs only.
            if n == 19 { _ = LatencyTimeline.take() }
        }
        await worker.shutdown()
        await closeWorker()
        await closeClient()
        return times
    }

    /// The stages of the measured jobs' way (``LatencyTimeline``), each its median and mean over the jobs that passed
    /// it, in µs; the medians' sum beside the p50 of the whole.
    static func logStages(_ jobs: [[LatencyTimeline.Point: Duration]], context: BenchContext) {
        context.log("  stages of \(jobs.count) jobs (µs: median, mean; jobs that passed the point):")
        var sum = 0.0
        for point in LatencyTimeline.Point.allCases.dropFirst() {
            let times = jobs.compactMap { $0[point].map { $0.inMilliseconds * 1_000 } }.sorted()
            guard !times.isEmpty else { continue }
            let median = Measurement.percentile(sorted: times, 0.5)
            sum += median
            let mean = times.reduce(0, +) / Double(times.count)
            context.log("  \(pad(median, 6)) \(pad(mean, 6))  \(pad(Double(times.count), 4))  \(point.stage)")
        }
        context.log("  \(pad(sum, 6)) µs: the medians' sum")
    }

    private static func pad(_ value: Double, _ width: Int) -> String {
        let text = String(format1: value, decimals: 0)
        return String(repeating: " ", count: max(0, width - text.count)) + text
    }
}
