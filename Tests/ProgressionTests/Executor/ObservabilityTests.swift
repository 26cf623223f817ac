import Dispatch
import Foundation
import InMemoryTracing
import Logging
import MetricsTestKit
import Progression
import ProgressionTestSupport
import Synchronization
import Testing
import Tracing

/// Metrics, spans, the task's logger and typed job kinds: what a Swift server application expects of a library.
struct ObservabilityTests {
    struct Resize: JobKind {
        struct Input: Codable, Sendable {
            var path: String
            var width: Int
        }
        static let name = "resize"
        static let options = TaskOptions.interactive.retryable()

        let done: Recorder<String>

        func run(_ input: Input, context: any TaskContext) async throws {
            try await context.report(.total(2))
            try await context.push("read", weight: 1) { _ in }
            if input.width < 0 { throw Invalid() }
            try await context.push("write", weight: 1) { _ in done.append(input.path) }
        }
    }

    struct Invalid: Error {}

    @Test func typedJobKindsAreRegisteredAndSubmittedByType() async throws {
        let done = Recorder<String>()
        let executor = TaskExecutor(store: InMemoryTaskStore(), configuration: configuration())
        try executor.register(Resize(done: done))
        #expect(executor.registeredOptions(of: "resize") == Resize.options)
        let id = try await executor.submit(Resize.self, input: .init(path: "a.png", width: 200))
        let more = try await executor.submit(Resize.self, inputs: [.init(path: "b.png", width: 1), .init(path: "c.png", width: 2)])
        for id in [id] + more { try await executor.runEnded(id) }
        #expect(Set(done.all) == ["a.png", "b.png", "c.png"])
        let stored = try #require(try await executor.store.task(id: id))
        #expect(stored.kind == "resize" && stored.options.canRetry && stored.name == "resize")
        #expect(throws: ProgressionError.self) { try executor.register(Resize(done: done)) }
        await executor.shutdown()
    }

    @Test func countersAndTimersFollowEachRoot() async throws {
        let metrics = TestMetrics()
        var configuration = configuration()
        configuration.metricsFactory = metrics
        let executor = TaskExecutor(store: InMemoryTaskStore(), configuration: configuration)
        try executor.register(Resize(done: Recorder()))
        let good = try await executor.submit(Resize.self, input: .init(path: "a", width: 1))
        let bad = try await executor.submit(Resize.self, input: .init(path: "b", width: -1))
        let closure = try await executor.addTask(name: "closure") { _ in }
        for id in [good, bad, closure] { try await executor.runEnded(id) }
        try await executor.retry(taskID: bad)
        try await executor.runEnded(bad)
        try await executor.flush()
        let resize = [("kind", "resize")]
        #expect(metrics.counterTotal(label: "progression.tasks.submitted", dimensions: resize) == 2)
        #expect(metrics.counterTotal(label: "progression.tasks.started", dimensions: resize) == 3)
        #expect(metrics.counterTotal(label: "progression.tasks.completed", dimensions: resize) == 1)
        #expect(metrics.counterTotal(label: "progression.tasks.failed", dimensions: resize) == 2)
        #expect(metrics.counterTotal(label: "progression.tasks.retried", dimensions: resize) == 1)
        #expect(metrics.counterTotal(label: "progression.tasks.completed", dimensions: [("kind", "closure")]) == 1)
        let durations = try metrics.expectTimer("progression.tasks.duration", resize + [("outcome", "failed")])
        #expect(durations.values.count == 2)
        #expect(try metrics.expectTimer("progression.tasks.queue_wait", resize).values.count == 2)
        #expect(try metrics.expectTimer("progression.writer.commit_duration").values.count > 0)
        #expect(try metrics.expectRecorder("progression.writer.batch_size").values.count > 0)
        await executor.shutdown()
    }

    /// Whoever a run's end wakes reads that run's metrics, though the executor is still busy with the end: here it
    /// logs the failure, and the log is held until the waiter has read. Nor does the log hold the end's commit. (The
    /// write window outlasts the run: the writer may be awake when the run ends, and commit it unwoken.)
    @Test func aWaiterWokenByARunsEndReadsItsMetrics() async throws {
        let metrics = TestMetrics()
        let read = DispatchSemaphore(value: 0)
        var configuration = configuration()
        configuration.metricsFactory = metrics
        configuration.writeWindow = .milliseconds(200)
        let holds = Recorder<Bool>()
        // Holds the failure's log until the test has read the metrics, 30 s at most (a log that waits for nothing must
        // not hang the run), and records whether the read came first.
        configuration.logger = Logger(label: "test") { _ in
            LogSink { event, _ in
                guard event.message.description == "task failed" else { return }
                holds.append(read.wait(timeout: .now() + 30) == .success)
            }
        }
        let executor = TaskExecutor(store: InMemoryTaskStore(), configuration: configuration)
        try executor.register(Resize(done: Recorder()))
        let bad = try await executor.submit(Resize.self, input: .init(path: "b", width: -1))
        try await executor.runEnded(bad)
        let resize = [("kind", "resize")]
        let failed = metrics.counterTotal(label: "progression.tasks.failed", dimensions: resize)
        let durations = try metrics.expectTimer("progression.tasks.duration", resize + [("outcome", "failed")])
        let timed = durations.values.count
        read.signal()
        #expect(failed == 1)
        #expect(timed == 1, "the waiter read the failure's duration")
        await executor.shutdown()  // awaits the run, and so its log
        #expect(holds.all == [true], "the failure's log was held until the waiter read, not past its deadline")
    }

    @Test func eachRootAndStepRunsInASpanWithItsID() async throws {
        let tracer = InMemoryTracer()
        var configuration = configuration()
        configuration.tracer = tracer
        let executor = TaskExecutor(store: InMemoryTaskStore(), configuration: configuration)
        try executor.register(Resize(done: Recorder()))
        let id = try await executor.submit(Resize.self, input: .init(path: "a", width: -1))
        try await executor.runEnded(id)
        let spans = tracer.finishedSpans
        let root = try #require(spans.first { $0.operationName == "resize" })
        #expect(root.attributes["progression.task.id"]?.toSpanAttribute() == .string(id))
        #expect(root.attributes["progression.task.kind"]?.toSpanAttribute() == .string("resize"))
        #expect(root.status?.code == .error && !root.errors.isEmpty)
        let read = try #require(spans.first { $0.operationName == "read" })
        #expect(read.spanContext.parentSpanID == root.spanContext.spanID, "a step's span is a child of its root's")
        #expect(read.traceID == root.traceID)
        #expect(read.attributes["progression.task.root"]?.toSpanAttribute() == .string(id))
        #expect(read.status?.code != .error)
        await executor.shutdown()
    }

    @Test func taskCodeLogsWithItsTasksMetadata() async throws {
        let lines = Recorder<Logger.Metadata>()
        var configuration = configuration()
        configuration.logger = Logger(label: "test") { _ in
            LogSink { event, metadata in
                if event.message.description == "root" || event.message.description == "step" { lines.append(metadata) }
            }
        }
        let executor = TaskExecutor(store: InMemoryTaskStore(), configuration: configuration)
        let id = try await executor.addTask(name: "logging") { context in
            context.logger.info("root")
            try await context.push("step") { step in step.logger.info("step") }
        }
        try await executor.runEnded(id)
        let logged = lines.all.filter { $0["task.root"] == .string(id) }
        #expect(logged.count == 2)
        #expect(logged.first?["task.id"] == .string(id) && logged.first?["task.kind"] == .string("closure"))
        #expect(logged.last?["task.id"] == .string(id + ".1") && logged.last?["task.attempt"] == "1")
        await executor.shutdown()
    }

    /// The default bound on roots running at once.
    @Test func concurrencyIsBoundedByDefault() {
        let configuration = TaskExecutor.Configuration()
        #expect(configuration.maxConcurrentTasks == max(8, 2 * ProcessInfo.processInfo.activeProcessorCount))
    }

    func configuration() -> TaskExecutor.Configuration {
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .seconds(600)
        configuration.writeWindow = .milliseconds(2)
        return configuration
    }
}
