import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// The JSON of a task, as progressctl prints it (decoded independently of the tool's own types).
struct TaskDocument: Decodable {
    var id: String
    var parentID: String?
    var name: String
    var kind: String?
    var status: String
    var progress: Double?
    var step: String?
    var attempt: Int
    var errorType: String?
    var errorDescription: String?
    var checkpointBytes: Int
    var depth: Int?
    var createdAt: Date
    var updatedAt: Date
    var finishedAt: Date?
}

@Suite struct ReadCommandTests {
    /// A running root's stored rate and the time left it implies, in `list`, `show` and `--json` (issue 10); a root
    /// that does not run shows neither.
    @Test func listAndShowGiveARunningRootsRateAndTimeLeft() async throws {
        let fixture = try Fixture()
        let running = TaskRecord(
            id: "r-run", name: "nightly", kind: "import", input: Data("{}".utf8), status: .running, progress: 0.4,
            createdAt: fixture.start, startedAt: fixture.start, total: 300, rate: 0.02)
        let done = TaskRecord(
            id: "r-done", name: "earlier", kind: "import", input: Data("{}".utf8), status: .completed, progress: 1,
            createdAt: fixture.start.addingTimeInterval(-60), startedAt: fixture.start.addingTimeInterval(-60),
            finishedAt: fixture.start.addingTimeInterval(-1), rate: 0.5)
        try await fixture.store.insert([running, done], events: [])

        let list = try await fixture.run(["list"])
        let lines = list.stdout.split(separator: "\n").map(String.init)
        try #require(lines.count == 4, "\(list.stdout)")
        #expect(lines[0].contains("RATE") && lines[0].contains("LEFT"))
        #expect(lines[1].contains("r-run") && lines[1].contains("2.0%/s") && lines[1].contains("30s"), "\(lines[1])")
        #expect(lines[2].contains("r-done") && !lines[2].contains("%/s"), "\(lines[2])")

        let show = try await fixture.run(["show", "r-run"])
        #expect(show.stdout.contains("rate 2.0%/s  left 30s"), "\(show.stdout)")
        #expect(!(try await fixture.run(["show", "r-done"])).stdout.contains("rate "))

        let objects = try jsonObjects(try await fixture.run(["list", "--json"]).stdout)
        let first = try #require(objects.first { $0["id"] as? String == "r-run" })
        #expect(first["rate"] as? Double == 0.02)
        #expect(first["secondsRemaining"] as? Double == 30)
        #expect(first["total"] as? Double == 300)
        let second = try #require(objects.first { $0["id"] as? String == "r-done" })
        #expect(second.isNull("rate") && second.isNull("secondsRemaining"))
    }

    @Test func listShowsRootsNewestFirstWithProgress() async throws {
        let fixture = try Fixture()
        try await fixture.root("aaa-old", name: "old import", status: .completed, progress: 1)
        let newer = try await fixture.root(
            "bbb-new", name: "new import", status: .running, progress: 0.45, step: "parse",
            createdAt: fixture.start.addingTimeInterval(10))
        try await fixture.child("bbb-child", of: newer, name: "a.csv")

        let result = try await fixture.run(["list"])
        #expect(result.status == 0)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        try #require(lines.count == 4, "header, two roots and the count: \(result.stdout)")
        #expect(lines[3] == "2 of 2 tasks")
        #expect(lines[0].hasPrefix("ID"))
        #expect(lines[1].contains("bbb-new") && lines[1].contains("running") && lines[1].contains("45%")
            && lines[1].contains("parse"))
        #expect(lines[2].contains("aaa-old") && lines[2].contains("completed") && lines[2].contains("100%"))
        #expect(!result.stdout.contains("bbb-child"))
        #expect(!result.stdout.contains("\u{1B}["), "no colour when stdout is not a terminal")
    }

    @Test func listFiltersAndPagesAsJSON() async throws {
        let fixture = try Fixture()
        for index in 0..<5 {
            try await fixture.root(
                "t\(index)", kind: index.isMultiple(of: 2) ? "import" : "export",
                status: index < 2 ? .failed : .completed, createdAt: fixture.start.addingTimeInterval(Double(index)))
        }
        try await fixture.root("recent", status: .pending, createdAt: Date())

        let failed = try decodeJSON([TaskDocument].self, from: try await fixture.run(["list", "--status", "failed", "--json"]).stdout)
        #expect(failed.map(\.id) == ["t1", "t0"])

        let commaList = try decodeJSON(
            [TaskDocument].self, from: try await fixture.run(["list", "--status", "failed,pending", "--kind", "import", "--json"]).stdout)
        #expect(commaList.map(\.id) == ["recent", "t0"])

        let repeated = try decodeJSON(
            [TaskDocument].self, from: try await fixture.run(["list", "--status", "failed", "--status", "pending", "--json"]).stdout)
        #expect(Set(repeated.map(\.id)) == ["recent", "t1", "t0"])

        let page = try decodeJSON([TaskDocument].self, from: try await fixture.run(["list", "--limit", "2", "--offset", "1", "--json"]).stdout)
        #expect(page.map(\.id) == ["t4", "t3"])

        let recent = try decodeJSON([TaskDocument].self, from: try await fixture.run(["list", "--since", "1h", "--json"]).stdout)
        #expect(recent.map(\.id) == ["recent"])

        let byDate = try decodeJSON(
            [TaskDocument].self, from: try await fixture.run(["list", "--since", "2026-01-01T00:00:00Z", "--json"]).stdout)
        #expect(byDate.map(\.id) == ["recent", "t4", "t3", "t2", "t1", "t0"])
    }

    @Test func showPrintsTheTreeIndentedWithErrorsAndCheckpoint() async throws {
        let fixture = try Fixture()
        let root = try await fixture.root("root-1", name: "nightly", status: .running, progress: 0.5, step: "load")
        let first = try await fixture.child("c-1", of: root, name: "download", status: .completed, progress: 1,
                                            checkpoint: Data(repeating: 7, count: 2048))
        try await fixture.child("c-1-1", of: first, name: "part 1", status: .completed, progress: 1)
        try await fixture.store.insert(
            [TaskRecord(id: "c-2", parentID: root.id, rootID: root.id, name: "parse", status: .failed, progress: 0.25,
                        errorType: "ParseError", errorDescription: "bad row 7", createdAt: fixture.start,
                        finishedAt: fixture.start.addingTimeInterval(5))], events: [])

        let text = try await fixture.run(["show", "root"])
        #expect(text.status == 0)
        let lines = text.stdout.split(separator: "\n").map(String.init)
        let nodeLine = { (name: String) in lines.first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(name + " ") } }
        #expect(nodeLine("nightly")?.hasPrefix("nightly") == true)
        #expect(nodeLine("download")?.hasPrefix("  download") == true)
        #expect(nodeLine("part 1")?.hasPrefix("    part 1") == true)
        #expect(text.stdout.contains("50%") && text.stdout.contains("step: load"))
        #expect(text.stdout.contains("error: ParseError: bad row 7"))
        #expect(text.stdout.contains("checkpoint 2.0 KiB"))

        let nodes = try decodeJSON([TaskDocument].self, from: try await fixture.run(["--json", "show", "root-1"]).stdout)
        #expect(nodes.map(\.id) == ["root-1", "c-1", "c-1-1", "c-2"] || nodes.map(\.id) == ["root-1", "c-2", "c-1", "c-1-1"])
        #expect(nodes.first { $0.id == "c-1-1" }?.depth == 2)
        #expect(nodes.first { $0.id == "c-1" }?.checkpointBytes == 2048)
        #expect(nodes.first { $0.id == "c-2" }?.errorDescription == "bad row 7")
    }

    @Test func historyListsEventsOldestFirst() async throws {
        let fixture = try Fixture()
        let root = try await fixture.root("h-1", name: "report", status: .failed, attempt: 2, error: ("IOError", "disk full"))
        try await fixture.child("h-1-a", of: root, name: "render", status: .completed)

        let text = try await fixture.run(["history", "h-1"])
        #expect(text.status == 0)
        let lines = text.stdout.split(separator: "\n").map(String.init)
        try #require(lines.count == 4, "\(text.stdout)")
        #expect(lines[1].contains("report") && lines[1].contains("created"))
        #expect(lines.contains { $0.contains("render") && $0.contains("started") })
        #expect(lines.contains { $0.contains("failed") && $0.contains("IOError: disk full") && $0.contains(" 2 ") })

        struct EventDocument: Decodable { var taskID: String; var taskName: String?; var kind: String; var at: Date; var attempt: Int; var message: String? }
        let events = try decodeJSON([EventDocument].self, from: try await fixture.run(["history", "h-1", "--json"]).stdout)
        #expect(events.map(\.kind) == ["created", "failed", "started"])
        #expect(events[2].taskName == "render")
        #expect(events[1].message == "disk full")
    }

    @Test func statsCountsByStatusAndKind() async throws {
        let fixture = try Fixture()
        try await fixture.root("s1", kind: "import", status: .completed)
        try await fixture.root("s2", kind: "import", status: .failed)
        try await fixture.root("s3", kind: "export", status: .completed)
        try await fixture.root("s4", kind: "export", status: .pending)
        try await fixture.root("s5", kind: nil, status: .running)

        struct StatsDocument: Decodable {
            var byStatus: [String: Int]; var byKind: [String: Int]; var total: Int; var failureRate: Double?
            var oldestPendingCreatedAt: Date?; var databaseBytes: Int64
        }
        let stats = try decodeJSON(StatsDocument.self, from: try await fixture.run(["stats", "--json"]).stdout)
        #expect(stats.total == 5)
        #expect(stats.byStatus["completed"] == 2 && stats.byStatus["failed"] == 1 && stats.byStatus["paused"] == 0)
        #expect(stats.byKind == ["import": 2, "export": 2, "(closure)": 1])
        #expect(abs((stats.failureRate ?? 0) - 1.0 / 3.0) < 1e-9)
        #expect(stats.oldestPendingCreatedAt == fixture.start)
        #expect(stats.databaseBytes > 0)

        let text = try await fixture.run(["stats"])
        #expect(text.status == 0)
        #expect(text.stdout.contains("failure rate: 33.3%"))
        #expect(text.stdout.contains("database size:"))
    }

    @Test func doctorReportsIntegritySchemaAndOwners() async throws {
        let fixture = try Fixture()
        try await fixture.owner("live-owner", alive: true)
        try await fixture.owner("dead-owner", alive: false)
        try await fixture.root("d1", status: .running, owner: "dead-owner")
        try await fixture.root("d2", status: .paused, owner: "dead-owner")
        try await fixture.root("d3", status: .running, owner: "live-owner")
        try await fixture.root("d4", status: .completed, owner: "dead-owner")

        struct DoctorDocument: Decodable {
            struct Owner: Decodable { var id: String; var alive: Bool; var liveness: String; var unfinishedTasks: Int }
            var integrityOK: Bool; var schemaMigrations: [String]; var owners: [Owner]; var tasksHeldByDeadOwners: Int
        }
        let report = try decodeJSON(DoctorDocument.self, from: try await fixture.run(["doctor", "--json"]).stdout)
        #expect(report.integrityOK)
        #expect(report.schemaMigrations.first?.hasPrefix("0001") == true)
        #expect(report.owners.first { $0.id == "live-owner" }?.alive == true)
        #expect(report.owners.first { $0.id == "dead-owner" }?.liveness.hasPrefix("dead") == true)
        #expect(report.tasksHeldByDeadOwners == 2)

        let text = try await fixture.run(["doctor"])
        #expect(text.status == 0)
        #expect(text.stdout.contains("integrity: ok"))
        #expect(text.stdout.contains("tasks held by dead owners: 2"))
    }

    @Test func helpShowsExamples() async throws {
        let directory = try TemporaryDirectory()
        let root = try await CLI.run(["--help"], in: directory)
        #expect(root.status == 0)
        #expect(root.stdout.contains("Examples:") && root.stdout.contains("watch"))
        let list = try await CLI.run(["list", "--help"], in: directory)
        #expect(list.status == 0 && list.stdout.contains("progressctl list --status"))
    }
}
