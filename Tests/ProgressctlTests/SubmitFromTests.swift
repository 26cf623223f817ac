import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// `submit --from FILE|-`: JSON lines submitted in one transaction (issue 14).
@Suite struct SubmitFromTests {
    struct SubmitDocument: Decodable { var id: String; var created: Bool; var line: Int? }

    @Test func linesFromAFileAreSubmittedInOrderWithTheirFields() async throws {
        let fixture = try Fixture()
        try await fixture.store.saveKinds(["import": StoredKind(options: TaskOptions.interactive.retryable())], at: Date())
        let jobs = """
            {"kind": "import", "input": {"file": "a.csv", "rows": [1, 2.5, null]}, "idempotencyKey": "a.csv", "priority": 5}

            {"input": "b.csv", "retryable": false}
            {"kind": "export", "input": null, "pausable": true}
            {"kind": "import", "input": {"file": "a.csv"}, "idempotencyKey": "a.csv"}
            """
        let file = fixture.directory.file("jobs.jsonl")
        try Data(jobs.utf8).write(to: URL(fileURLWithPath: file))

        let result = try await fixture.run(["submit", "--allow-unregistered", "import", "--from", file, "--priority", "2"])
        #expect(result.status == 0, "\(result.stderr)")
        let ids = result.stdout.split(separator: "\n").map(String.init)
        try #require(ids.count == 4, "\(result.stdout)")
        #expect(ids[0].count == 8 && ids[1].count == 8 && ids[2].count == 8, "short root ids: \(ids)")
        #expect(ids[3] == ids[0], "the second line with the same kind and key is the first's job")
        #expect(result.stderr.contains("1 of 4 jobs existed"))

        let first = try #require(try await fixture.store.task(id: ids[0]))
        #expect(first.kind == "import" && first.status == .pending && first.priority == 5)
        #expect(first.idempotencyKey == "a.csv")
        #expect(try JSONSerialization.jsonObject(with: try #require(first.input)) as? NSDictionary
            == ["file": "a.csv", "rows": [1, 2.5, NSNull()]] as NSDictionary)
        #expect(first.options.canPause && first.options.canRetry, "the kind's registered options")

        let second = try #require(try await fixture.store.task(id: ids[1]))
        #expect(second.kind == "import" && second.input == Data(#""b.csv""#.utf8))
        #expect(!second.options.canRetry && second.options.canPause && second.priority == 2, "the line over the kind, the command line's priority")

        let third = try #require(try await fixture.store.task(id: ids[2]))
        #expect(third.kind == "export" && third.input == Data("null".utf8) && third.options.canPause)
        #expect(try await fixture.store.events(of: ids[2]).map(\.kind) == [.created])
        #expect(try await fixture.store.countRoots(TaskQuery()) == 3)

        // Again: every job exists by its key but the two without one.
        let again = try await fixture.run(["submit", "--allow-unregistered", "import", "--from", file, "--json"])
        let documents = try decodeJSON([SubmitDocument].self, from: again.stdout)
        #expect(documents.map(\.created) == [false, true, true, false])
        #expect(documents.map(\.line) == [1, 3, 4, 5])
        #expect(documents[0].id == ids[0])
    }

    @Test func linesFromStdin() async throws {
        let fixture = try Fixture()
        let lines = (0..<200).map { #"{"kind": "resize", "input": {"n": \#($0)}}"# }.joined(separator: "\n") + "\n"
        let result = try await fixture.run(["submit", "--allow-unregistered", "--from", "-"], input: Data(lines.utf8))
        #expect(result.status == 0, "\(result.stderr)")
        let ids = result.stdout.split(separator: "\n").map(String.init)
        try #require(ids.count == 200 && Set(ids).count == 200)
        #expect(try await fixture.store.countRoots(TaskQuery(kind: "resize")) == 200)
        let last = try #require(try await fixture.store.task(id: ids[199]))
        #expect(last.input == Data(#"{"n":199}"#.utf8))
    }

    @Test func badLinesAreRefusedWithTheirNumbersAndNothingIsWritten() async throws {
        let fixture = try Fixture()
        try await fixture.root("existing")
        await fixture.store.close()
        let before = fixture.bytes()
        let lines = """
            {"kind": "import", "input": {}}
            {"kind": "import", "input": {}, "idempotency_key": "x"}
            {"kind": "import", "input": {}}
            not json
            {"kind": 3, "input": 1, "priority": "high"}
            {"kind": "import"}
            """
        let result = try await fixture.run(["submit", "--allow-unregistered", "--from", "-"], input: Data(lines.utf8))
        #expect(result.status == 64)
        #expect(result.stdout.isEmpty)
        #expect(result.errorLines.count == 4, "\(result.stderr)")
        #expect(result.errorLines.allSatisfy { $0.hasPrefix("progressctl: error: line ") })
        #expect(result.errorLines[0].contains("line 2: unknown field 'idempotency_key'"))
        #expect(result.errorLines[1].contains("line 4: not a JSON object"))
        #expect(result.errorLines[2].contains("line 5: \"kind\" must be a non-empty string"))
        #expect(result.errorLines[2].contains("\"priority\" must be an integer"))
        #expect(result.errorLines[3].contains("line 6: no \"input\""))
        #expect(fixture.bytes() == before, "nothing is written")
    }

    @Test(arguments: [
        (["submit", "--allow-unregistered", "import", "--from", "-", "--input", "{}"], "--input and --from exclude each other"),
        (["submit", "--allow-unregistered", "--from", "-", "--id", "x"], "--id goes with one job"),
        (["submit", "import"], "give the job's input"),
        (["submit", "--allow-unregistered", "--from", "/nonexistent/jobs.jsonl"], "cannot read '/nonexistent/jobs.jsonl'"),
    ])
    func badCombinations(arguments: [String], message: String) async throws {
        let fixture = try Fixture()
        let result = try await fixture.run(arguments, input: Data())
        #expect(result.status != 0)
        #expect(result.errorLines.count == 1 && result.stderr.contains(message), "\(result.stderr)")
    }
}
