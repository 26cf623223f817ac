import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// progressctl against a database that a real executor filled: what the executor wrote is what the tool reads.
@Suite struct ExecutorFilledTests {
    struct Failure: Error, LocalizedError {
        var errorDescription: String? { "disk full" }
    }

    @Test func listShowAndHistoryReadWhatAnExecutorWrote() async throws {
        let fixture = try Fixture()
        let executor = TaskExecutor(store: fixture.store)
        let imported = try await executor.addTask(name: "import", id: "import-1", options: .interactive) { context in
            try await context.report(.named("reading"))
            try await context.push("parse a.csv", weight: 2) { parse in try await parse.report(.progress(1)) }
            try await context.push("parse b.csv") { _ in }
        }
        let broken = try await executor.addTask(name: "export", id: "export-1") { context in
            try await context.push("render") { _ in throw Failure() }
        }
        try await executor.runEnded(imported)
        try await executor.runEnded(broken)
        try await executor.flush()
        await executor.shutdown()

        let list = try await fixture.run(["list", "--json"])
        #expect(list.status == 0, "\(list.stderr)")
        let roots = try decodeJSON([TaskDocument].self, from: list.stdout)
        #expect(Set(roots.map(\.id)) == ["import-1", "export-1"])
        let failed = try #require(roots.first { $0.id == "export-1" })
        #expect(failed.status == "failed" && failed.errorDescription == "Subtask 'render' failed: disk full")

        let show = try await fixture.run(["show", "import", "--json"])
        #expect(show.status == 0, "\(show.stderr)")
        let tree = try decodeJSON([TaskDocument].self, from: show.stdout)
        #expect(tree.map(\.name) == ["import", "parse a.csv", "parse b.csv"])
        #expect(tree.allSatisfy { $0.status == "completed" && $0.progress == 1 })
        #expect(tree.first?.step == "reading")

        let history = try await fixture.run(["history", "export-1"])
        #expect(history.status == 0)
        for event in ["created", "started", "failed"] { #expect(history.stdout.contains(event), "\(event)") }
        #expect(history.stdout.contains("disk full"))

        let stats = try await fixture.run(["stats"])
        #expect(stats.status == 0 && stats.stdout.contains("completed") && stats.stdout.contains("failed"))
    }
}
