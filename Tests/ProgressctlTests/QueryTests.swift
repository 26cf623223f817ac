import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// `list --until --name --sort --reverse` with its footer, `show`'s input, key and result, and `history`'s filters
/// (issue 14).
@Suite struct QueryTests {
    func ids(_ result: ChildProcess.Outcome) throws -> [String] {
        try decodeJSON([TaskDocument].self, from: result.stdout).map(\.id)
    }

    @Test func listFiltersByNameAndCreationAndSorts() async throws {
        let fixture = try Fixture()
        let start = fixture.start
        try await fixture.root("a", name: "Nightly import", status: .running, progress: 0.2, createdAt: start)
        try await fixture.root("b", name: "nightly export", status: .running, progress: 0.9, createdAt: start.addingTimeInterval(60))
        try await fixture.root("c", name: "weekly report", status: .pending, createdAt: start.addingTimeInterval(120))
        try await fixture.report("a", 0.3)

        let until = ISO8601DateFormatter().string(from: start.addingTimeInterval(120))
        #expect(try ids(try await fixture.run(["list", "--until", until, "--json"])) == ["b", "a"])
        #expect(try ids(try await fixture.run(["list", "--name", "NIGHTLY", "--json"])) == ["b", "a"])
        #expect(try ids(try await fixture.run(["list", "--name", "report", "--since", until, "--json"])) == ["c"])
        #expect(try ids(try await fixture.run(["list", "--until", "1d", "--reverse", "--json"])) == ["a", "b", "c"])
        #expect(try ids(try await fixture.run(["list", "--sort", "progress", "--json"])) == ["b", "a", "c"])
        #expect(try ids(try await fixture.run(["list", "--sort", "progress", "--reverse", "--json"])) == ["c", "a", "b"])
        #expect(try ids(try await fixture.run(["list", "--sort", "updated", "--json"])).first == "a", "a changed last")
        let bad = try await fixture.run(["list", "--sort", "name"])
        #expect(bad.status == 64 && bad.stderr.contains("name"))
    }

    @Test func theFooterCountsEveryMatch() async throws {
        let fixture = try Fixture()
        var records: [TaskRecord] = []
        for index in 0..<1_004 {
            records.append(
                TaskRecord(id: String(format: "t%04d", index), name: "task \(index)", kind: "import",
                           status: index < 4 ? .failed : .completed, createdAt: fixture.start.addingTimeInterval(Double(index)),
                           finishedAt: fixture.start.addingTimeInterval(Double(index) + 1)))
        }
        try await fixture.store.insert(records, events: [])

        let page = try await fixture.run(["list"])
        #expect(page.status == 0)
        let lines = page.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 52, "header, 50 tasks, footer")
        #expect(lines.last == "50 of 1,004 tasks")

        let offset = try await fixture.run(["list", "--limit", "10", "--offset", "100"])
        #expect(offset.stdout.split(separator: "\n").last == "10 of 1,004 tasks, from number 101")

        let countOnly = try await fixture.run(["list", "--status", "failed", "--limit", "0"])
        #expect(countOnly.status == 0)
        #expect(countOnly.stdout == "0 of 4 tasks\n", "only the footer")
        #expect(countOnly.stderr.isEmpty)

        let none = try await fixture.run(["list", "--status", "paused"])
        #expect(none.stdout == "0 of 0 tasks\n")
    }

    /// Beside a page, the footer counts up to 10,000 (a count of a million roots would take longer than the page);
    /// alone, it counts them all.
    @Test func theFooterOfAPageCountsUpTo10000() async throws {
        let fixture = try Fixture()
        let records = (0..<10_001).map { index in
            TaskRecord(
                id: String(format: "t%05d", index), name: "task \(index)", kind: "import", status: .completed,
                createdAt: fixture.start.addingTimeInterval(Double(index)),
                finishedAt: fixture.start.addingTimeInterval(Double(index) + 1))
        }
        try await fixture.store.insert(records, events: [])
        let page = try await fixture.run(["list", "--limit", "2"])
        #expect(page.status == 0)
        #expect(page.stdout.split(separator: "\n").last == "2 of 10,000+ tasks")
        let count = try await fixture.run(["list", "--limit", "0"])
        #expect(count.stdout == "0 of 10,001 tasks\n")
        let fewer = try await fixture.run(["list", "--limit", "2", "--since", "2026-05-28T22:40:00Z"])
        #expect(fewer.status == 0, "\(fewer.stderr)")
        #expect(fewer.stdout.split(separator: "\n").last?.hasSuffix("+ tasks") == false)
    }

    @Test func showPrintsTheInputKeyAndResult() async throws {
        let fixture = try Fixture()
        let input = #"{"file":"a.csv","options":{"header":true,"columns":[]},"rows":[1,2]}"#
        try await fixture.store.insert(
            [TaskRecord(id: "job-1", name: "import", kind: "import", input: Data(input.utf8), idempotencyKey: "a.csv",
                        status: .completed, result: Data(#"{"imported":2}"#.utf8), createdAt: fixture.start,
                        finishedAt: fixture.start)],
            events: [])
        try await fixture.root("closure", kind: nil, status: .running)

        let text = try await fixture.run(["show", "job-1"])
        #expect(text.status == 0, "\(text.stderr)")
        let expected = """
                idempotency key a.csv
                input:
                  {
                    "file": "a.csv",
                    "options": {
                      "columns": [],
                      "header": true
                    },
                    "rows": [
                      1,
                      2
                    ]
                  }
                result:
                  {
                    "imported": 2
                  }

            """
        #expect(text.stdout.hasSuffix(expected), "\(text.stdout)")

        let json = try await fixture.run(["show", "job-1", "--json"])
        let node = try #require(try jsonObjects(json.stdout).first)
        #expect(node["idempotencyKey"] as? String == "a.csv")
        #expect((node["input"] as? NSDictionary)?["file"] as? String == "a.csv")
        #expect((node["result"] as? NSDictionary)?["imported"] as? Int == 2)

        let closure = try await fixture.run(["show", "closure", "--json"])
        let closureNode = try #require(try jsonObjects(closure.stdout).first)
        #expect(closureNode.isNull("input") && closureNode.isNull("result") && closureNode.isNull("idempotencyKey"))
        let closureText = try await fixture.run(["show", "closure"])
        #expect(!closureText.stdout.contains("input:") && !closureText.stdout.contains("idempotency key"))
    }

    /// A history of one root with two subtasks: created, started, steps, a failure and a retry.
    func historyFixture() async throws -> Fixture {
        let fixture = try Fixture()
        let root = try await fixture.root("h-1", name: "report", status: .running)
        try await fixture.child("h-1-a", of: root, name: "download")
        try await fixture.child("h-1-b", of: root, name: "render")
        let start = fixture.start
        var events: [TaskEvent] = []
        for index in 0..<10 {
            events.append(TaskEvent(taskID: "h-1-a", rootID: "h-1", kind: .progress, at: start.addingTimeInterval(Double(10 + index)),
                                    attempt: 1, progress: Double(index) / 10))
        }
        events.append(TaskEvent(taskID: "h-1-b", rootID: "h-1", kind: .failed, at: start.addingTimeInterval(30), attempt: 1,
                                message: "no font", errorType: "RenderError"))
        events.append(TaskEvent(taskID: "h-1", rootID: "h-1", kind: .retried, at: Date(), attempt: 2))
        try await fixture.store.insert([], events: events)
        return fixture
    }

    struct EventDocument: Decodable { var taskID: String; var kind: String; var at: Date; var progress: Double? }

    @Test func historyFiltersByKindTimeTaskAndTail() async throws {
        let fixture = try await historyFixture()
        func events(_ arguments: [String]) async throws -> [EventDocument] {
            let result = try await fixture.run(["history", "h-1", "--json"] + arguments)
            #expect(result.status == 0, "\(result.stderr)")
            return try decodeJSON([EventDocument].self, from: result.stdout)
        }
        #expect(try await events([]).count == 15)
        let tail = try await events(["--tail", "3"])
        #expect(tail.map(\.kind) == ["progress", "failed", "retried"], "the last three, oldest first")
        #expect(try await events(["--event", "failed", "--event", "retried"]).map(\.kind) == ["failed", "retried"])
        #expect(try await events(["--event", "failed,created"]).map(\.kind) == ["created", "failed"])
        #expect(try await events(["--since", "1h"]).map(\.kind) == ["retried"])
        let download = try await events(["--task", "download"])
        #expect(download.count == 11 && download.allSatisfy { $0.taskID == "h-1-a" })
        #expect(try await events(["--task", "h-1-b", "--tail", "1"]).map(\.kind) == ["failed"])
        #expect(try await events(["--tail", "0"]).isEmpty)

        let text = try await fixture.run(["history", "h-1", "--task", "render", "--event", "failed"])
        let lines = text.stdout.split(separator: "\n")
        #expect(lines.count == 2 && lines[1].contains("RenderError: no font"), "\(text.stdout)")

        let badKind = try await fixture.run(["history", "h-1", "--event", "exploded"])
        #expect(badKind.status == 64 && badKind.stderr.contains("invalid event kind 'exploded'"))
        let badTask = try await fixture.run(["history", "h-1", "--task", "upload"])
        #expect(badTask.status == 1 && badTask.stderr.contains("has no subtask 'upload'"))
    }
}
