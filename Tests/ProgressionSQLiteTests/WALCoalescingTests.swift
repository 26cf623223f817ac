import Foundation
import ProgressionSQLite
import ProgressionTestSupport
import Testing

/// The VFS that writes a WAL commit's frames with one `write` call (Sources/CSQLiteWAL): fewer calls, and the same
/// bytes in the file, for commits of every size, transactions that spill their cache and roll back, and frames that
/// SQLite overwrites in place before it commits.
struct WALCoalescingTests {
    /// Opens `path` with its own cache of `cachePages` pages (a small cache makes a large transaction spill frames
    /// into the log before it commits) and automatic checkpoints off, so that what is written stays in the log.
    private func open(
        _ path: String, cachePages: Int = 2_000, synchronous: SQLiteSynchronousMode = .normal
    ) throws -> SQLiteConnection {
        var options = SQLiteConnectionOptions()
        options.synchronous = synchronous
        let connection = try SQLiteConnection(path: path, options: options)
        try connection.execute("PRAGMA cache_size = \(cachePages)")
        try connection.execute("PRAGMA wal_autocheckpoint = 0")
        return connection
    }

    /// Inserts `count` rows of 600 bytes numbered from `first`; a 4 KiB page holds six.
    private func insert(_ connection: SQLiteConnection, from first: Int, count: Int) throws {
        for value in first..<first + count {
            try connection.execute(
                "INSERT INTO t (v, payload) VALUES (?, ?)", [.integer(Int64(value)), .blob(Array(repeating: 7, count: 600))])
        }
    }

    private func summary(_ connection: SQLiteConnection) throws -> [Int64] {
        try connection.query("SELECT count(*), coalesce(sum(v), 0) FROM t") { [$0.int64(at: 0), $0.int64(at: 1)] }[0]
    }

    private func expectedSummary(_ values: ClosedRange<Int>) -> [Int64] {
        [Int64(values.count), Int64(values.reduce(0, +))]
    }

    /// Opens a copy of the database and its log without the shared-memory index: SQLite rebuilds the index from the
    /// log's frames, checking their checksums, so every commit must be complete in the file. Checks that the copy
    /// holds the rows `values` and passes `integrity_check`.
    private func expectRecoveredCopy(of path: String, holds values: ClosedRange<Int>) throws {
        let copy = try TemporaryDirectory()
        for suffix in ["", "-wal"] {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: copy.file("copy.sqlite") + suffix)
        }
        try withExtendedLifetime(copy) {
            let recovered = try open(copy.file("copy.sqlite"))
            #expect(try summary(recovered) == expectedSummary(values))
            #expect(try recovered.scalarText("PRAGMA integrity_check") == "ok")
        }
    }

    @Test func aCommitOfManyPagesIsOneWriteToTheLog() throws {
        let directory = try TemporaryDirectory()
        let connection = try open(directory.file("one-write.sqlite"))
        try connection.execute("CREATE TABLE t (v INTEGER NOT NULL, payload BLOB NOT NULL)")
        let before = try #require(connection.walWrites)
        try connection.transaction { try insert(connection, from: 1, count: 120) }
        let after = try #require(connection.walWrites)
        // About 20 pages: SQLite writes a header and a page for each, the VFS one buffer.
        #expect(after.sqliteWrites - before.sqliteWrites >= 40)
        #expect(after.fileWrites - before.fileWrites == 1)
    }

    /// With `synchronous=FULL` SQLite syncs the log at every commit: the buffer is written before.
    @Test(arguments: [1, 40, 3_000], [SQLiteSynchronousMode.normal, .full])
    func everyCommitIsReadByAnotherConnectionAndRecoveredFromTheFiles(
        rowsPerCommit: Int, synchronous: SQLiteSynchronousMode
    ) throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("commits.sqlite")
        let writer = try open(path, synchronous: synchronous)
        try writer.execute("CREATE TABLE t (v INTEGER NOT NULL, payload BLOB NOT NULL)")
        let reader = try open(path)
        var written = 0
        for _ in 0..<5 {
            try writer.transaction { try insert(writer, from: written + 1, count: rowsPerCommit) }
            written += rowsPerCommit
            #expect(try summary(reader) == expectedSummary(1...written))
        }
        // 3,000 rows (about 2 MB) are more than the VFS's buffer holds (120 KiB): several writes a commit.
        let writes = try #require(writer.walWrites)
        #expect(writes.fileWrites < writes.sqliteWrites)
        try expectRecoveredCopy(of: path, holds: 1...written)
    }

    @Test func aTransactionThatSpillsItsCacheRollsBackOrCommitsWhole() throws {
        struct Abandon: Error {}
        let directory = try TemporaryDirectory()
        let path = directory.file("spill.sqlite")
        // 20 pages of cache for about 500 pages of rows: frames go into the log before the commit, and pages already
        // there are written again in place (then SQLite rewrites the frames' checksums at the commit).
        let writer = try open(path, cachePages: 20)
        try writer.execute("CREATE TABLE t (v INTEGER NOT NULL, payload BLOB NOT NULL)")
        try writer.execute("CREATE INDEX t_by_v ON t (v)")
        let reader = try open(path)
        try writer.transaction { try insert(writer, from: 1, count: 10) }

        #expect(throws: Abandon.self) {
            try writer.transaction {
                try insert(writer, from: 11, count: 3_000)
                try writer.execute("UPDATE t SET v = v + 0 WHERE v % 7 = 0")
                throw Abandon()
            }
        }
        #expect(try summary(reader) == expectedSummary(1...10))
        #expect(try summary(writer) == expectedSummary(1...10))

        try writer.transaction {
            try insert(writer, from: 11, count: 3_000)
            try writer.execute("UPDATE t SET v = v + 0 WHERE v % 7 = 0")
        }
        try writer.transaction { try insert(writer, from: 3_011, count: 5) }
        #expect(try summary(reader) == expectedSummary(1...3_015))
        try expectRecoveredCopy(of: path, holds: 1...3_015)
    }

    @Test func aCheckpointedLogStartsOverAndKeepsBeingCoalesced() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("restart.sqlite")
        let writer = try open(path)
        try writer.execute("CREATE TABLE t (v INTEGER NOT NULL, payload BLOB NOT NULL)")
        let checkpointer = try open(path)
        var written = 0
        for round in 0..<4 {
            try writer.transaction { try insert(writer, from: written + 1, count: 60) }
            written += 60
            // Another connection empties the log; the writer's next commit starts it over at its header.
            try checkpointer.checkpoint(round.isMultiple(of: 2) ? .truncate : .passive)
            let before = try #require(writer.walWrites)
            try writer.transaction { try insert(writer, from: written + 1, count: 60) }
            written += 60
            let after = try #require(writer.walWrites)
            // The log's header, then the commit's frames in one write.
            #expect(after.fileWrites - before.fileWrites <= 2)
            #expect(try summary(checkpointer) == expectedSummary(1...written))
        }
        #expect(try writer.scalarText("PRAGMA integrity_check") == "ok")
    }
}
