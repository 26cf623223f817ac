import Foundation
import Progression
import ProgressionSQLite
import ProgressionTestSupport
import Testing

/// Files that are not what the store needs: each is refused with an error naming the file, and left as it was.
struct SQLiteTaskStoreFileTests {
    private func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    private func openError(_ path: String, _ configuration: SQLiteTaskStore.Configuration = .init()) -> TaskStoreError? {
        do {
            _ = try SQLiteTaskStore(path: path, configuration: configuration)
            return nil
        } catch let error as TaskStoreError {
            return error
        } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test func aNewFileIsCreatedWithMode0600AndWAL() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("new.sqlite")
        let store = try SQLiteTaskStore(path: path)
        try await store.insert([makeRecord(id: "a")], events: [])
        for file in [path, path + "-wal"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            #expect((attributes[.posixPermissions] as? Int) == 0o600, "\(file)")
        }
        #expect(try await store.schemaVersion() == ["0001_initial", "0002_lean_tasks", "0003_ascending_indexes", "0004_fleet_and_time", "0005_job_trees", "0006_fleet_duties", "0007_job_versions"])
        #expect(try await store.integrityCheck() == ["ok"])
        let reader = try SQLiteConnection(path: path, options: { var o = SQLiteConnectionOptions(); o.readOnly = true; return o }())
        #expect(try reader.scalarInt("PRAGMA page_size") == 2_048, "a new database has 2 KiB pages")
        reader.close()
    }

    /// A database made with SQLite's default pages (4 KiB) keeps them: the page size of a file with pages never changes.
    @Test func anExistingDatabaseKeepsItsPageSize() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("old.sqlite")
        let old = try SQLiteConnection(path: path)
        _ = try SQLiteMigrator(migrations: SQLiteMigration.embedded).migrate(old, now: 0)
        #expect(try old.scalarInt("PRAGMA page_size") == 4_096)
        old.close()

        let store = try SQLiteTaskStore(path: path)
        try await store.insert([makeRecord(id: "a")], events: [])
        #expect(try await store.task(id: "a") != nil)
        #expect(try await store.integrityCheck() == ["ok"])
        let reader = try SQLiteConnection(path: path)
        #expect(try reader.scalarInt("PRAGMA page_size") == 4_096)
        reader.close()
    }

    @Test func aFileThatIsNotADatabaseIsRefusedUntouched() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("notes.txt")
        let text = Data(String(repeating: "not a database\n", count: 500).utf8)
        _ = FileManager.default.createFile(atPath: path, contents: text)
        let error = try #require(openError(path))
        #expect(error.reason == .notADatabase)
        #expect(error.path == path && error.description.contains(path))
        #expect(contents(path) == text)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test func aTruncatedFileIsRefusedUntouched() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("truncated.sqlite")
        do {
            let store = try SQLiteTaskStore(path: path)
            try await store.insert((0..<500).map { makeRecord(id: "task-\($0)", name: String(repeating: "x", count: 500)) }, events: [])
            try await store.maintain(.passiveCheckpoint)
            await store.close()
        }
        try? FileManager.default.removeItem(atPath: path + "-wal")
        try? FileManager.default.removeItem(atPath: path + "-shm")
        let whole = try #require(contents(path))
        let half = whole.prefix(whole.count / 2)
        try half.write(to: URL(fileURLWithPath: path))
        let error = try #require(openError(path))
        #expect(error.reason == .corrupt)
        #expect(error.description.contains("truncated") && error.description.contains(path))
        #expect(contents(path) == half)
    }

    @Test func aReadOnlyFileIsRefusedUntouched() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("readonly.sqlite")
        do {
            let store = try SQLiteTaskStore(path: path)
            try await store.insert([makeRecord(id: "a")], events: [])
            await store.close()
        }
        let before = contents(path)
        chmod(path, 0o444)
        let error = try #require(openError(path))
        #expect(error.reason == .readOnly && error.description.contains(path))
        #expect(contents(path) == before)
        // Reading is still possible.
        var readOnly = SQLiteTaskStore.Configuration()
        readOnly.readOnly = true
        let reader = try SQLiteTaskStore(path: path, configuration: readOnly)
        #expect(try await reader.task(id: "a")?.name == "task a")
    }

    @Test func aReadOnlyDirectoryIsRefused() throws {
        let directory = try TemporaryDirectory()
        chmod(directory.path, 0o555)
        let path = directory.file("new.sqlite")
        let error = try #require(openError(path))
        #expect(error.reason == .readOnly && error.description.contains(directory.path))
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func aMissingDirectoryIsRefused() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("missing/dir/tasks.sqlite")
        let error = try #require(openError(path))
        #expect(error.reason == .cannotOpen && error.description.contains(path))
        #expect(!FileManager.default.fileExists(atPath: directory.file("missing")))
    }

    @Test func aMissingFileIsNotCreatedWhenNotAsked() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("absent.sqlite")
        var configuration = SQLiteTaskStore.Configuration()
        configuration.createIfMissing = false
        let error = try #require(openError(path, configuration))
        #expect(error.reason == .cannotOpen)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func aDatabaseOfANewerVersionIsRefusedUntouched() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("newer.sqlite")
        do {
            let store = try SQLiteTaskStore(path: path)
            await store.close()
        }
        do {
            let connection = try SQLiteConnection(path: path)
            try connection.execute(
                "INSERT INTO schema_migrations (identifier, checksum, applied_at) VALUES ('9999_future', 'x', 0)")
            try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            connection.close()
        }
        let before = contents(path)
        let error = try #require(openError(path))
        #expect(error.reason == .schemaTooNew)
        #expect(error.description.contains("9999_future") && error.description.contains(path))
        #expect(contents(path) == before)
    }

    @Test func aWriterHoldingTheLockMakesWritesWaitThenFailBusyWithNothingWritten() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("busy.sqlite")
        var configuration = SQLiteTaskStore.Configuration()
        configuration.busyTimeout = .milliseconds(300)
        let store = try SQLiteTaskStore(path: path, configuration: configuration)
        let blocker = try SQLiteConnection(path: path)
        try blocker.execute("BEGIN IMMEDIATE")
        let clock = ContinuousClock()
        let start = clock.now
        let error = await #expect(throws: TaskStoreError.self) {
            try await store.insert([makeRecord(id: "a"), makeRecord(id: "b")], events: [])
        }
        let waited = clock.now - start
        #expect(error?.reason == .busy)
        #expect(waited >= .milliseconds(250), "the busy timeout waits before failing")
        try blocker.execute("ROLLBACK")
        #expect(try await store.task(id: "a") == nil)
        // Once the lock is free, the same write goes through.
        try await store.insert([makeRecord(id: "a")], events: [])
        #expect(try await store.task(id: "a") != nil)
    }

    @Test(arguments: ["DELETE", "WAL"])
    func anotherApplicationsDatabaseIsRefusedAndLeftByteForByte(journalMode: String) throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("other-app.sqlite")
        do {
            let other = try SQLiteConnection(path: path)
            try other.execute(
                "PRAGMA journal_mode=\(journalMode); CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); "
                    + "INSERT INTO invoices VALUES (1, 9.5);")
            other.close()
        }
        let before = try #require(contents(path))
        var readOnly = SQLiteTaskStore.Configuration()
        readOnly.readOnly = true
        for configuration in [SQLiteTaskStore.Configuration(), readOnly] {
            let error = try #require(openError(path, configuration))
            #expect(error.reason == .foreignDatabase)
            #expect(error.description.contains("'\(path)' is not a Progression database"), "\(error)")
            #expect(error.description.contains("invoices") && error.description.contains("untouched"))
            #expect(contents(path) == before)
            for side in ["-wal", "-shm", "-journal"] {
                #expect(!FileManager.default.fileExists(atPath: path + side), "\(side) left behind")
            }
        }
    }

    @Test func anEmptyFileItDidNotCreateIsRefusedAsDamage() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("zero.sqlite")
        _ = FileManager.default.createFile(atPath: path, contents: Data())
        var configuration = SQLiteTaskStore.Configuration()
        configuration.busyTimeout = .milliseconds(100)
        let error = try #require(openError(path, configuration))
        #expect(error.reason == .corrupt)
        #expect(error.description.contains("empty (0 bytes)") && error.description.contains(path))
        #expect(contents(path) == Data())
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test func aDanglingSymbolicLinkIsSaidToBeOne() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("link.sqlite")
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: directory.file("nowhere.sqlite"))
        let error = try #require(openError(path))
        #expect(error.reason == .cannotOpen)
        #expect(error.description.contains("'\(path)' is a dangling symbolic link"), "\(error)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("nowhere.sqlite")))
    }

    /// `list --since 99999999999999d` and `prune --older-than 99999999999999d` reached these with dates some 10¹⁴ days
    /// away, and trapped converting their milliseconds to Int64.
    @Test func datesFarOutOfRangeDoNotTrap() async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteTaskStore(path: directory.file("dates.sqlite"))
        var old = makeRecord(id: "old", status: .completed)
        old.finishedAt = Date(timeIntervalSince1970: 1_000)
        try await store.insert([old, makeRecord(id: "new")], events: [])
        let farPast = Date(timeIntervalSince1970: -8.64e18)
        let farFuture = Date(timeIntervalSince1970: 8.64e18)
        #expect(try await store.roots(TaskQuery(createdSince: farPast)).count == 2)
        #expect(try await store.roots(TaskQuery(createdSince: .distantPast)).count == 2)
        #expect(try await store.roots(TaskQuery(createdSince: farFuture)).isEmpty)
        #expect(try await store.prune(finishedBefore: farPast, statuses: [.completed], dryRun: false).roots == 0)
        #expect(try await store.prune(finishedBefore: farFuture, statuses: [.completed], dryRun: false).roots == 1)
        #expect(try await store.task(id: "new") != nil)
    }

    @Test func theDefaultStateDirectoriesAreMadeForTheUserAlone() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("state/progression/progression.sqlite")
        try SQLiteTaskStore.createParentDirectories(of: path)
        for created in [directory.file("state"), directory.file("state/progression")] {
            let attributes = try FileManager.default.attributesOfItem(atPath: created)
            #expect((attributes[.posixPermissions] as? Int) == 0o700, "\(created)")
        }
        // An existing directory keeps its mode.
        let before = try FileManager.default.attributesOfItem(atPath: directory.path)[.posixPermissions] as? Int
        try SQLiteTaskStore.createParentDirectories(of: path)
        #expect(try FileManager.default.attributesOfItem(atPath: directory.path)[.posixPermissions] as? Int == before)
    }
}

/// The migrations embedded in the binary are the files of migrations/.
struct EmbeddedMigrationsTests {
    @Test func embeddedMigrationsEqualTheFolder() throws {
        let folder = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("migrations")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasSuffix(".sql") }.sorted()
        #expect(!files.isEmpty)
        #expect(SQLiteMigration.embedded.map(\.identifier) == files.map { String($0.dropLast(4)) })
        for (migration, file) in zip(SQLiteMigration.embedded, files) {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            #expect(migration.sql + "\n" == text, "\(file) differs from the embedded copy: run tools/generate-migrations.sh")
        }
    }
}
