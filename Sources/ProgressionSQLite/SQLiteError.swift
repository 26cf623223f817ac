import CSQLite

/// A result code of SQLite, extended or primary.
///
/// Match an error against a code with `catch SQLiteError.busy` or `if case SQLiteError.constraint = error`: a primary
/// code matches every extended code that belongs to it (`SQLITE_BUSY` matches `SQLITE_BUSY_SNAPSHOT`).
package struct SQLiteResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package let rawValue: Int32

    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// The primary code (the low 8 bits of an extended code). A code of this layer (``SQLiteError/schemaTooNew``,
    /// ``SQLiteError/foreignDatabase``) is its own primary code.
    package var primary: SQLiteResultCode {
        isOwnCode ? self : SQLiteResultCode(rawValue: rawValue & 0xFF)
    }

    /// Whether this is a code of this layer rather than one of SQLite's (which all fit in 16 bits).
    package var isOwnCode: Bool { rawValue >= 0x1_0000 }

    package var description: String {
        if self == SQLiteError.schemaTooNew { return "schema too new (code \(rawValue))" }
        if self == SQLiteError.foreignDatabase { return "another application's database (code \(rawValue))" }
        let text = sqlite3_errstr(rawValue).map { String(cString: $0) } ?? "unknown error"
        return "\(text) (code \(rawValue))"
    }

    /// Matches an error that is a ``SQLiteError`` with this code; a primary code matches its extended codes too.
    package static func ~= (pattern: SQLiteResultCode, error: any Error) -> Bool {
        guard let error = error as? SQLiteError else { return false }
        if pattern.rawValue == pattern.primary.rawValue {
            return error.code.primary == pattern
        }
        return error.code == pattern
    }
}

/// The one error type of the SQLite layer: the extended result code, SQLite's message, and where it happened (the
/// SQL being run and the database file).
package struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// The extended result code.
    package let code: SQLiteResultCode
    /// `sqlite3_errmsg` at the time of the failure, or a message of this layer.
    package let message: String
    /// The SQL statement that failed, if any.
    package let sql: String?
    /// The path of the database file, if known.
    package let path: String?

    package init(code: Int32, message: String, sql: String? = nil, path: String? = nil) {
        self.code = SQLiteResultCode(rawValue: code)
        self.message = message
        self.sql = sql
        self.path = path
    }

    package var description: String {
        var text = "SQLite error \(code.rawValue)"
        if let path { text += " on '\(path)'" }
        text += ": \(message)"
        if let sql { text += " (while running: \(sql.count > 200 ? String(sql.prefix(200)) + "…" : sql))" }
        return text
    }

    package static let error = SQLiteResultCode(rawValue: SQLITE_ERROR)
    package static let busy = SQLiteResultCode(rawValue: SQLITE_BUSY)
    package static let locked = SQLiteResultCode(rawValue: SQLITE_LOCKED)
    package static let readOnly = SQLiteResultCode(rawValue: SQLITE_READONLY)
    package static let interrupt = SQLiteResultCode(rawValue: SQLITE_INTERRUPT)
    package static let ioError = SQLiteResultCode(rawValue: SQLITE_IOERR)
    package static let corrupt = SQLiteResultCode(rawValue: SQLITE_CORRUPT)
    package static let cantOpen = SQLiteResultCode(rawValue: SQLITE_CANTOPEN)
    package static let constraint = SQLiteResultCode(rawValue: SQLITE_CONSTRAINT)
    package static let notADatabase = SQLiteResultCode(rawValue: SQLITE_NOTADB)
    package static let misuse = SQLiteResultCode(rawValue: SQLITE_MISUSE)
    package static let range = SQLiteResultCode(rawValue: SQLITE_RANGE)
    package static let tooBig = SQLiteResultCode(rawValue: SQLITE_TOOBIG)
    package static let full = SQLiteResultCode(rawValue: SQLITE_FULL)
    package static let noMemory = SQLiteResultCode(rawValue: SQLITE_NOMEM)
    package static let permission = SQLiteResultCode(rawValue: SQLITE_PERM)
    package static let lockProtocol = SQLiteResultCode(rawValue: SQLITE_PROTOCOL)
    package static let schemaChanged = SQLiteResultCode(rawValue: SQLITE_SCHEMA)
    /// Not a SQLite code: the database carries a schema this binary does not know.
    package static let schemaTooNew = SQLiteResultCode(rawValue: 0x1_0000)
    /// Not a SQLite code: the file is a SQLite database of another application (it has tables, none of ours).
    package static let foreignDatabase = SQLiteResultCode(rawValue: 0x2_0000)
}
