import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Bad input: one line `progressctl: error: …` on stderr, a non-zero status, and the file as it was.
@Suite struct BadInputTests {
    /// Checks the one-line diagnostic and the status.
    func expectError(_ result: ChildProcess.Outcome, containing text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status != 0, sourceLocation: sourceLocation)
        #expect(result.errorLines.count == 1, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.errorLines.first?.hasPrefix("progressctl: error: ") == true, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(text), "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
    }

    /// A fixture with a few tasks whose store is closed, so that its bytes are all in the main file.
    func closedFixture() async throws -> Fixture {
        let fixture = try Fixture()
        try await fixture.root("abc-1", status: .failed, options: .default.retryable())
        try await fixture.root("abc-2", status: .completed)
        try await fixture.root("xyz", status: .pending, options: .interactive)
        await fixture.store.close()
        return fixture
    }

    static let idCommands: [[String]] = [
        ["show"], ["history"], ["watch"], ["retry"], ["pause"], ["resume"], ["cancel"], ["remove"], ["remove", "--force"],
    ]

    @Test(arguments: idCommands)
    func unknownAndAmbiguousIDs(command: [String]) async throws {
        let fixture = try await closedFixture()
        let before = fixture.bytes()
        expectError(try await fixture.run(command + ["nope"]), containing: "no task with id 'nope'")
        let ambiguous = try await fixture.run(command + ["abc"])
        expectError(ambiguous, containing: "id prefix 'abc' is ambiguous")
        #expect(ambiguous.stderr.contains("abc-1") && ambiguous.stderr.contains("abc-2"))
        #expect(fixture.bytes() == before)
    }

    static let anyCommands: [[String]] = [
        ["list"], ["show", "xyz"], ["stats"], ["doctor"], ["retry", "abc-1"], ["pause", "xyz"], ["remove", "abc-2"],
        ["prune", "--older-than", "1d"], ["submit", "--allow-unregistered", "import", "--input", "{}"],
    ]

    @Test(arguments: anyCommands)
    func aMissingFileIsNotCreated(command: [String]) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("missing.sqlite")
        let result = try await CLI.run(["--db", path] + command, in: directory)
        expectError(result, containing: "no database at '\(path)'")
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test(arguments: anyCommands)
    func aFileThatIsNotADatabase(command: [String]) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("notes.txt")
        let text = Data(String(repeating: "these are not the tasks you are looking for\n", count: 200).utf8)
        try text.write(to: URL(fileURLWithPath: path))
        let result = try await CLI.run(["--db", path] + command, in: directory)
        expectError(result, containing: "is not a Progression database")
        #expect(FileManager.default.contents(atPath: path) == text)
    }

    @Test(arguments: anyCommands)
    func aDatabaseNewerThanTheTool(command: [String]) async throws {
        let fixture = try await closedFixture()
        try await runSQLite(fixture.path, "INSERT INTO schema_migrations VALUES ('9999_future', 'x', 0);", in: fixture.directory)
        let before = fixture.bytes()
        expectError(try await fixture.run(command), containing: "is newer than this program")
        #expect(fixture.bytes() == before)
    }

    @Test(arguments: [["retry", "abc-1"], ["remove", "abc-2"], ["pause", "xyz"], ["submit", "--allow-unregistered", "import", "--input", "{}"]])
    func aDatabaseLockedByAWriter(command: [String]) async throws {
        let fixture = try await closedFixture()
        let marker = fixture.directory.file("locked")
        // Holds the write lock until its stdin closes; touches the marker once it has the lock.
        let input = try ChildProcess.pipe()
        let holder = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"), ["sqlite3", fixture.path], output: .discarded,
            input: .handle(input.reading))
        defer { if holder.isRunning { holder.signal(SIGKILL) } }
        try input.reading.close()
        input.writing.write(Data("BEGIN IMMEDIATE;\n.system touch '\(marker)'\n".utf8))
        #expect(await eventually { FileManager.default.fileExists(atPath: marker) }, "sqlite3 did not take the lock")
        let rowsBefore = try await rows(of: fixture)

        let started = ContinuousClock.now
        let result = try await fixture.run(["--busy-timeout", "200"] + command)
        expectError(result, containing: "is locked by another process")
        #expect(ContinuousClock.now - started >= .milliseconds(200))

        try input.writing.close()
        // Its input closed, sqlite3 ends and releases the lock.
        try await holder.waitForExit(timeout: .seconds(120))
        #expect(try await rows(of: fixture) == rowsBefore)
    }

    @Test(arguments: [
        (["list", "--status", "bogus"], "invalid status 'bogus'"),
        (["list", "--status", "failed,Done"], "invalid status 'Done'"),
        (["list", "--since", "yesterday"], "invalid value 'yesterday' for --since"),
        (["list", "--since", "12x"], "invalid value '12x' for --since"),
        (["prune", "--older-than", "soon"], "invalid duration 'soon' for --older-than"),
        (["prune", "--older-than", "7d", "--status", "running"], "finished tasks only"),
        (["prune", "--older-than", "7d", "--status", "nope"], "invalid status 'nope'"),
        (["submit", "--allow-unregistered", "import", "--input", "{not json"], "--input is not valid JSON"),
        (["list", "--limit=-1"], "--limit must be 0 or more"),
        (["submit", "--allow-unregistered", "import", "--input", "{}", "--stall-limit", "0s"], "a stall limit must be positive"),
        (["submit", "--allow-unregistered", "import", "--input", "{}", "--stall-limit", "5m", "--stall-action", "wait"],
         "unknown stall action 'wait'"),
        (["submit", "--allow-unregistered", "import", "--input", "{}", "--stall-action", "retry"],
         "--stall-action goes with --stall-limit"),
        (["retry"], "give a task id, --all-failed or filters"),
        (["frobnicate"], "frobnicate"),
    ])
    func invalidArguments(arguments: [String], message: String) async throws {
        let fixture = try await closedFixture()
        let before = fixture.bytes()
        expectError(try await fixture.run(arguments), containing: message)
        #expect(fixture.bytes() == before)
    }

    /// Every row of the file, read with the sqlite3 tool (no migration, no write).
    func rows(of fixture: Fixture) async throws -> String {
        try await runSQLite(
            fixture.path, "SELECT * FROM tasks ORDER BY id; SELECT * FROM events ORDER BY id; SELECT * FROM control_requests;",
            in: fixture.directory)
    }
}

/// Runs the sqlite3 tool on `path` with `sql`; returns its output.
@discardableResult
func runSQLite(_ path: String, _ sql: String, in directory: TemporaryDirectory) async throws -> String {
    let sqlite3 = try ChildProcess(
        URL(fileURLWithPath: "/usr/bin/env"), ["sqlite3", path, sql], output: .files(in: directory.path))
    let result = try await sqlite3.outcome(timeout: .seconds(120))
    try #require(result.status == 0, "sqlite3 failed on \(sql)")
    return result.stdout
}
