import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// `watch` with stdout a file (not a terminal): change lines.
@Suite struct WatchTests {
    func finish(_ id: String, _ status: TaskStatus, in fixture: Fixture) async throws {
        var record = try #require(try await fixture.store.task(id: id))
        record.status = status
        record.progress = status == .completed ? 1 : record.progress
        record.finishedAt = Date()
        record.updatedAt = Date()
        _ = try await fixture.store.apply(TaskBatch(records: [record]))
    }

    func report(_ id: String, _ progress: Double, step: String? = nil, in fixture: Fixture) async throws {
        try await fixture.report(id, progress, step: step)
    }

    func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

    @Test func withoutATerminalItPrintsOneLinePerChangedRootAndEndsWhenTheTaskFinishes() async throws {
        let fixture = try Fixture()
        let root = try await fixture.root("w1", status: .running, progress: 0.1, step: "load")
        try await fixture.child("w1-a", of: root, name: "a.csv", status: .running, progress: 0.2)

        let watch = try CLI.start(["--db", fixture.path, "watch", "w1"], in: fixture.directory)
        #expect(await eventually { watch.stdout.contains("w1 running 10% load\n") }, "\(watch.stdout)")
        try await report("w1-a", 0.7, in: fixture)
        try await report("w1", 0.5, step: "parse", in: fixture)
        #expect(await eventually { watch.stdout.contains("w1 running 50% parse\n") }, "\(watch.stdout)")

        try await finish("w1-a", .completed, in: fixture)
        try await finish("w1", .completed, in: fixture)
        let result = try await watch.outcome(timeout: .seconds(120))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines(result.stdout) == ["w1 running 10% load", "w1 running 50% parse", "w1 completed 100% parse"])
        #expect(!result.stdout.contains("\u{1B}["), "no redraw without a terminal")
    }

    /// Issue 23: a delayed job reads as scheduled in watch as in list, until it runs.
    @Test func aDelayedJobIsShownAsScheduled() async throws {
        let fixture = try Fixture()
        let later = Date().addingTimeInterval(3_600)
        try await fixture.store.insert(
            [TaskRecord(id: "d1", name: "later", kind: "import", input: Data("{}".utf8), status: .pending,
                        createdAt: fixture.start, nextAttemptAt: later)], events: [])
        let watch = try CLI.start(["--db", fixture.path, "watch", "d1"], in: fixture.directory)
        #expect(await eventually { watch.stdout.contains("d1 scheduled ") }, "\(watch.stdout)")
        try await finish("d1", .completed, in: fixture)
        let result = try await watch.outcome(timeout: .seconds(120))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines(result.stdout).first?.hasPrefix("d1 scheduled ") == true, "\(result.stdout)")
    }

    /// Issue 37: a running job past its stall limit reads as stalled in watch as in list.
    @Test func aStalledJobIsShownAsStalled() async throws {
        let fixture = try Fixture()
        var hung = TaskRecord(
            id: "h1", name: "hung", kind: "import", input: Data("{}".utf8),
            options: TaskOptions.interactive.stallLimit(.seconds(30)), status: .running, progress: 0.3,
            createdAt: Date().addingTimeInterval(-600), startedAt: Date().addingTimeInterval(-600))
        hung.updatedAt = Date().addingTimeInterval(-120)
        try await fixture.store.insert([hung], events: [])
        let watch = try CLI.start(["--db", fixture.path, "watch", "h1"], in: fixture.directory)
        #expect(await eventually { watch.stdout.contains("h1 stalled ") }, "\(watch.stdout)")
        try await finish("h1", .completed, in: fixture)
        let result = try await watch.outcome(timeout: .seconds(120))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines(result.stdout).first?.hasPrefix("h1 stalled ") == true, "\(result.stdout)")
    }

    @Test func withAllItPrintsTheChangesOfEveryTaskOfTheTree() async throws {
        let fixture = try Fixture()
        let root = try await fixture.root("w2", status: .running, progress: 0.1, step: "load")
        try await fixture.child("w2-a", of: root, name: "a.csv", status: .running, progress: 0.2)

        let watch = try CLI.start(["--db", fixture.path, "watch", "w2", "--all"], in: fixture.directory)
        #expect(await eventually { watch.stdout.contains("w2-a running 20% -\n") }, "\(watch.stdout)")
        try await report("w2-a", 0.7, in: fixture)
        #expect(await eventually { watch.stdout.contains("w2-a running 70% -\n") }, "\(watch.stdout)")
        try await finish("w2-a", .completed, in: fixture)
        try await finish("w2", .completed, in: fixture)
        let result = try await watch.outcome(timeout: .seconds(120))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines(result.stdout) == [
            "w2 running 10% load", "w2-a running 20% -", "w2-a running 70% -", "w2 completed 100% load",
            "w2-a completed 100% -",
        ] || lines(result.stdout) == [
            "w2 running 10% load", "w2-a running 20% -", "w2-a running 70% -", "w2-a completed 100% -",
            "w2 completed 100% load",
        ], "\(lines(result.stdout))")
    }

    /// The rate is the one the executor stores with the task; the time left follows from it.
    @Test func aRootWithARateShowsItAndATimeLeft() async throws {
        let fixture = try Fixture()
        try await fixture.root("steady", status: .running, progress: 0.01)
        let watch = try CLI.start(
            ["--db", fixture.path, "watch", "steady", "--interval", "0.05"], in: fixture.directory)
        #expect(await eventually { watch.stdout.contains("steady running 1%") })
        try await fixture.report("steady", 0.5, rate: 0.01)
        #expect(await eventually { watch.stdout.contains(" rate ") }, "\(watch.stdout)")
        let line = try #require(lines(watch.stdout).last { $0.contains(" rate ") })
        #expect(line == "steady running 50% - rate 1.0%/s eta 50s", "\(line)")
        try await finish("steady", .completed, in: fixture)
        #expect(try await watch.outcome(timeout: .seconds(120)).status == 0)
    }

    @Test func jsonPrintsOneObjectPerChangedRootPerLine() async throws {
        let fixture = try Fixture()
        let root = try await fixture.root("j1", status: .running, progress: 0.25, step: "load")
        try await fixture.child("j1-a", of: root, name: "a.csv", status: .running, progress: 0.2)
        let watch = try CLI.start(["--db", fixture.path, "--json", "watch", "j1"], in: fixture.directory)
        #expect(await eventually { !watch.stdout.isEmpty })
        try await finish("j1", .failed, in: fixture)
        let result = try await watch.outcome(timeout: .seconds(120))
        #expect(result.status == 1)
        #expect(result.errorLines == ["progressctl: error: task 'j1' failed"])
        let objects = try lines(result.stdout).map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.map { $0["id"] as? String } == ["j1", "j1"])
        #expect(objects.map { $0["status"] as? String } == ["running", "failed"])
        #expect(objects[0]["progress"] as? Double == 0.25)
        #expect(objects[0]["step"] as? String == "load")
        #expect(objects.allSatisfy { $0.keys.contains("rate") && $0.keys.contains("eta") })
    }

    @Test func withoutAnIDItKeepsFollowingAfterEverythingFinished() async throws {
        let fixture = try Fixture()
        try await fixture.root("f1", status: .running, progress: 0.3)
        try await fixture.root("old", status: .completed)

        let watch = try CLI.start(["--db", fixture.path, "watch"], in: fixture.directory)
        #expect(await eventually { watch.stdout.contains("f1 running 30%") })
        try await finish("f1", .completed, in: fixture)
        #expect(await eventually { watch.stdout.contains("f1 completed 100%") })

        // Everything is finished; a task submitted later is still picked up, so watch did not end.
        try await fixture.root("f2", status: .pending, createdAt: Date())
        #expect(await eventually { watch.stdout.contains("f2 pending -") }, "\(watch.stdout)")
        #expect(watch.isRunning)
        // One that starts and ends between two polls is seen too.
        try await fixture.root("f3", status: .completed, progress: 1, createdAt: Date())
        #expect(await eventually { watch.stdout.contains("f3 completed 100%") }, "\(watch.stdout)")
        #expect(!watch.stdout.contains("old"), "roots finished before watch began are not listed")

        watch.signal(SIGTERM)
        _ = try await watch.outcome(timeout: .seconds(120))
    }

    @Test func withUntilDoneItEndsWhenEveryTaskFinishedAndFailsWhenOneFailed() async throws {
        let fixture = try Fixture()
        try await fixture.root("u1", status: .running, progress: 0.3)
        try await fixture.root("u2", status: .pending)
        try await fixture.root("u3", status: .completed)

        let watch = try CLI.start(["--db", fixture.path, "watch", "--until-done"], in: fixture.directory)
        #expect(await eventually { watch.stdout.contains("u1 running 30%") && watch.stdout.contains("u2 pending") })
        #expect(!watch.stdout.contains("u3"))
        try await finish("u1", .completed, in: fixture)
        #expect(await eventually { watch.stdout.contains("u1 completed 100%") })
        try await finish("u2", .failed, in: fixture)
        let result = try await watch.outcome(timeout: .seconds(120))
        #expect(result.status == 1)
        #expect(result.errorLines == ["progressctl: error: task 'u2' failed"])
        #expect(result.stdout.contains("u2 failed"))
    }

    @Test func withUntilDoneItEndsWithStatusZeroWhenAllCompleted() async throws {
        let fixture = try Fixture()
        try await fixture.root("c1", status: .running, progress: 0.5)
        let watch = try CLI.start(["--db", fixture.path, "watch", "--until-done"], in: fixture.directory)
        #expect(await eventually { watch.stdout.contains("c1 running 50%") })
        try await finish("c1", .completed, in: fixture)
        let result = try await watch.outcome(timeout: .seconds(120))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines(result.stdout) == ["c1 running 50% -", "c1 completed 100% -"])
    }

    @Test func withUntilDoneAndNothingToWatchItEndsAtOnce() async throws {
        let fixture = try Fixture()
        try await fixture.root("done", status: .completed)
        let result = try await fixture.run(["watch", "--until-done"])
        #expect(result.status == 0)
        #expect(result.errorLines == ["nothing to watch: no pending, running or paused tasks"])
    }

    @Test func aDatabaseDeletedWhileWatchingEndsItWithOneLineOnStderr() async throws {
        let fixture = try Fixture()
        try await fixture.root("d1", status: .running, progress: 0.4)
        let watch = try CLI.start(["--db", fixture.path, "watch"], in: fixture.directory)
        #expect(await eventually { watch.stdout.contains("d1 running 40%") })
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: fixture.path + suffix) }
        let result = try await watch.outcome(timeout: .seconds(120))
        #expect(result.status == 1)
        #expect(result.errorLines == ["progressctl: error: the database '\(fixture.path)' was deleted while watching"])
    }

    @Test func anUnknownIDIsAnError() async throws {
        let fixture = try Fixture()
        let result = try await fixture.run(["watch", "nope"])
        #expect(result.status == 1)
        #expect(result.errorLines == ["progressctl: error: no task with id 'nope'"])
    }

    @Test func theDatabaseComesFromTheEnvironmentWhenNoDBOptionIsGiven() async throws {
        let fixture = try Fixture()
        try await fixture.root("env-task", status: .pending)
        let result = try await CLI.run(["list", "--json"], in: fixture.directory, environment: ["PROGRESSION_DB": fixture.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try decodeJSON([TaskDocument].self, from: result.stdout).map(\.id) == ["env-task"])
    }
}
