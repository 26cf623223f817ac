import Foundation
import ProgressionSQLite
import ProgressionTestSupport
import Synchronization
import Testing

struct SQLiteConnectionTests {
    private func withConnection(_ body: (SQLiteConnection, String) throws -> Void) throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("test.sqlite")
        let connection = try SQLiteConnection(path: path)
        try body(connection, path)
    }

    @Test func settingsAtOpen() throws {
        try withConnection { connection, _ in
            let mode = try connection.scalarText("PRAGMA journal_mode")
            let synchronous = try connection.scalarInt("PRAGMA synchronous")
            let foreignKeys = try connection.scalarInt("PRAGMA foreign_keys")
            #expect(mode == "wal")
            #expect(synchronous == 1)  // NORMAL
            #expect(foreignKeys == 1)
        }
        var options = SQLiteConnectionOptions()
        options.synchronous = .full
        let directory = try TemporaryDirectory()
        let full = try SQLiteConnection(path: directory.file("full.sqlite"), options: options)
        #expect(try full.scalarInt("PRAGMA synchronous") == 2)  // FULL
    }

    /// The prepared statements a connection keeps are bounded: SQL texts that differ by their number of `?` (a batch's
    /// list of ids) would otherwise each stay prepared for the life of the connection. The least recently used goes
    /// first; a statement a caller holds stays usable after the cache dropped it.
    @Test func theStatementCacheKeepsAtMostItsCapacityLeastRecentlyUsedFirst() throws {
        try withConnection { connection, _ in
            try connection.execute("CREATE TABLE t (x INTEGER)")
            let held = try connection.cachedStatement("INSERT INTO t (x) VALUES (?)")
            let capacity = SQLiteConnection.statementCacheCapacity
            for count in 1...(capacity * 3) {
                let list = Array(repeating: "?", count: count).joined(separator: ", ")
                _ = try connection.query("SELECT count(*) FROM t WHERE x IN (\(list))", Array(repeating: .integer(1), count: count)) {
                    $0.int64(at: 0)
                }
                // A text used all along is never the least recently used.
                _ = try connection.scalarInt("SELECT count(*) FROM t")
                #expect(connection.cachedStatementCount <= capacity)
            }
            #expect(connection.cachedStatementCount == capacity)
            try held.execute([.integer(7)])
            #expect(try connection.scalarInt("SELECT count(*) FROM t") == 1)
        }
    }

    @Test func everyStorageClassRoundTripsThroughBindAndColumns() throws {
        try withConnection { connection, _ in
            try connection.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n ANY) STRICT")
            let text = "quote ' \" back\\slash, emoji 🧵, 中文, " + String(repeating: "é", count: 600_000)
            let values: [SQLiteValue] = [.integer(.min), .real(-0.5), .text(text), .blob([0, 0, 255, 7]), .null]
            try connection.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", values)
            try connection.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", [.integer(1), .real(.infinity), "", .blob([]), 3])
            let rows = try connection.query("SELECT i, r, s, b, n FROM t ORDER BY rowid") { row in
                (0..<row.columnCount).map { row.value(at: $0) }
            }
            #expect(rows[0] == values)
            #expect(rows[1] == [.integer(1), .real(.infinity), .text(""), .blob([]), .integer(3)])
        }
    }

    @Test func aTransactionRollsBackWhenItsBodyThrowsAndSavepointsNest() throws {
        struct Failure: Error {}
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection(path: directory.file("tx.sqlite"))
        try connection.execute("CREATE TABLE t (v INTEGER NOT NULL)")
        #expect(throws: Failure.self) {
            try connection.transaction {
                try connection.execute("INSERT INTO t VALUES (1)", [])
                throw Failure()
            }
        }
        #expect(try connection.scalarInt("SELECT count(*) FROM t") == 0)
        #expect(!connection.isInTransaction)
        try connection.transaction {
            try connection.execute("INSERT INTO t VALUES (1)", [])
            do {
                try connection.transaction {  // a savepoint
                    try connection.execute("INSERT INTO t VALUES (2)", [])
                    throw Failure()
                }
            } catch is Failure {
                // Undone, and the transaction goes on.
            }
            try connection.execute("INSERT INTO t VALUES (3)", [])
        }
        #expect(try connection.query("SELECT v FROM t ORDER BY v") { $0.int64(at: 0) } == [1, 3])
        #expect(!connection.isInTransaction)
    }

    @Test func errorsCarryTheExtendedCodeTheMessageAndTheSQL() throws {
        try withConnection { connection, path in
            try connection.execute("CREATE TABLE t (v INTEGER PRIMARY KEY)")
            try connection.execute("INSERT INTO t VALUES (1)", [])
            do {
                try connection.execute("INSERT INTO t VALUES (1)", [])
                Issue.record("a duplicate key must fail")
            } catch SQLiteError.constraint {
                // Matched by its primary code.
            }
            do {
                try connection.execute("INSERT INTO t VALUES (1)", [])
            } catch let error as SQLiteError {
                #expect(error.code.rawValue == 1555)  // SQLITE_CONSTRAINT_PRIMARYKEY
                #expect(error.message.contains("UNIQUE constraint failed"))
                #expect(error.sql == "INSERT INTO t VALUES (1)")
                #expect(error.path == path)
            }
            #expect(throws: SQLiteError.self) { try connection.execute("SELEC nothing") }
        }
    }

    @Test func aMultiStatementScriptRunsWhole() throws {
        try withConnection { connection, _ in
            try connection.execute(
                """
                -- a comment
                CREATE TABLE a (v INTEGER);
                INSERT INTO a VALUES (1);  INSERT INTO a VALUES (2);
                /* another */
                """)
            #expect(try connection.scalarInt("SELECT sum(v) FROM a") == 3)
        }
    }

    /// The statement and the interrupter each run on a thread of their own, not on the concurrency pool: the
    /// statement blocks its thread until it is interrupted, and on a 2-core machine the pool has two threads. (Run on
    /// the pool under a loaded parallel run, the interrupter once got no thread before its deadline, the statement
    /// started after its last interrupt and ran on, and every other test in the process stalled.) The interrupter
    /// interrupts until the statement has ended, since a first interrupt may land before it starts; the statement is
    /// finite (a billion rows, minutes), so a broken interrupt fails the test instead of hanging it.
    @Test func interruptingStopsARunningStatement() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("interrupt.sqlite")
        final class Shared: Sendable {
            let handle = Mutex<SQLiteInterruptHandle?>(nil)
            let ended = Atomic<Bool>(false)
        }
        let shared = Shared()
        let code: Int32? = try await withCheckedThrowingContinuation { continuation in
            Thread {
                defer { shared.ended.store(true, ordering: .releasing) }
                do {
                    let connection = try SQLiteConnection(path: path)
                    shared.handle.withLock { $0 = connection.interruptHandle }
                    _ = try connection.scalarInt(
                        """
                        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000000)
                        SELECT count(*) FROM n
                        """)
                    continuation.resume(returning: nil)
                } catch let error as SQLiteError {
                    continuation.resume(returning: error.code.rawValue)
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
            Thread {
                while !shared.ended.load(ordering: .acquiring) {
                    shared.handle.withLock { $0?.interrupt() }
                    usleep(5_000)
                }
            }.start()
        }
        #expect(code == 9)  // SQLITE_INTERRUPT
    }

    @Test func aMigrationIsAppliedOnceAndAnUnknownOneIsRefused() throws {
        try withConnection { connection, _ in
            let first = SQLiteMigration(identifier: "0001_a", sql: "CREATE TABLE a (v INTEGER);")
            let second = SQLiteMigration(identifier: "0002_b", sql: "CREATE TABLE b (v INTEGER);")
            #expect(try SQLiteMigrator(migrations: [first]).migrate(connection, now: 0) == ["0001_a"])
            #expect(try SQLiteMigrator(migrations: [second, first]).migrate(connection, now: 0) == ["0002_b"])
            #expect(try SQLiteMigrator(migrations: [first, second]).migrate(connection, now: 0) == [])
            do {
                try SQLiteMigrator(migrations: [first]).migrate(connection, now: 0)
                Issue.record("a database with an unknown migration must be refused")
            } catch let error as SQLiteError {
                #expect(error.code == SQLiteError.schemaTooNew)
                #expect(error.message.contains("0002_b"))
            }
            let edited = SQLiteMigration(identifier: "0001_a", sql: "CREATE TABLE a (v TEXT);")
            #expect(throws: SQLiteError.self) { try SQLiteMigrator(migrations: [edited, second]).migrate(connection, now: 0) }
            // A failing migration leaves no trace.
            let broken = SQLiteMigration(identifier: "0003_c", sql: "CREATE TABLE c (v INTEGER); CREATE TABLE a (v INTEGER);")
            #expect(throws: SQLiteError.self) { try SQLiteMigrator(migrations: [first, second, broken]).migrate(connection, now: 0) }
            #expect(try connection.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'c'") == 0)
            #expect(try SQLiteMigrator(migrations: [first, second]).appliedMigrations(in: connection).count == 2)
        }
    }
}

/// The commit hook that replaces SQLite's automatic checkpoint.
struct SQLiteCheckpointPolicyTests {
    private func withConnection(_ body: (SQLiteConnection, String) throws -> Void) throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("test.sqlite")
        try body(try SQLiteConnection(path: path), path)
    }

    /// Writes `pages` new pages of 4 KiB, one transaction each.
    private func write(pages: Int, to connection: SQLiteConnection) throws {
        let blob = SQLiteValue.blob([UInt8](repeating: 7, count: 4000))
        for _ in 0..<pages { try connection.execute("INSERT INTO t (b) VALUES (?)", [blob]) }
    }

    private static func walFrames(_ path: String) -> Int {
        let bytes = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        return bytes <= 32 ? 0 : (bytes - 32) / (4096 + 24)
    }

    @Test func commitsPastTheHandOffThresholdAskForACheckpointAndNoneRunsInTheCommit() throws {
        try withConnection { connection, path in
            try connection.execute("CREATE TABLE t (b BLOB)")
            let asked = Atomic<Int>(0)
            connection.checkpointAfterCommits(handOff: 50, inline: 10_000) { asked.add(1, ordering: .relaxed) }
            try write(pages: 10, to: connection)
            #expect(Self.walFrames(path) < 50)
            #expect(asked.load(ordering: .relaxed) == 0, "under 50 frames nothing is asked")
            try write(pages: 200, to: connection)
            // Once per 50 frames the log grew, not at every commit past 50 (200 commits of about 2 frames).
            let frames = Self.walFrames(path)
            #expect(asked.load(ordering: .relaxed) > 0)
            #expect(asked.load(ordering: .relaxed) <= frames / 50, "\(asked.load(ordering: .relaxed)) asks for \(frames) frames")
            // Nobody checkpointed: SQLite's automatic checkpoint (1,000 frames) is off, the log keeps every frame.
            try write(pages: 1_200, to: connection)
            #expect(Self.walFrames(path) >= 1_400)
        }
    }

    @Test func commitsPastTheInlineThresholdCheckpointThemselvesSoThatTheLogStaysBounded() throws {
        try withConnection { connection, path in
            try connection.execute("CREATE TABLE t (b BLOB)")
            connection.checkpointAfterCommits(handOff: 20, inline: 100) {}
            try write(pages: 1_000, to: connection)
            // Each commit past 100 frames copied the log back, and the next one started it over.
            #expect(Self.walFrames(path) <= 110, "\(Self.walFrames(path)) frames in the log")
            let result = try connection.checkpoint(.truncate)
            #expect(result.logFrames == 0)
            #expect(Self.walFrames(path) == 0)
        }
    }
}
