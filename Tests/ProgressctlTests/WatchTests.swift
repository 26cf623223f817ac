import Foundation
import Progression
import Testing

@Suite struct WatchTests {
    func finish(_ id: String, _ status: TaskStatus, in fixture: Fixture) async throws {
        var record = try #require(try await fixture.store.task(id: id))
        record.status = status
        record.progress = status == .completed ? 1 : record.progress
        record.finishedAt = Date()
        record.updatedAt = Date()
        _ = try await fixture.store.apply(TaskBatch(records: [record]))
    }

    @Test func withoutATerminalItPrintsOneLinePerChangeAndEndsWhenTheTaskFinishes() async throws {
        let fixture = try Fixture()
        let root = try await fixture.root("w1", status: .running, progress: 0.1, step: "load")
        try await fixture.child("w1-a", of: root, name: "a.csv", status: .running, progress: 0.2)

        let watch = try CLI.start(["--db", fixture.path, "watch", "w1"], in: fixture.directory)
        #expect(await eventually { watch.stdoutSoFar.contains("w1 running 10% load\n") }, "\(watch.stdoutSoFar)")
        #expect(watch.stdoutSoFar.contains("w1-a running 20% -\n"))

        var progressed = try #require(try await fixture.store.task(id: "w1"))
        progressed.progress = 0.5
        progressed.step = "parse"
        progressed.updatedAt = Date()
        _ = try await fixture.store.apply(TaskBatch(updates: [TaskUpdate(progressed, columns: TaskColumns.report)]))
        #expect(await eventually { watch.stdoutSoFar.contains("w1 running 50% parse\n") }, "\(watch.stdoutSoFar)")

        try await finish("w1-a", .completed, in: fixture)
        try await finish("w1", .completed, in: fixture)
        let result = try await watch.result(timeout: .seconds(10))
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines == [
            "w1 running 10% load", "w1-a running 20% -", "w1 running 50% parse", "w1 completed 100% parse",
            "w1-a completed 100% -",
        ] || lines == [
            "w1 running 10% load", "w1-a running 20% -", "w1 running 50% parse", "w1-a completed 100% -",
            "w1 completed 100% parse",
        ], "\(lines)")
        #expect(!result.stdout.contains("\u{1B}["), "no redraw without a terminal")
    }

    @Test func withoutAnIDItWatchesEveryUnfinishedTaskAndFailsWhenOneFailed() async throws {
        let fixture = try Fixture()
        try await fixture.root("u1", status: .running, progress: 0.3)
        try await fixture.root("u2", status: .pending)
        try await fixture.root("u3", status: .completed)

        let watch = try CLI.start(["--db", fixture.path, "watch"], in: fixture.directory)
        #expect(await eventually { watch.stdoutSoFar.contains("u1 running 30%") && watch.stdoutSoFar.contains("u2 pending") })
        #expect(!watch.stdoutSoFar.contains("u3"))
        try await finish("u1", .completed, in: fixture)
        #expect(await eventually { watch.stdoutSoFar.contains("u1 completed 100%") })
        try await finish("u2", .failed, in: fixture)
        let result = try await watch.result(timeout: .seconds(10))
        #expect(result.status == 1)
        #expect(result.errorLines == ["progressctl: error: task 'u2' failed"])
        #expect(result.stdout.contains("u2 failed"))
    }

    @Test func nothingToWatch() async throws {
        let fixture = try Fixture()
        try await fixture.root("done", status: .completed)
        let result = try await fixture.run(["watch"])
        #expect(result.status == 0)
        #expect(result.stderr.contains("nothing to watch"))
    }

    @Test func theDatabaseComesFromTheEnvironmentWhenNoDBOptionIsGiven() async throws {
        let fixture = try Fixture()
        try await fixture.root("env-task", status: .pending)
        let result = try await CLI.run(["list", "--json"], in: fixture.directory, environment: ["PROGRESSION_DB": fixture.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try decodeJSON([TaskDocument].self, from: result.stdout).map(\.id) == ["env-task"])
    }
}
