import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Files and inputs that are not what progressctl expects (issue 15): each gets one line on stderr, a non-zero status,
/// and leaves the files as they were, without side files that the database's writer could not use.
@Suite struct FaultTests {
    /// Checks the one-line diagnostic and the status.
    func expectError(
        _ result: ChildProcess.Outcome, status: Int32 = 1, containing text: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == status, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.errorLines.count == 1, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.errorLines.first?.hasPrefix("progressctl: error: ") == true, sourceLocation: sourceLocation)
        #expect(result.stderr.contains(text), "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
    }

    /// A fixture with two tasks whose store is closed: everything is in the main file, no -wal or -shm is left.
    func closedFixture() async throws -> Fixture {
        let fixture = try Fixture()
        try await fixture.root("done", status: .completed)
        try await fixture.root("queued", status: .pending, options: .interactive)
        await fixture.store.close()
        return fixture
    }

    static func sideFiles(of path: String) -> [String] {
        ["-wal", "-shm", "-journal"].map { path + $0 }.filter { FileManager.default.fileExists(atPath: $0) }
    }

    static let readCommands: [[String]] = [["list"], ["show", "done"], ["history", "done"], ["stats"], ["doctor"]]

    static let anyCommands: [[String]] = readCommands + [
        ["retry", "done"], ["pause", "queued"], ["remove", "done"], ["prune", "--older-than", "1d"],
        ["submit", "--allow-unregistered", "import", "--input", "{}"],
    ]

    // MARK: Read-only commands and other users (item 5)

    static let otherUsersAvailable =
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: OtherUser.runuser)

    /// The case: root reads a database of another user while it is marked read-only (0400). SQLite used to
    /// create its -wal and -shm with mode 0400, and once the file was writable again its owner's writer failed with
    /// "attempt to write a readonly database".
    @Test(.enabled(if: otherUsersAvailable, "needs root and runuser"))
    func rootReadingAnotherUsersReadOnlyDatabaseLeavesItsWriterWorking() async throws {
        let fixture = try await closedFixture()
        #expect(chown(fixture.directory.path, 65534, 65534) == 0 && chown(fixture.path, 65534, 65534) == 0)
        chmod(fixture.path, 0o400)
        let before = fixture.bytes()
        for command in Self.readCommands {
            let result = try await fixture.run(command)
            #expect(result.status == 0, "\(command): \(result.stderr)")
        }
        #expect(Self.sideFiles(of: fixture.path).isEmpty, "side files of a database nobody may write")
        #expect(fixture.bytes() == before)

        chmod(fixture.path, 0o600)
        let submitted = try await OtherUser.run("nobody", ["--db", fixture.path, "submit", "--allow-unregistered", "import", "--input", "{}"], in: fixture.directory)
        #expect(submitted.status == 0, "the owner's writer: \(submitted.stderr)")
        // Root reads it again while it is writable: the side files it needs get the owner's id and a mode it can write.
        #expect(try await fixture.run(["list"]).status == 0)
        let again = try await OtherUser.run("nobody", ["--db", fixture.path, "submit", "--allow-unregistered", "import", "--input", "{}"], in: fixture.directory)
        #expect(again.status == 0, "the owner's writer after root read it: \(again.stderr)")
        let listed = try await fixture.run(["list", "--json"])
        #expect(try decodeJSON([TaskDocument].self, from: listed.stdout).count == 4)
    }

    /// A user who may read another user's database but not make side files that user could write is refused, with
    /// nothing created; the owner's writer works after it.
    @Test(.enabled(if: otherUsersAvailable, "needs root and runuser"))
    func anotherUsersReaderIsRefusedRatherThanCreatingSideFiles() async throws {
        let fixture = try await closedFixture()
        // daemon (uid 1) owns the database; its directory lets anyone create files.
        #expect(chown(fixture.directory.path, 1, 1) == 0 && chown(fixture.path, 1, 1) == 0)
        chmod(fixture.directory.path, 0o777)
        chmod(fixture.path, 0o644)
        let before = fixture.bytes()
        let read = try await OtherUser.run("nobody", ["--db", fixture.path, "list"], in: fixture.directory)
        expectError(read, containing: "could not write")
        #expect(Self.sideFiles(of: fixture.path).isEmpty)
        #expect(fixture.bytes() == before)
        let submitted = try await OtherUser.run("daemon", ["--db", fixture.path, "submit", "--allow-unregistered", "import", "--input", "{}"], in: fixture.directory)
        #expect(submitted.status == 0, "the owner's writer: \(submitted.stderr)")
    }

    // MARK: Other applications' databases, links (item 6)

    @Test(arguments: anyCommands, ["DELETE", "WAL"])
    func anotherApplicationsDatabaseIsRefusedAndLeftByteForByte(command: [String], journalMode: String) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("other.sqlite")
        try await runSQLite(
            path, "PRAGMA journal_mode=\(journalMode); CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT); "
                + "INSERT INTO accounts VALUES (1, 'x');", in: directory)
        let before = FileManager.default.contents(atPath: path)
        let result = try await CLI.run(["--db", path] + command, in: directory)
        expectError(result, containing: "'\(path)' is not a Progression database")
        #expect(result.stderr.contains("accounts"))
        #expect(FileManager.default.contents(atPath: path) == before)
        #expect(Self.sideFiles(of: path).isEmpty)
    }

    @Test(.enabled(if: getuid() == 0, "changes the owner of a link: needs root"), arguments: [["list"], ["submit", "--allow-unregistered", "import", "--input", "{}"]])
    func aLinkPlantedByAnotherUserIsNotFollowed(command: [String]) async throws {
        let fixture = try await closedFixture()
        let before = fixture.bytes()
        let link = fixture.directory.file("planted.sqlite")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: fixture.path)
        #expect(lchown(link, 65534, 65534) == 0)
        let result = try await CLI.run(["--db", link] + command, in: fixture.directory)
        expectError(result, containing: "symbolic link owned by another user")
        #expect(fixture.bytes() == before)
        #expect(Self.sideFiles(of: fixture.path).isEmpty)
    }

    @Test(arguments: [["list"], ["submit", "--allow-unregistered", "import", "--input", "{}"]])
    func aDanglingLinkIsSaidToBeOne(command: [String]) async throws {
        let directory = try TemporaryDirectory()
        let link = directory.file("link.sqlite")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: directory.file("moved.sqlite"))
        let result = try await CLI.run(["--db", link] + command, in: directory)
        expectError(result, containing: "'\(link)' is a dangling symbolic link")
        #expect(!result.stderr.contains("vanished"))
        #expect(!FileManager.default.fileExists(atPath: directory.file("moved.sqlite")))
    }

    // MARK: An empty file (item 8)

    @Test(arguments: anyCommands)
    func anEmptyDatabaseFileIsDamageNotANewDatabase(command: [String]) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("empty.sqlite")
        _ = FileManager.default.createFile(atPath: path, contents: Data())
        let result = try await CLI.run(["--db", path, "--busy-timeout", "100"] + command, in: directory)
        expectError(result, containing: "is empty (0 bytes)")
        #expect(FileManager.default.contents(atPath: path) == Data())
        #expect(Self.sideFiles(of: path).isEmpty)
    }

    // MARK: Out-of-range input (items 7 and 11)

    @Test(arguments: [
        (["list", "--since", "99999999999999d"], "duration '99999999999999d' for --since is too long"),
        (["list", "--since", "1e300s"], "for --since is too long"),
        (["list", "--since", "36501d"], "for --since is too long"),
        (["prune", "--older-than", "99999999999999d"], "duration '99999999999999d' for --older-than is too long"),
        (["prune", "--older-than", "5300w"], "for --older-than is too long"),
        (["list", "--limit", "-1"], "--limit must be 0 or more"),
        (["list", "--offset", "-3"], "--offset must be 0 or more"),
        (["--busy-timeout", "-1", "list"], "--busy-timeout must be 0 or more"),
    ])
    func outOfRangeValuesAreUsageErrors(arguments: [String], message: String) async throws {
        let fixture = try await closedFixture()
        let before = fixture.bytes()
        let result = try await fixture.run(arguments)
        expectError(result, status: 64, containing: message)
        #expect(fixture.bytes() == before)
    }

    @Test func theLongestDurationAndAnyDateWork() async throws {
        let fixture = try await closedFixture()
        for arguments in [["list", "--since", "36500d"], ["list", "--since", "0001-01-01"], ["list", "--since", "9999-12-31"]] {
            let result = try await fixture.run(arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
        }
        #expect(try await fixture.run(["prune", "--older-than", "36500d"]).status == 0)
    }

    // MARK: The default path (item 11)

    @Test func theDefaultPathFollowsXDGStateHomeThenHome() async throws {
        let directory = try TemporaryDirectory()
        let home = directory.file("home")
        let cases: [([String: String], String)] = [
            (["HOME": home, "XDG_STATE_HOME": ""], home + "/.local/state/progression/progression.sqlite"),
            (["HOME": home, "XDG_STATE_HOME": "relative/state"], home + "/.local/state/progression/progression.sqlite"),
            (["HOME": home, "XDG_STATE_HOME": directory.file("xdg")], directory.file("xdg") + "/progression/progression.sqlite"),
        ]
        for (environment, expected) in cases {
            let result = try await CLI.run(["list"], in: directory, environment: environment)
            expectError(result, containing: "no database at '\(expected)'")
        }
    }
}

/// Runs the built progressctl as another user, through runuser (the tests run as root).
enum OtherUser {
    static let runuser = "/usr/sbin/runuser"

    static func run(
        _ user: String, _ arguments: [String], in directory: TemporaryDirectory, timeout: Duration = .seconds(120)
    ) async throws -> ChildProcess.Outcome {
        try await ChildProcess(
            URL(fileURLWithPath: runuser), ["-u", user, "--", try CLI.requireBinary().path] + arguments,
            output: .files(in: directory.path), environment: CLI.environment
        ).outcome(timeout: timeout)
    }
}
