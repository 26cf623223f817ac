import Foundation
import Logging
import Progression
import ProgressionTestSupport
import Testing

/// The README's library example, as written there (but on a temporary database, and without the service group that
/// would run until SIGTERM): it must compile and do what the README says.
struct ReadmeExampleTests {
    struct ImportInput: Codable, Sendable { var files: [String] }
    struct FileSummary: Codable, Sendable { var rows: Int }

    struct Thumbnail: JobKind {
        struct Input: Codable, Sendable { var path: String }
        struct Output: Codable, Sendable { var bytes: Int }
        static let name = "thumbnail"
        func run(_ input: Input, context: any TaskContext) async throws -> Output {
            let bytes = try await context.push("read") { _ in try Data(contentsOf: URL(fileURLWithPath: input.path)).count }
            return Output(bytes: bytes)
        }
    }

    /// "Use it in your package": a worker and a producer on one SQLite file; the result comes back, the step's
    /// result is stored, and a second submit with the key is the same job.
    @Test func theFirstExampleRuns() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.png")
        try Data(repeating: 7, count: 1_234).write(to: URL(fileURLWithPath: path))
        let database = directory.file("jobs.sqlite")

        let executor = try TaskExecutor(path: database)
        try executor.register(Thumbnail())
        try await executor.start()

        let jobs = JobClient(store: try SQLiteTaskStore(path: database))
        let id = try await jobs.submit(Thumbnail.self, input: .init(path: path), options: JobOptions(idempotencyKey: "a.png"))
        let output = try await jobs.result(of: id, as: Thumbnail.self, timeout: .seconds(60))
        #expect(output.bytes == 1_234)
        #expect(try await jobs.submit(Thumbnail.self, input: .init(path: path), options: JobOptions(idempotencyKey: "a.png")) == id)
        let step = try #require(try await executor.store.tree(of: id).first { $0.name == "read" })
        #expect(step.status == .completed && step.result == Data("1234".utf8))
        await executor.shutdown()
    }

    @Test func theBatchServiceExampleRuns() async throws {
        let directory = try TemporaryDirectory()
        let executor = try TaskExecutor(path: directory.file("service.sqlite"))

        try executor.register("import", input: ImportInput.self, options: TaskOptions.interactive.retryable()) {
            input, context in
            try await context.report(.total(Double(input.files.count)))
            var rows = 0
            for file in input.files {
                let summary = try await context.push(file, weight: 1) { step in
                    try await step.report(.named("parsing \(file)").progress(0.5))
                    return FileSummary(rows: 42)
                }
                rows += summary.rows
                // What the README says the job reads as its files end: 1/2, then 0.999 until it returns.
                let done = rows / 42
                let progress = try #require(executor.snapshot(of: context.taskID)?.progress)
                #expect(progress == (done == input.files.count ? 0.999 : Double(done) / Double(input.files.count)))
            }
            try await context.checkpoint(rows)
        }
        try await executor.start()
        let id = try await executor.submit(
            "import", input: ImportInput(files: ["a.csv", "b.csv"]), options: JobOptions(idempotencyKey: "2026-11-21"))
        #expect(
            try await executor.submit(
                "import", input: ImportInput(files: []), options: JobOptions(idempotencyKey: "2026-11-21")) == id)
        try await executor.runEnded(id)
        let snapshot = try #require(executor.snapshot(of: id))
        #expect(snapshot.status == .completed && snapshot.children.map(\.name) == ["a.csv", "b.csv"])
        #expect(snapshot.progress == 1)
        #expect(try await executor.store.task(id: id)?.checkpoint == Data("84".utf8))

        let closure = try await executor.addTask(name: "Data Import", options: .interactive) { context in
            try await context.report(.named("Initializing..."))
            try await context.push("Downloading files") { download in
                for i in 1...10 { try await download.report(.progress(Double(i) / 10)) }
            }
            try await context.report(.progress(1.0))
        }
        let streamed = try await within(.seconds(120), "the closure task on the stream") {
            for await graph in executor.progressStream {
                if let task = graph.task(closure), task.isFinished { return task.status }
            }
            return TaskStatus.pending
        }
        #expect(streamed == .completed)
        await executor.shutdown()
    }

    struct Resize: JobKind {
        struct Input: Codable, Sendable { var path: String; var width: Int }
        static let name = "resize"
        static let options = TaskOptions.default.retryable()
        func run(_ input: Input, context: any TaskContext) async throws {
            context.logger.info("resizing", metadata: ["path": "\(input.path)"])
            try await context.checkpoint(input.width)
        }
    }

    /// The README's typed job kind: registered and submitted by type, its input checked by the compiler.
    @Test func theTypedJobKindExampleRuns() async throws {
        let directory = try TemporaryDirectory()
        let executor = try TaskExecutor(path: directory.file("service.sqlite"))
        try executor.register(Resize())
        #expect(throws: ProgressionError.self) { try executor.register(Resize()) }
        try await executor.start()
        let job = try await executor.submit(Resize.self, input: .init(path: "a.jpg", width: 640))
        try await executor.runEnded(job)
        let stored = try #require(try await executor.store.task(id: job))
        #expect(stored.status == .completed && stored.kind == "resize" && stored.options.canRetry)
        #expect(stored.checkpoint == Data("640".utf8))
        await executor.shutdown()
    }
}
