import CoreMetrics
import Synchronization

/// A metrics backend that keeps only what the benchmark explains a throughput with: how many batches the executor's
/// writer committed and how long they took in all. Every other metric is dropped, so that measuring costs next to
/// nothing.
final class WriterStatistics: MetricsFactory, Sendable {
    private let commits = Atomic<Int>(0)
    private let nanoseconds = Atomic<Int64>(0)

    /// Batches committed.
    var commitCount: Int { commits.load(ordering: .relaxed) }
    /// Time spent writing and committing them.
    var commitTime: Duration { .nanoseconds(nanoseconds.load(ordering: .relaxed)) }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { NOOPMetricsHandler.instance }
    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        NOOPMetricsHandler.instance
    }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler { NOOPMetricsHandler.instance }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        NOOPMetricsHandler.instance
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        label == "progression.writer.commit_duration" ? CommitTimer(statistics: self) : NOOPMetricsHandler.instance
    }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}

    private final class CommitTimer: TimerHandler, Sendable {
        init(statistics: WriterStatistics) { self.statistics = statistics }
        let statistics: WriterStatistics
        func recordNanoseconds(_ duration: Int64) {
            statistics.commits.add(1, ordering: .relaxed)
            statistics.nanoseconds.add(duration, ordering: .relaxed)
        }
    }
}
