import Foundation
import ProgressionSQLite
import ProgressionTestSupport
import Testing

/// Files that are not a new or known database, and readers that must not leave files a writer cannot use.
struct SQLiteConnectionFileTests {
    static let migrations = SQLiteMigrator(migrations: [
        SQLiteMigration(identifier: "0001_initial", sql: "CREATE TABLE tasks (id TEXT PRIMARY KEY) STRICT;")
    ])

    /// Options that refuse a database these migrations did not make, as the store's do.
    static func ownOptions(readOnly: Bool = false) -> SQLiteConnectionOptions {
        var options = SQLiteConnectionOptions()
        options.readOnly = readOnly
        options.validate = { try migrations.checkOwnership(of: $0) }
        return options
    }

    /// A database of ours with a row, closed: in WAL mode, with no -wal or -shm left.
    static func makeDatabase(_ path: String) throws {
        let connection = try SQLiteConnection(path: path, options: ownOptions())
        try migrations.migrate(connection, now: 0)
        try connection.execute("INSERT INTO tasks VALUES ('a')", [])
        connection.close()
    }

    static func sideFiles(of path: String) -> [String] {
        [path + "-wal", path + "-shm", path + "-journal"].filter { FileManager.default.fileExists(atPath: $0) }
    }

    static func refusal(_ path: String, _ options: SQLiteConnectionOptions) -> SQLiteError? {
        do {
            try SQLiteConnection(path: path, options: options).close()
            return nil
        } catch let error as SQLiteError {
            return error
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }

    // MARK: Another application's database

    @Test(arguments: ["DELETE", "WAL"])
    func anotherApplicationsDatabaseIsRefusedAndLeftByteForByte(journalMode: String) throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("other.sqlite")
        do {
            var plain = SQLiteConnectionOptions()
            plain.readOnly = false
            let other = try SQLiteConnection(path: path, options: plain)
            try other.execute("PRAGMA journal_mode=\(journalMode)")
            try other.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO accounts VALUES (1, 'x');")
            other.close()
        }
        #expect(Self.sideFiles(of: path).isEmpty)
        let before = try #require(FileManager.default.contents(atPath: path))
        for readOnly in [false, true] {
            let error = try #require(Self.refusal(path, Self.ownOptions(readOnly: readOnly)))
            #expect(error.code == SQLiteError.foreignDatabase)
            #expect(error.message.contains("accounts") && error.path == path)
            #expect(FileManager.default.contents(atPath: path) == before, "readOnly \(readOnly)")
            #expect(Self.sideFiles(of: path).isEmpty, "readOnly \(readOnly)")
        }
        // The migrator refuses it too, when asked directly.
        let connection = try SQLiteConnection(path: path, options: SQLiteConnectionOptions())
        #expect(throws: SQLiteError.self) { try Self.migrations.migrate(connection, now: 0) }
        #expect(try connection.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'tasks'") == 0)
    }

    @Test func aSchemaMigrationsTableOfAnotherToolIsNotOurs() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("rails.sqlite")
        do {
            let other = try SQLiteConnection(path: path)
            try other.execute("CREATE TABLE schema_migrations (version TEXT PRIMARY KEY); INSERT INTO schema_migrations VALUES ('2024');")
            other.close()
        }
        let error = try #require(Self.refusal(path, Self.ownOptions()))
        #expect(error.code == SQLiteError.foreignDatabase)
    }

    @Test func anEmptyDatabaseIsOursToInitialise() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("empty-db.sqlite")
        try SQLiteConnection(path: path).close()  // a database of one page, no tables: a creator stopped before migrating
        let connection = try SQLiteConnection(path: path, options: Self.ownOptions())
        #expect(try Self.migrations.migrate(connection, now: 0) == ["0001_initial"])
    }

    // MARK: Empty files

    @Test func anEmptyFileThisProcessDidNotCreateIsRefusedAsDamage() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("empty.sqlite")
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        var options = Self.ownOptions()
        options.busyTimeout = .milliseconds(100)
        let error = try #require(Self.refusal(path, options))
        #expect(error.code.primary == SQLiteError.corrupt)
        #expect(error.message.contains("empty (0 bytes)"))
        #expect(FileManager.default.contents(atPath: path) == Data())
        #expect(Self.sideFiles(of: path).isEmpty)
    }

    @Test func anEmptyFileWithAWALBesideItIsRefusedAtOnce() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("truncated.sqlite")
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let wal = Data(repeating: 7, count: 4096)
        #expect(FileManager.default.createFile(atPath: path + "-wal", contents: wal))
        let start = ContinuousClock.now
        let error = try #require(Self.refusal(path, Self.ownOptions()))
        #expect(ContinuousClock.now - start < .seconds(2), "no wait: a -wal means the file had pages")
        #expect(error.code.primary == SQLiteError.corrupt)
        #expect(error.message.contains("write-ahead log"))
        #expect(FileManager.default.contents(atPath: path) == Data())
        #expect(FileManager.default.contents(atPath: path + "-wal") == wal)
    }

    @Test func anEmptyFileAnotherProcessIsCreatingIsWaitedFor() throws {
        let directory = try TemporaryDirectory()
        let source = directory.file("made.sqlite")
        try Self.makeDatabase(source)
        let bytes = try #require(FileManager.default.contents(atPath: source))
        let path = directory.file("being-made.sqlite")
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        // The "other process": writes the database's pages a moment later, on a thread of its own (the open below
        // blocks its thread while it waits).
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(200)) {
            let handle = FileHandle(forWritingAtPath: path)
            try? handle?.write(contentsOf: bytes)
            try? handle?.close()
        }
        let start = ContinuousClock.now
        let connection = try SQLiteConnection(path: path, options: Self.ownOptions())
        #expect(ContinuousClock.now - start >= .milliseconds(150))
        #expect(try connection.scalarText("SELECT id FROM tasks") == "a")
    }

    @Test func aNewFileIsCreatedAndInitialised() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("new.sqlite")
        let connection = try SQLiteConnection(path: path, options: Self.ownOptions())
        #expect(try Self.migrations.migrate(connection, now: 0) == ["0001_initial"])
    }

    // MARK: Symbolic links

    @Test func aDanglingSymbolicLinkIsNamedAsSuch() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("link.sqlite")
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: directory.file("gone/db.sqlite"))
        for readOnly in [false, true] {
            let error = try #require(Self.refusal(path, Self.ownOptions(readOnly: readOnly)))
            #expect(error.code.primary == SQLiteError.cantOpen)
            #expect(error.message.contains("is a dangling symbolic link"), "\(error)")
            #expect(!error.message.contains("vanished"))
        }
        #expect(!FileManager.default.fileExists(atPath: directory.file("gone")))
    }

    @Test func aSymbolicLinkOfOurOwnIsFollowed() throws {
        let directory = try TemporaryDirectory()
        let target = directory.file("real.sqlite")
        try Self.makeDatabase(target)
        let path = directory.file("link.sqlite")
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "real.sqlite")
        let connection = try SQLiteConnection(path: path, options: Self.ownOptions())
        #expect(try connection.scalarText("SELECT id FROM tasks") == "a")
    }

    @Test(.enabled(if: getuid() == 0, "changes the owner of a link: needs root"))
    func aSymbolicLinkOwnedByAnotherUserIsNotFollowed() throws {
        let directory = try TemporaryDirectory()
        let target = directory.file("victim.sqlite")
        try Self.makeDatabase(target)
        let before = try #require(FileManager.default.contents(atPath: target))
        let path = directory.file("planted.sqlite")
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
        #expect(lchown(path, 65534, 65534) == 0)
        for readOnly in [false, true] {
            let error = try #require(Self.refusal(path, Self.ownOptions(readOnly: readOnly)))
            #expect(error.code.primary == SQLiteError.cantOpen)
            #expect(error.message.contains("symbolic link owned by another user (uid 65534)"), "\(error)")
        }
        // A link of another user's further along the chain is refused too.
        let second = directory.file("mine.sqlite")
        try FileManager.default.createSymbolicLink(atPath: second, withDestinationPath: path)
        #expect(Self.refusal(second, Self.ownOptions())?.message.contains("leads through the symbolic link") == true)
        #expect(FileManager.default.contents(atPath: target) == before)
        #expect(Self.sideFiles(of: target).isEmpty)
    }

    // MARK: Readers leave no side files a writer cannot use

    @Test func aReaderOfADatabaseNobodyMayWriteCreatesNoSideFiles() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("frozen.sqlite")
        try Self.makeDatabase(path)
        #expect(Self.sideFiles(of: path).isEmpty)
        chmod(path, 0o400)
        let before = FileManager.default.contents(atPath: path)
        do {
            let reader = try SQLiteConnection(path: path, options: Self.ownOptions(readOnly: true))
            #expect(try reader.scalarText("SELECT id FROM tasks") == "a")
            reader.close()
        }
        #expect(Self.sideFiles(of: path).isEmpty, "a -wal or -shm of mode 0400 would stop the writer later")
        #expect(FileManager.default.contents(atPath: path) == before)
        // Made writable again, the writer works.
        chmod(path, 0o600)
        let writer = try SQLiteConnection(path: path, options: Self.ownOptions())
        try writer.execute("INSERT INTO tasks VALUES ('b')", [])
        #expect(try writer.scalarInt("SELECT count(*) FROM tasks") == 2)
    }

    @Test(.enabled(if: getuid() == 0, "changes owners: needs root"))
    func rootReadingAnotherUsersDatabaseGivesTheSideFilesItsOwnerAndAWritableMode() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("theirs.sqlite")
        try Self.makeDatabase(path)
        #expect(chown(directory.path, 65534, 65534) == 0 && chown(path, 65534, 65534) == 0)
        chmod(path, 0o640)
        let previous = umask(0o077)
        defer { umask(previous) }
        let reader = try SQLiteConnection(path: path, options: Self.ownOptions(readOnly: true))
        #expect(try reader.scalarText("SELECT id FROM tasks") == "a")
        reader.close()
        for file in [path + "-wal", path + "-shm"] {
            var info = stat()
            #expect(stat(file, &info) == 0, "\(file)")
            #expect(info.st_uid == 65534 && info.st_gid == 65534, "\(file)")
            #expect(info.st_mode & 0o777 == 0o640 | 0o600, "\(file): \(String(info.st_mode & 0o777, radix: 8))")
        }
    }

    @Test func aReaderOfAnEmptyOrRollbackDatabaseCreatesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("rollback.sqlite")
        do {
            let connection = try SQLiteConnection(path: path)
            try connection.execute("PRAGMA journal_mode=DELETE")
            try Self.migrations.migrate(connection, now: 0)
            connection.close()
        }
        let reader = try SQLiteConnection(path: path, options: Self.ownOptions(readOnly: true))
        #expect(try reader.scalarInt("SELECT count(*) FROM tasks") == 0)
        reader.close()
        #expect(Self.sideFiles(of: path).isEmpty)
    }

    /// Opening a second connection in a process must not drop the first one's POSIX locks (closing any descriptor of a
    /// file does): else another process that closes the database takes itself for the last connection and deletes the
    /// WAL that the first connection still holds its commits in.
    @Test func openingASecondConnectionKeepsTheFirstOnesLocks() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("locks.sqlite")
        try Self.makeDatabase(path)
        let first = try SQLiteConnection(path: path, options: Self.ownOptions())
        try first.execute("INSERT INTO tasks VALUES ('b')", [])
        let second = try SQLiteConnection(path: path, options: Self.ownOptions())
        second.close()
        // Another process opens and closes the database.
        let other = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"), ["sqlite3", path, "SELECT count(*) FROM tasks;"], output: .discarded)
        #expect(try await other.waitForExit(timeout: .seconds(120)) == 0)
        #expect(FileManager.default.fileExists(atPath: path + "-wal"), "the other process deleted the live WAL")
        try first.execute("INSERT INTO tasks VALUES ('c')", [])
        first.close()
        let reader = try SQLiteConnection(path: path, options: Self.ownOptions())
        #expect(try reader.scalarInt("SELECT count(*) FROM tasks") == 3)
    }
}
