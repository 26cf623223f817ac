import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// The README's library example, as written there (but on a temporary database, and without the service group that
/// would run until SIGTERM): it must compile and do what the README says.
struct ReadmeExampleTests {
    struct ImportInput: Codable, Sendable { var files: [String] }
    struct FileSummary: Codable, Sendable { var rows: Int }

    @Test func theBatchServiceExampleRuns() async throws {
        let directory = try TemporaryDirectory()
        let executor = try TaskExecutor(path: directory.file("service.sqlite"))

        try executor.register("import", input: ImportInput.self, options: TaskOptions.interactive.retryable()) {
            input, context in
            var total = 0
            for (index, file) in input.files.enumerated() {
                let summary = try await context.push(file, weight: 1) { step in
                    try await step.report(.named("parsing \(file)").progress(0.5))
                    return FileSummary(rows: 42)
                }
                total += summary.rows
                try await context.report(.step(index + 1, of: input.files.count))
            }
            try await context.checkpoint(total)
        }
        try await executor.start()
        let id = try await executor.submit(
            "import", input: ImportInput(files: ["a.csv", "b.csv"]), idempotencyKey: "2026-11-21")
        #expect(try await executor.submit("import", input: ImportInput(files: []), idempotencyKey: "2026-11-21") == id)
        try await executor.runEnded(id)
        let snapshot = try #require(executor.snapshot(of: id))
        #expect(snapshot.status == .completed && snapshot.children.map(\.name) == ["a.csv", "b.csv"])
        #expect(try await executor.store.task(id: id)?.checkpoint == Data("84".utf8))

        let closure = try await executor.addTask(name: "Data Import", options: .interactive) { context in
            try await context.report(.named("Initializing..."))
            try await context.push("Downloading files") { download in
                for i in 1...10 { try await download.report(.progress(Double(i) / 10)) }
            }
            try await context.report(.progress(1.0))
        }
        let streamed = try await within(.seconds(30), "the closure task on the stream") {
            for await graph in executor.progressStream {
                if let task = graph.task(closure), task.isFinished { return task.status }
            }
            return TaskStatus.pending
        }
        #expect(streamed == .completed)
        await executor.shutdown()
    }
}
