import Foundation
import Progression
import Synchronization

/// Job trees (issue 35): one parent starts 10,000 no-op child jobs, which two workers (8 slots each, their own
/// connections) run while the parent waits for them without a slot, until the parent has their results; and how soon
/// the parent's progress in the store includes a child that completed. On SQLite here; on PostgreSQL in
/// `PostgresThroughput`, with the keys' suffix `_postgres`.
enum FanoutBench {
    static func keys(_ suffix: String) -> [String] {
        ["fanout_children_per_s" + suffix, "fanout_progress_lag_p99_ms" + suffix]
    }

    static let scenario = Scenario(name: "fanout", keys: keys("_sqlite")) { context in
        try await figures(on: { try BenchDatabase.sqlite() }, suffix: "_sqlite", target: 5_000, context: context)
    }

    /// The parent: declares its children as its total, starts them in one transaction, waits for all their results.
    struct Parent: JobKind {
        struct Input: Codable, Sendable { var children: Int }
        static let name = "bench.fanout"

        func run(_ input: Input, context: any TaskContext) async throws -> Int {
            try await context.report(.total(Double(input.children)))
            let children = try await context.startChildren(Child.self, inputs: Array(0..<input.children)) { _ in
                ChildJobOptions(name: "child")
            }
            return try await context.results(of: children).reduce(0, +)
        }
    }

    /// A no-op child: returns its number.
    struct Child: JobKind {
        typealias Input = Int
        typealias Output = Int
        static let name = "bench.fanout-child"

        func run(_ input: Int, context: any TaskContext) async throws -> Int { input }
    }

    static func figures(
        on make: @escaping @Sendable () async throws -> BenchDatabase, suffix: String, target: Double,
        context: BenchContext
    ) async throws -> [Figure] {
        let count = context.options.quick ? 1_000 : 10_000
        let (run, name) = try await BenchDatabase.with(make) { (try await fanout(children: count, on: $0), $0.name) }
        context.log(
            "fanout, \(name): \(FigureFormat.number(run.perSecond)) children/s; progress lag p50 "
                + "\(String(format1: run.lagP50, decimals: 0)) ms, p99 \(String(format1: run.lagP99, decimals: 0)) ms, "
                + "max \(String(format1: run.lagMax, decimals: 0)) ms over \(run.samples) reads")
        return [
            Figure(
                "fanout_children_per_s" + suffix, run.perSecond, unit: "children/s", target: .atLeast(target),
                note: "one parent starts \(FigureFormat.number(Double(count))) no-op child jobs (one transaction) and "
                    + "waits for all their results without a slot; two workers (8 slots each, their own connections) "
                    + "run parent and children, \(name); from the parent's submit until its result was committed"),
            Figure(
                "fanout_progress_lag_p99_ms" + suffix, run.lagP99, unit: "ms", target: .below(1_000),
                note: "from a child's committed completion (its finished time) to the first read of the parent's row "
                    + "whose progress includes it (a third connection reading it every 5 ms, \(run.samples) reads), "
                    + "p99 over the children; p50 \(String(format1: run.lagP50, decimals: 0)) ms, max "
                    + "\(String(format1: run.lagMax, decimals: 0)) ms"),
        ]
    }

    struct Run {
        var perSecond: Double
        var lagP50: Double
        var lagP99: Double
        var lagMax: Double
        var samples: Int
    }

    static func fanout(children count: Int, on database: BenchDatabase) async throws -> Run {
        var closes: [@Sendable () async -> Void] = []
        var workers: [TaskExecutor] = []
        for _ in 0..<2 {
            let (store, close) = try await database.connect()
            closes.append(close)
            var configuration = TaskExecutor.Configuration()
            configuration.maxConcurrentTasks = 8
            configuration.completedTaskVisibility = .milliseconds(100)
            let worker = try TaskExecutor(store: store, configuration: configuration)
            try worker.register(Parent())
            try worker.register(Child())
            workers.append(worker)
        }
        let (producerStore, closeProducer) = try await database.connect()
        let (readerStore, closeReader) = try await database.connect()
        closes += [closeProducer, closeReader]
        defer {
            let all = closes
            Task { for close in all { await close() } }
        }
        for worker in workers { try await worker.start() }
        let client = try JobClient(store: producerStore)
        let start = ContinuousClock.now
        let id = try await client.submit(Parent.self, input: .init(children: count))
        // The parent's row read every 5 ms (back to back, the reads would take a core of two from the workers): when
        // each share of its children first showed.
        let samples = Mutex<[(at: Date, progress: Double)]>([])
        let sampler = Task {
            while !Task.isCancelled {
                if let record = try? await readerStore.task(id: id) {
                    samples.withLock { $0.append((Date(), record.progress ?? 0)) }
                    if record.status.isFinished { return }
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        let sum = try await client.result(of: id, as: Parent.self, timeout: .seconds(3_600))
        let elapsed = ContinuousClock.now - start
        sampler.cancel()
        _ = await sampler.value
        for worker in workers { await worker.shutdown() }
        guard sum == count * (count - 1) / 2 else { throw BenchFailure("the parent summed \(sum)") }

        // The children's completions in time order, and for the k-th the first read showing k of them.
        let children = try await readerStore.roots(TaskQuery(kind: Child.name, limit: count + 1))
        guard children.count == count, children.allSatisfy({ $0.status == .completed }) else {
            throw BenchFailure("\(children.filter { $0.status == .completed }.count) of \(count) children completed")
        }
        let finished = children.compactMap(\.finishedAt).sorted()
        let reads = samples.withLock { $0 }
        var lags: [Double] = []
        var index = 0
        // The last few are left out: a parent that has not completed shows at most 0.999.
        for (k, completedAt) in finished.enumerated().dropLast(max(1, count / 1_000 + 1)) {
            let needed = Double(k + 1) / Double(count) - 1e-9
            while index < reads.count, reads[index].progress < needed { index += 1 }
            guard index < reads.count else { break }
            lags.append(max(0, reads[index].at.timeIntervalSince(completedAt) * 1_000))
        }
        lags.sort()
        return Run(
            perSecond: Double(count) / elapsed.inSeconds, lagP50: Measurement.percentile(sorted: lags, 0.5),
            lagP99: Measurement.percentile(sorted: lags, 0.99), lagMax: lags.last ?? 0, samples: reads.count)
    }
}
