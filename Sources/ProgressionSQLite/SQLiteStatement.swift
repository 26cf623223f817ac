import CSQLite

/// A prepared statement. It owns its handle (finalized on deinit) and belongs to the connection that prepared it, so
/// it is never `Sendable`: it stays on the connection's executor.
///
/// Parameters are 1-based, columns 0-based, as in SQLite's C API. Text and blobs are bound with the transient
/// destructor, so SQLite copies them and the Swift value may go away at once.
package final class SQLiteStatement {
    let handle: OpaquePointer
    /// The SQL text, for error messages.
    package let sql: String
    /// Unowned: the connection keeps its cached statements, so a strong reference would be a cycle that keeps the
    /// database open forever. A statement must not outlive its connection.
    private unowned let connection: SQLiteConnection

    init(handle: OpaquePointer, sql: String, connection: SQLiteConnection) {
        self.handle = handle
        self.sql = sql
        self.connection = connection
    }

    deinit {
        sqlite3_finalize(handle)
    }

    /// The number of `?` parameters.
    package var parameterCount: Int32 { sqlite3_bind_parameter_count(handle) }

    // MARK: Binding

    /// Binds every parameter in order from `values`, after clearing earlier bindings.
    package func bind(_ values: [SQLiteValue]) throws {
        guard values.count == Int(parameterCount) else {
            throw SQLiteError(
                code: SQLITE_RANGE, message: "\(values.count) values for \(parameterCount) parameters",
                sql: sql, path: connection.path)
        }
        for (offset, value) in values.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    package func bind(_ value: SQLiteValue, at index: Int32) throws {
        switch value {
        case .null: try check(sqlite3_bind_null(handle, index))
        case .integer(let value): try check(sqlite3_bind_int64(handle, index, value))
        case .real(let value): try check(sqlite3_bind_double(handle, index, value))
        case .text(let value): try bind(value, at: index)
        case .blob(let value): try bind(value, at: index)
        }
    }

    package func bind(_ value: Int64, at index: Int32) throws {
        try check(sqlite3_bind_int64(handle, index, value))
    }

    package func bind(_ value: Double, at index: Int32) throws {
        try check(sqlite3_bind_double(handle, index, value))
    }

    package func bind(_ value: String, at index: Int32) throws {
        var value = value
        try value.withUTF8 { bytes in
            // An empty buffer may have no base address, which SQLite would bind as NULL: bind "" explicitly.
            guard bytes.count > 0 else {
                try check(sqlite3_bind_text(handle, index, "", 0, progression_sqlite_transient()))
                return
            }
            try bytes.withMemoryRebound(to: CChar.self) { characters in
                try check(
                    sqlite3_bind_text64(
                        handle, index, characters.baseAddress, UInt64(characters.count), progression_sqlite_transient(),
                        UInt8(SQLITE_UTF8)))
            }
        }
    }

    package func bind(_ value: [UInt8], at index: Int32) throws {
        try value.withUnsafeBytes { bytes in
            // A zero-length blob is bound as an empty blob, not as NULL.
            if bytes.isEmpty {
                try check(sqlite3_bind_zeroblob(handle, index, 0))
            } else {
                try check(
                    sqlite3_bind_blob64(
                        handle, index, bytes.baseAddress, UInt64(bytes.count), progression_sqlite_transient()))
            }
        }
    }

    package func bindNull(at index: Int32) throws {
        try check(sqlite3_bind_null(handle, index))
    }

    // MARK: Running

    /// Advances to the next row: `true` when a row is available, `false` when the statement is done.
    @discardableResult
    package func step() throws -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code:
            // The statement must be reset before its next use; the error of the step is the one to report.
            let error = connection.error(code: code, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Resets the statement so it can run again, and clears its bindings.
    package func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Binds `values`, runs the statement to completion and resets it.
    package func execute(_ values: [SQLiteValue] = []) throws {
        defer { reset() }
        try bind(values)
        while try step() {}
    }

    /// Binds `values`, runs the query and maps every row, then resets the statement.
    package func query<Row>(_ values: [SQLiteValue] = [], _ row: (SQLiteStatement) throws -> Row) throws -> [Row] {
        defer { reset() }
        try bind(values)
        var rows: [Row] = []
        while try step() {
            rows.append(try row(self))
        }
        return rows
    }

    // MARK: Columns

    package var columnCount: Int32 { sqlite3_column_count(handle) }

    package func columnName(at index: Int32) -> String {
        String(cString: sqlite3_column_name(handle, index))
    }

    package func isNull(at index: Int32) -> Bool {
        sqlite3_column_type(handle, index) == SQLITE_NULL
    }

    package func int64(at index: Int32) -> Int64 {
        sqlite3_column_int64(handle, index)
    }

    package func optionalInt64(at index: Int32) -> Int64? {
        isNull(at: index) ? nil : int64(at: index)
    }

    package func double(at index: Int32) -> Double {
        sqlite3_column_double(handle, index)
    }

    package func optionalDouble(at index: Int32) -> Double? {
        isNull(at: index) ? nil : double(at: index)
    }

    package func text(at index: Int32) -> String {
        guard let pointer = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    package func optionalText(at index: Int32) -> String? {
        isNull(at: index) ? nil : text(at: index)
    }

    package func blob(at index: Int32) -> [UInt8] {
        guard let pointer = sqlite3_column_blob(handle, index) else { return [] }
        let count = Int(sqlite3_column_bytes(handle, index))
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    package func optionalBlob(at index: Int32) -> [UInt8]? {
        isNull(at: index) ? nil : blob(at: index)
    }

    /// The value of a column in its storage class.
    package func value(at index: Int32) -> SQLiteValue {
        switch sqlite3_column_type(handle, index) {
        case SQLITE_INTEGER: .integer(int64(at: index))
        case SQLITE_FLOAT: .real(double(at: index))
        case SQLITE_TEXT: .text(text(at: index))
        case SQLITE_BLOB: .blob(blob(at: index))
        default: .null
        }
    }

    private func check(_ code: Int32) throws {
        guard code == SQLITE_OK else { throw connection.error(code: code, sql: sql) }
    }
}

@available(*, unavailable)
extension SQLiteStatement: Sendable {}
