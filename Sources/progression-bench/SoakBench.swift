import CSQLite
import Foundation
import Progression
import Synchronization

/// Running for months (issue 37): no-op jobs through a producer and two workers on one database, with a retention of
/// 10 s (checked every second), long enough for the retention to reach its steady state. The database's size after
/// the last tenth of the jobs over its size after the first tenth (it must not grow with the jobs run), and the
/// process's peak resident memory over the last tenth over the first (the workers must not hold on to what they
/// ran). The producer keeps at most 20,000 jobs waiting, as a service's steady intake would.
enum SoakBench {
    static func keys(_ suffix: String) -> [String] {
        ["soak_db_bytes_growth" + suffix, "soak_rss_growth" + suffix, "soak_jobs_per_s" + suffix]
    }

    static let scenario = Scenario(name: "soak", keys: keys("_sqlite")) { context in
        try await figures(on: { try BenchDatabase.sqlite() }, suffix: "_sqlite", context: context)
    }

    /// What one sample saw: jobs done so far, the process's resident memory (kB).
    struct Sample {
        var done: Int
        var rssKB: Double
    }

    static func figures(
        on make: @escaping @Sendable () async throws -> BenchDatabase, suffix: String, context: BenchContext
    ) async throws -> [Figure] {
        let total = context.sizes.soakJobs
        let tenth = total / 10
        return try await BenchDatabase.with(make) { database in
            let done = Atomic<Int>(0)
            let finished = Latch(count: total)
            var retention = try RetentionPolicy(
                completed: .seconds(10), failed: .seconds(10), cancelled: .seconds(10), interval: .seconds(1))
            retention.batchSize = 1_000
            var workers: [(TaskExecutor, @Sendable () async -> Void)] = []
            for _ in 0..<2 {
                let (store, close) = try await database.connect()
                var configuration = TaskExecutor.Configuration()
                configuration.maxConcurrentTasks = 8
                configuration.completedTaskVisibility = .milliseconds(100)
                configuration.retention = retention
                let executor = try TaskExecutor(store: store, configuration: configuration)
                try executor.register(
                    FleetThroughput.Noop {
                        done.add(1, ordering: .relaxed)
                        finished.arrive()
                    })
                try await executor.start()
                workers.append((executor, close))
            }
            let (producerStore, closeProducer) = try await database.connect()
            let client = try JobClient(store: producerStore)

            // Samples every 250 ms, and the database's size once the first tenth is done and at the end.
            let samples = Mutex<[Sample]>([])
            let firstTenthBytes = Mutex<Int64?>(nil)
            let sampler = Task {
                while !Task.isCancelled {
                    let count = done.load(ordering: .relaxed)
                    if let rss = try? ResidentMemory.status("VmRSS") {
                        samples.withLock { $0.append(Sample(done: count, rssKB: rss)) }
                    }
                    if count >= tenth, firstTenthBytes.withLock({ $0 }) == nil {
                        let bytes = try? await producerStore.statistics().databaseBytes
                        firstTenthBytes.withLock { $0 = bytes }
                    }
                    try? await Task.sleep(for: .milliseconds(250))
                }
            }
            let start = ContinuousClock.now
            let inputs = Array(repeating: FleetThroughput.Noop.Input(), count: 100)
            var submitted = 0
            while submitted < total {
                while submitted - done.load(ordering: .relaxed) > 20_000 { try await Task.sleep(for: .milliseconds(5)) }
                try await client.submit(FleetThroughput.Noop.self, inputs: inputs)
                submitted += inputs.count
                if submitted % (total / 20) == 0 {
                    let rss = (try? ResidentMemory.status("VmRSS")) ?? 0
                    let anon = (try? ResidentMemory.status("RssAnon")) ?? 0
                    context.log(
                        "soak, \(database.name): \(FigureFormat.number(Double(done.load(ordering: .relaxed)))) done, "
                            + "RSS \(String(format1: rss / 1024, decimals: 1)) MB (anonymous "
                            + "\(String(format1: anon / 1024, decimals: 1)) MB, of which SQLite's allocations "
                            + "\(String(format1: Double(sqlite3_memory_used()) / 1_048_576, decimals: 1)) MB)")
                }
            }
            await finished.wait()
            let elapsed = ContinuousClock.now - start
            sampler.cancel()
            _ = await sampler.value
            // One more at the end: a quick run's last tenth may be shorter than the sampling interval.
            let endRSS = try ResidentMemory.status("VmRSS")
            samples.withLock { $0.append(Sample(done: total, rssKB: endRSS)) }
            for (executor, _) in workers { try await executor.flush() }
            let lastBytes = try await producerStore.statistics().databaseBytes
            let kept = try await producerStore.statistics().rootsByStatus["completed"] ?? 0
            for (executor, close) in workers {
                await executor.shutdown()
                await close()
            }
            await closeProducer()
            guard let firstBytes = firstTenthBytes.withLock({ $0 }), firstBytes > 0 else {
                throw BenchFailure("the database's size after the first tenth was not read")
            }
            let all = samples.withLock { $0 }
            let firstPeak = all.filter { $0.done < tenth }.map(\.rssKB).max() ?? 0
            let lastPeak = all.filter { $0.done >= total - tenth }.map(\.rssKB).max() ?? 0
            guard firstPeak > 0, lastPeak > 0 else { throw BenchFailure("too few memory samples (\(all.count))") }
            let growth = Double(lastBytes) / Double(firstBytes)
            let rssGrowth = lastPeak / firstPeak
            let rate = Double(total) / elapsed.inSeconds
            context.log(
                "soak, \(database.name): \(FigureFormat.number(Double(total))) jobs at \(FigureFormat.number(rate))/s; "
                    + "database \(firstBytes) B after the first tenth, \(lastBytes) B at the end (\(kept) completed "
                    + "jobs kept); peak RSS \(String(format1: firstPeak / 1024, decimals: 1)) MB in the first tenth, "
                    + "\(String(format1: lastPeak / 1024, decimals: 1)) MB in the last")
            let jobs = FigureFormat.number(Double(total))
            return [
                Figure(
                    "soak_db_bytes_growth" + suffix, growth, unit: "×", target: .below(1.5),
                    note: "\(database.name) size after \(jobs) no-op jobs over its size after the first tenth "
                        + "(\(firstBytes) → \(lastBytes) B), a producer and two workers (8 slots each), retention 10 s "
                        + "checked every second; \(kept) completed jobs kept at the end"),
                Figure(
                    "soak_rss_growth" + suffix, rssGrowth, unit: "×", target: .below(1.2),
                    note: "peak VmRSS of the process (producer and both workers) while the last tenth ran over the "
                        + "first tenth's (\(String(format1: firstPeak / 1024, decimals: 1)) → "
                        + "\(String(format1: lastPeak / 1024, decimals: 1)) MB), sampled every 250 ms"),
                Figure(
                    "soak_jobs_per_s" + suffix, rate, unit: "jobs/s",
                    note: "the same run: \(jobs) jobs from the first submit until the last completed"),
            ]
        }
    }
}
