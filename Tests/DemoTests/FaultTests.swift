import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// The demo's database and manifest under files and names that are not what it expects (issue 15).
struct FaultTests {
    /// A small data folder: one ordinary file.
    func dataFolder(in temp: TemporaryDirectory) throws -> String {
        let data = temp.file("data")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try Data("one two\nthree\n".utf8).write(to: URL(fileURLWithPath: data + "/plain.txt"))
        return data
    }

    static func sideFiles(of path: String) -> [String] {
        ["-wal", "-shm", "-journal"].map { path + $0 }.filter { FileManager.default.fileExists(atPath: $0) }
    }

    /// Checks one line on stderr that contains `text`, and a failure status.
    func expectOneLineError(
        _ result: ChildProcess.Outcome, containing text: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == 1, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.hasPrefix("progression-demo: error: "), "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(text), "\(result.stderr)", sourceLocation: sourceLocation)
    }

    // MARK: An empty database file (item 8)

    /// An empty file (older than a creation in progress) is damage, not a new database to initialise silently.
    @Test func anEmptyDatabaseFileIsRefusedNotRecreated() async throws {
        let temp = try TemporaryDirectory()
        let data = try dataFolder(in: temp)
        let db = temp.file("tasks.sqlite")
        _ = FileManager.default.createFile(atPath: db, contents: Data())
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-3600)], ofItemAtPath: db)
        let result = try await ChildProcess.run("progression-demo", ["run", "--db", db, "--data", data], in: temp)
        expectOneLineError(result, containing: "is empty (0 bytes)")
        #expect(result.stderr.contains(db))
        #expect(FileManager.default.contents(atPath: db) == Data())
        #expect(Self.sideFiles(of: db).isEmpty)
    }

    @Test func anEmptyDatabaseFileWithAWALIsRefusedAtOnce() async throws {
        let temp = try TemporaryDirectory()
        let data = try dataFolder(in: temp)
        let db = temp.file("tasks.sqlite")
        _ = FileManager.default.createFile(atPath: db, contents: Data())
        let wal = Data(repeating: 1, count: 8192)
        _ = FileManager.default.createFile(atPath: db + "-wal", contents: wal)
        let result = try await ChildProcess.run("progression-demo", ["run", "--db", db, "--data", data], in: temp)
        expectOneLineError(result, containing: "write-ahead log")
        #expect(FileManager.default.contents(atPath: db) == Data())
        #expect(FileManager.default.contents(atPath: db + "-wal") == wal)
    }

    @Test func aDatabaseItCreatesIsInitialised() async throws {
        let temp = try TemporaryDirectory()
        let data = try dataFolder(in: temp)
        let db = temp.file("new.sqlite")
        let result = try await ChildProcess.run("progression-demo", ["run", "--db", db, "--data", data], in: temp)
        #expect(result.status == 0, "\(result.stderr)")
        let attributes = try FileManager.default.attributesOfItem(atPath: db)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }

    // MARK: Other applications' databases, planted links (item 6)

    @Test func anotherApplicationsDatabaseIsNotMigrated() async throws {
        let temp = try TemporaryDirectory()
        let data = try dataFolder(in: temp)
        let db = temp.file("photos.sqlite")
        try await sqlite(db, "CREATE TABLE albums (id INTEGER PRIMARY KEY, title TEXT); INSERT INTO albums VALUES (1, 'x');", in: temp)
        let before = FileManager.default.contents(atPath: db)
        let result = try await ChildProcess.run("progression-demo", ["run", "--db", db, "--data", data], in: temp)
        expectOneLineError(result, containing: "'\(db)' is not a Progression database")
        #expect(FileManager.default.contents(atPath: db) == before)
        #expect(Self.sideFiles(of: db).isEmpty)
    }

    /// As root, through a link that another user planted at the path, the demo migrated that user's database.
    @Test(.enabled(if: getuid() == 0, "changes the owner of a link: needs root"))
    func aLinkPlantedByAnotherUserIsNotFollowed() async throws {
        let temp = try TemporaryDirectory()
        let data = try dataFolder(in: temp)
        let victim = temp.file("victim.sqlite")
        try await sqlite(victim, "CREATE TABLE notes (body TEXT);", in: temp)
        #expect(chown(victim, 65534, 65534) == 0)
        let before = FileManager.default.contents(atPath: victim)
        let link = temp.file("tasks.sqlite")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: victim)
        #expect(lchown(link, 65534, 65534) == 0)
        let result = try await ChildProcess.run("progression-demo", ["run", "--db", link, "--data", data], in: temp)
        expectOneLineError(result, containing: "symbolic link owned by another user")
        #expect(FileManager.default.contents(atPath: victim) == before)
        #expect(Self.sideFiles(of: victim).isEmpty)
    }

    @Test func aDanglingLinkIsSaidToBeOne() async throws {
        let temp = try TemporaryDirectory()
        let data = try dataFolder(in: temp)
        let link = temp.file("tasks.sqlite")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: temp.file("gone/tasks.sqlite"))
        let result = try await ChildProcess.run("progression-demo", ["run", "--db", link, "--data", data], in: temp)
        expectOneLineError(result, containing: "is a dangling symbolic link")
        #expect(!result.stderr.contains("vanished"))
    }

    // MARK: The manifest (item 9)

    /// File names with a tab, a newline, a carriage return, a backslash or an escape sequence keep each manifest line
    /// one record of 5 fields.
    @Test func awkwardFileNamesKeepTheManifestOneRecordPerLine() async throws {
        let temp = try TemporaryDirectory()
        let data = try dataFolder(in: temp)
        let names = ["tab\there.txt", "new\nline.txt", "carriage\rreturn.txt", "back\\slash.txt", "esc\u{1B}[31m.txt"]
        for name in names {
            try Data("a b\n".utf8).write(to: URL(fileURLWithPath: data + "/" + name))
        }
        try FileManager.default.createSymbolicLink(atPath: data + "/dangling\tlink\n", withDestinationPath: temp.file("missing"))
        let result = try await ChildProcess.run("progression-demo", ["run", "--db", temp.file("db.sqlite"), "--data", data], in: temp)
        #expect(result.status == 1, "the dangling link fails its step: \(result.stderr)")
        let manifest = try String(contentsOfFile: temp.file("data.manifest.tsv"), encoding: .utf8)
        let lines = manifest.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count == 1 + names.count + 2, "\(manifest)")
        for line in lines {
            #expect(line.split(separator: "\t", omittingEmptySubsequences: false).count == 5, "\(line.debugDescription)")
            #expect(!line.contains("\r") && !line.unicodeScalars.contains("\u{1B}"), "\(line.debugDescription)")
        }
        #expect(manifest.contains("tab\\there.txt\t4\t1\t2\t"))
        #expect(manifest.contains("new\\nline.txt\t4\t1\t2\t"))
        #expect(manifest.contains("carriage\\rreturn.txt\t4\t1\t2\t"))
        #expect(manifest.contains("back\\\\slash.txt\t4\t1\t2\t"))
        #expect(manifest.contains("esc\\e[31m.txt\t4\t1\t2\t"))
        #expect(manifest.contains("dangling\\tlink\\n\t-\t-\t-\tERROR cannot read 'dangling\\tlink\\n'"))
    }

    // MARK: The default state directories (item 11)

    /// Under umask 000 the default database's directories were made 0777.
    @Test func theDefaultStateDirectoriesAreMade0700UnderAnyUmask() async throws {
        let temp = try TemporaryDirectory()
        let data = try dataFolder(in: temp)
        let state = temp.file("state")
        let result = try await Self.runTool(
            "/bin/sh", ["-c", "umask 000; exec \"$0\" run --data \"$1\"", try ChildProcess.binary("progression-demo").path, data],
            in: temp, environment: ["PROGRESSION_DB": "", "XDG_STATE_HOME": state + "/nested"], timeout: .seconds(60))
        #expect(result.status == 0, "\(result.stderr)")
        for directory in [state, state + "/nested", state + "/nested/progression"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: directory)
            #expect((attributes[.posixPermissions] as? Int) == 0o700, "\(directory)")
        }
        let db = state + "/nested/progression/progression.sqlite"
        #expect((try FileManager.default.attributesOfItem(atPath: db)[.posixPermissions] as? Int) == 0o600)
    }

    /// Runs the sqlite3 tool on `path`.
    func sqlite(_ path: String, _ sql: String, in temp: TemporaryDirectory) async throws {
        let result = try await Self.runTool("/usr/bin/env", ["sqlite3", path, sql], in: temp)
        try #require(result.status == 0, "sqlite3: \(result.stderr)")
    }

    /// Runs a program of the system to its end (at most `timeout`); its output goes to files in `temp`.
    static func runTool(
        _ executable: String, _ arguments: [String], in temp: TemporaryDirectory,
        environment: [String: String?] = [:], timeout: Duration = .seconds(120)
    ) async throws -> ChildProcess.Outcome {
        try await ChildProcess(
            URL(fileURLWithPath: executable), arguments, output: .files(in: temp.path), environment: environment
        ).outcome(timeout: timeout)
    }
}
