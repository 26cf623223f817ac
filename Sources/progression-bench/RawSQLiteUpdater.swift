import CSQLite

/// The baseline of the writer comparison: a prepared UPDATE run in a loop straight against libsqlite3, as C would,
/// in the regime the store uses (WAL, `synchronous=NORMAL`, one `BEGIN IMMEDIATE` transaction per batch).
///
/// Ids are converted to C strings once, outside the timed loop, so the loop is bind, step, reset and nothing else.
final class RawSQLiteUpdater {
    private let database: OpaquePointer
    private let statement: OpaquePointer
    private let parameterCount: Int32

    /// Opens a second connection to the database at `path` and prepares `sql`, whose parameters are
    /// `?1` progress, `?2` step, `?3` updated_at, `?4` id and (when present) `?5` the owner guard.
    ///
    /// - Throws: ``BenchFailure`` when SQLite refuses.
    init(path: String, sql: String) throws {
        var handle: OpaquePointer?
        let code = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let handle else {
            sqlite3_close_v2(handle)
            throw BenchFailure("raw SQLite cannot open \(path): \(code)")
        }
        database = handle
        sqlite3_busy_timeout(handle, 5_000)
        var prepared: OpaquePointer?
        do {
            try Self.execute(handle, "PRAGMA journal_mode=WAL")
            try Self.execute(handle, "PRAGMA synchronous=NORMAL")
            let prepareCode = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
            guard prepareCode == SQLITE_OK, let prepared else {
                throw BenchFailure("raw SQLite cannot prepare: \(String(cString: sqlite3_errmsg(handle)))")
            }
            statement = prepared
        } catch {
            sqlite3_close_v2(handle)
            throw error
        }
        parameterCount = sqlite3_bind_parameter_count(statement)
    }

    deinit {
        sqlite3_finalize(statement)
        sqlite3_close_v2(database)
    }

    /// Updates the rows whose ids are `ids` in one transaction.
    ///
    /// - Throws: ``BenchFailure`` when a statement fails or a row is missing.
    func update(ids: ArraySlice<[CChar]>, progress: Double, step: [CChar], updatedAt: Int64, owner: [CChar]) throws {
        try Self.execute(database, "BEGIN IMMEDIATE")
        let transient = progression_sqlite_transient()
        for id in ids {
            sqlite3_bind_double(statement, 1, progress)
            step.withUnsafeBufferPointer { _ = sqlite3_bind_text(statement, 2, $0.baseAddress, -1, transient) }
            sqlite3_bind_int64(statement, 3, updatedAt)
            id.withUnsafeBufferPointer { _ = sqlite3_bind_text(statement, 4, $0.baseAddress, -1, transient) }
            if parameterCount >= 5 {
                owner.withUnsafeBufferPointer { _ = sqlite3_bind_text(statement, 5, $0.baseAddress, -1, transient) }
            }
            let code = sqlite3_step(statement)
            sqlite3_reset(statement)
            guard code == SQLITE_DONE, sqlite3_changes(database) == 1 else {
                try? Self.execute(database, "ROLLBACK")
                throw BenchFailure("raw UPDATE failed: \(code) \(String(cString: sqlite3_errmsg(database)))")
            }
        }
        try Self.execute(database, "COMMIT")
    }

    private static func execute(_ database: OpaquePointer, _ sql: String) throws {
        let code = sqlite3_exec(database, sql, nil, nil, nil)
        guard code == SQLITE_OK else {
            throw BenchFailure("raw SQLite '\(sql)' failed: \(String(cString: sqlite3_errmsg(database)))")
        }
    }
}
