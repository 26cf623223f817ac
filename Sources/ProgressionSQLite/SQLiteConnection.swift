import CSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How a connection is opened and configured.
package struct SQLiteConnectionOptions: Sendable {
    /// Open for reading only; the file must exist.
    package var readOnly = false
    /// Create the file (mode 0600) when it does not exist. Ignored when `readOnly`.
    package var create = true
    /// How long a statement waits for a lock held by another connection before it fails with `SQLITE_BUSY`.
    package var busyTimeout: Duration = .seconds(5)
    /// `synchronous=NORMAL` (durable across a process crash in WAL mode) or `FULL` (also across a power loss).
    package var synchronous: SQLiteSynchronousMode = .normal

    package init() {}
}

/// SQLite's `PRAGMA synchronous` settings that are meaningful with WAL.
package enum SQLiteSynchronousMode: String, Sendable, Codable {
    case normal = "NORMAL"
    case full = "FULL"
}

/// One connection to a database file.
///
/// A connection is confined to one serial executor (the actor that owns it): it is opened with
/// `SQLITE_OPEN_NOMUTEX` and never `Sendable`. The one thing other threads may do is interrupt it, through
/// ``interruptHandle``.
///
/// At open it turns extended result codes on, sets a finite busy timeout, switches to WAL (and checks that SQLite
/// reports `wal`), sets `synchronous`, and turns foreign keys on.
package final class SQLiteConnection {
    /// The path of the database file.
    package let path: String
    let handle: OpaquePointer
    /// Interrupts the statement running on this connection from any thread.
    package let interruptHandle: SQLiteInterruptHandle
    private var statementCache: [String: SQLiteStatement] = [:]
    private var transactionDepth = 0

    /// Opens (and, by default, creates) the database at `path`.
    ///
    /// - Throws: ``SQLiteError`` naming the file when it cannot be opened, is not a database, is truncated, is
    ///   read-only while writing was asked for, or when WAL cannot be enabled. The file is not modified then.
    package init(path: String, options: SQLiteConnectionOptions = .init()) throws {
        self.path = path
        try Self.checkFile(path: path, options: options)

        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        flags |= options.readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        var db: OpaquePointer?
        let code = sqlite3_open_v2(path, &db, flags, nil)
        guard code == SQLITE_OK, let db else {
            let message = db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) } ?? "cannot open"
            sqlite3_close_v2(db)
            throw SQLiteError(code: code, message: message, path: path)
        }
        handle = db
        interruptHandle = SQLiteInterruptHandle(handle: db)
        do {
            try configure(options: options)
        } catch {
            close()
            throw error
        }
    }

    deinit {
        close()
    }

    /// Closes the connection. Idempotent; later calls on the connection are a programming error.
    package func close() {
        guard interruptHandle.invalidate() else { return }
        statementCache.removeAll()
        sqlite3_close_v2(handle)
    }

    private func configure(options: SQLiteConnectionOptions) throws {
        sqlite3_extended_result_codes(handle, 1)
        let milliseconds = options.busyTimeout.components.seconds * 1000
            + options.busyTimeout.components.attoseconds / 1_000_000_000_000_000
        sqlite3_busy_timeout(handle, Int32(clamping: milliseconds))
        progression_sqlite_disable_dqs(handle)
        progression_sqlite_enable_defensive(handle)

        // The first read of the file: a file that is not a database fails here, before anything is written.
        _ = try scalarInt("PRAGMA schema_version")
        if !options.readOnly {
            let mode = try scalarText("PRAGMA journal_mode=WAL")
            guard mode?.lowercased() == "wal" else {
                throw SQLiteError(
                    code: SQLITE_ERROR, message: "journal_mode=WAL was refused (SQLite reports '\(mode ?? "nothing")')",
                    path: path)
            }
        }
        try execute("PRAGMA synchronous=\(options.synchronous.rawValue)")
        try execute("PRAGMA foreign_keys=ON")
    }

    /// Checks what SQLite would otherwise report late or not at all: a missing directory, a file or directory that is
    /// not writable (also for root, who SQLite would let write a file marked read-only), a truncated file.
    private static func checkFile(path: String, options: SQLiteConnectionOptions) throws {
        func fail(_ code: Int32, _ message: String) -> SQLiteError {
            SQLiteError(code: code, message: message, path: path)
        }
        var info = stat()
        var exists = stat(path, &info) == 0
        let directory = parentDirectory(of: path)
        if !exists {
            exists = try createFile(path: path, directory: directory, options: options, fail: fail)
            guard exists else { return }
            // Another process created it first: check it as an existing file.
            guard stat(path, &info) == 0 else { throw fail(SQLITE_CANTOPEN, "the database file vanished") }
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw fail(SQLITE_CANTOPEN, "not a regular file")
        }
        if !options.readOnly {
            guard isWritable(path, mode: info.st_mode) else {
                throw fail(SQLITE_READONLY, "the database file is read-only")
            }
            var directoryInfo = stat()
            if stat(directory, &directoryInfo) == 0, !isWritable(directory, mode: directoryInfo.st_mode) {
                throw fail(SQLITE_READONLY, "the directory '\(directory)' is not writable (WAL needs to create files)")
            }
        }
        try checkHeader(path: path, size: Int64(info.st_size), fail: fail)
    }

    /// Creates the database file with mode 0600 (SQLite gives the -wal and -shm files the mode of the database file).
    /// Returns `true` when another process created it first.
    private static func createFile(
        path: String, directory: String, options: SQLiteConnectionOptions, fail: (Int32, String) -> SQLiteError
    ) throws -> Bool {
        guard !options.readOnly, options.create else {
            throw fail(SQLITE_CANTOPEN, "the database file does not exist")
        }
        var directoryInfo = stat()
        guard stat(directory, &directoryInfo) == 0, (directoryInfo.st_mode & S_IFMT) == S_IFDIR else {
            throw fail(SQLITE_CANTOPEN, "the directory '\(directory)' does not exist")
        }
        guard isWritable(directory, mode: directoryInfo.st_mode) else {
            throw fail(SQLITE_READONLY, "the directory '\(directory)' is not writable")
        }
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor < 0 {
            if errno == EEXIST { return true }
            let reason = String(cString: strerror(errno))
            throw fail(SQLITE_CANTOPEN, "cannot create the database file: \(reason)")
        }
        Glibc.close(descriptor)
        return false
    }

    /// A file or directory is writable when the process may write it and someone may: a file whose mode has no write
    /// bit at all was marked read-only on purpose, which root would otherwise override.
    private static func isWritable(_ path: String, mode: mode_t) -> Bool {
        access(path, W_OK) == 0 && (mode & 0o222) != 0
    }

    private static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }

    /// Reads the 100-byte header: the magic string, and the size the header records against the file's size (a
    /// truncated file). A file shorter than a header is left to SQLite (an empty file is a new database).
    private static func checkHeader(path: String, size: Int64, fail: (Int32, String) -> SQLiteError) throws {
        // A file shorter than the header is new (or being created by another process), or SQLite refuses it.
        guard size >= 100 else { return }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { Glibc.close(descriptor) }
        var header = [UInt8](repeating: 0, count: 100)
        let count = header.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, 100) }
        let magic = Array("SQLite format 3".utf8) + [0]
        guard count == 100, Array(header[0..<16]) == magic else {
            throw fail(SQLITE_NOTADB, "file is not a database")
        }
        func bigEndian(_ offset: Int, _ width: Int) -> Int64 {
            header[offset..<offset + width].reduce(0) { $0 << 8 | Int64($1) }
        }
        var pageSize = bigEndian(16, 2)
        if pageSize == 1 { pageSize = 65536 }
        let pageCount = bigEndian(28, 4)
        let changeCounter = bigEndian(24, 4)
        let versionValidFor = bigEndian(92, 4)
        // The in-header size is valid only when written by a version that maintains it. While a WAL file exists, a
        // checkpoint may have been cut short and the WAL still holds the pages, so the file may be shorter.
        var walInfo = stat()
        let hasWAL = stat(path + "-wal", &walInfo) == 0 && walInfo.st_size > 0
        if changeCounter == versionValidFor, pageCount > 0, !hasWAL, size < pageCount * pageSize {
            throw fail(
                SQLITE_CORRUPT,
                "the database file is truncated: \(size) bytes, its header records \(pageCount * pageSize)")
        }
    }

    // MARK: Statements

    /// Prepares one statement. The SQL must hold exactly one statement.
    package func prepare(_ sql: String, persistent: Bool = false) throws -> SQLiteStatement {
        var statement: OpaquePointer?
        var tail: UnsafePointer<CChar>?
        let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        let code = sql.withCString { sqlite3_prepare_v3(handle, $0, -1, flags, &statement, &tail) }
        guard code == SQLITE_OK else { throw error(code: code, sql: sql) }
        guard let statement else {
            throw SQLiteError(code: SQLITE_MISUSE, message: "no statement in the SQL", sql: sql, path: path)
        }
        return SQLiteStatement(handle: statement, sql: sql, connection: self)
    }

    /// A prepared statement kept for the life of the connection, for SQL that runs often.
    package func cachedStatement(_ sql: String) throws -> SQLiteStatement {
        if let statement = statementCache[sql] { return statement }
        let statement = try prepare(sql, persistent: true)
        statementCache[sql] = statement
        return statement
    }

    /// Runs SQL text that may hold several statements, each in turn (a migration file), walking the tail pointer.
    package func execute(_ sql: String) throws {
        try sql.withCString { start in
            var next: UnsafePointer<CChar>? = start
            while let current = next, current.pointee != 0 {
                var statement: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                let code = sqlite3_prepare_v3(handle, current, -1, 0, &statement, &tail)
                guard code == SQLITE_OK else { throw error(code: code, sql: String(cString: current)) }
                next = tail
                guard let statement else { continue }  // white space or a comment
                defer { sqlite3_finalize(statement) }
                var stepCode: Int32
                repeat { stepCode = sqlite3_step(statement) } while stepCode == SQLITE_ROW
                guard stepCode == SQLITE_DONE else {
                    throw error(code: stepCode, sql: String(cString: sqlite3_sql(statement)))
                }
            }
        }
    }

    /// Runs one statement with parameters.
    package func execute(_ sql: String, _ values: [SQLiteValue]) throws {
        try cachedStatement(sql).execute(values)
    }

    /// Runs a query and maps its rows.
    package func query<Row>(
        _ sql: String, _ values: [SQLiteValue] = [], _ row: (SQLiteStatement) throws -> Row
    ) throws -> [Row] {
        try cachedStatement(sql).query(values, row)
    }

    package func scalarInt(_ sql: String, _ values: [SQLiteValue] = []) throws -> Int64? {
        try query(sql, values) { $0.optionalInt64(at: 0) }.first ?? nil
    }

    package func scalarText(_ sql: String, _ values: [SQLiteValue] = []) throws -> String? {
        try query(sql, values) { $0.optionalText(at: 0) }.first ?? nil
    }

    /// The number of rows changed by the last INSERT, UPDATE or DELETE.
    package var changes: Int { Int(sqlite3_changes64(handle)) }

    package var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Whether a transaction is open on this connection.
    package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    // MARK: Transactions

    /// Runs `body` in a transaction, `BEGIN IMMEDIATE` by default so that the write lock is taken (or the busy timeout
    /// runs out) before any work is done. Commits when `body` returns, rolls back when it throws. Nested calls become
    /// savepoints.
    package func transaction<T>(immediate: Bool = true, _ body: () throws -> T) throws -> T {
        if transactionDepth > 0 {
            return try savepoint(body)
        }
        try execute(immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED")
        transactionDepth += 1
        defer { transactionDepth -= 1 }
        let value: T
        do {
            value = try body()
            try execute("COMMIT")
        } catch {
            if isInTransaction { try? execute("ROLLBACK") }
            throw error
        }
        return value
    }

    /// Runs `body` in a savepoint: its changes are undone if it throws, without ending the enclosing transaction.
    package func savepoint<T>(_ body: () throws -> T) throws -> T {
        let name = "progression_\(transactionDepth)"
        try execute("SAVEPOINT \(name)")
        transactionDepth += 1
        defer { transactionDepth -= 1 }
        do {
            let value = try body()
            try execute("RELEASE \(name)")
            return value
        } catch {
            try? execute("ROLLBACK TO \(name)")
            try? execute("RELEASE \(name)")
            throw error
        }
    }

    func error(code: Int32, sql: String?) -> SQLiteError {
        let message = String(cString: sqlite3_errmsg(handle))
        let extended = sqlite3_extended_errcode(handle)
        // sqlite3_errmsg describes the latest failure; prefer its extended code when it refines `code`.
        let effective = (extended & 0xFF) == (code & 0xFF) ? extended : code
        return SQLiteError(code: effective, message: message, sql: sql, path: path)
    }
}

@available(*, unavailable)
extension SQLiteConnection: Sendable {}
