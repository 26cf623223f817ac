import Foundation

/// An error of a ``TaskStore``: what went wrong, with the database file and the underlying message.
///
/// ```swift
/// do { try await store.insert([record], events: []) }
/// catch let error as TaskStoreError where error.reason == .conflict { … }
/// ```
public struct TaskStoreError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    /// What kind of failure it is.
    public enum Reason: String, Sendable, Hashable, Codable {
        /// The file cannot be opened: a missing directory, a file that does not exist where one is required.
        case cannotOpen
        /// The file is not a SQLite database.
        case notADatabase
        /// The file is a SQLite database of another application: it has tables but no Progression schema. It is
        /// never migrated; it is left as it was.
        case foreignDatabase
        /// The file is damaged or truncated.
        case corrupt
        /// The file or its directory is read-only.
        case readOnly
        /// Another connection held the lock longer than the busy timeout.
        case busy
        /// The database was written by a newer version (it has migrations this binary does not know).
        case schemaTooNew
        /// A task with that identity exists.
        case conflict
        /// A value broke a rule of the schema (status, progress range, a missing parent).
        case constraint
        /// No task with that id.
        case notFound
        /// The operation was cancelled.
        case cancelled
        /// The database server cannot be reached, went away (a restart, a killed session, a dropped or cut
        /// connection) or did not answer within the call's deadline. Transient: the store connects again.
        case unavailable
        /// The database server refused the statement itself (its syntax, an object it names, a permission): trying
        /// again cannot help.
        case refused
        /// The storage under the database failed: a full disk, an I/O error, no memory. Transient: writes go on once
        /// it is freed or repaired.
        case storageFailure
        /// Any other failure of the database (a value that cannot be encoded, a statement too big, a misuse): final.
        case other
    }

    /// What kind of failure it is.
    public var reason: Reason
    /// The database file, when there is one.
    public var path: String?
    /// What happened, in words.
    public var message: String
    /// SQLite's extended result code, when the error came from SQLite.
    public var sqliteCode: Int32?

    /// An error of `reason` about the database at `path`.
    public init(_ reason: Reason, path: String? = nil, message: String, sqliteCode: Int32? = nil) {
        self.reason = reason
        self.path = path
        self.message = message
        self.sqliteCode = sqliteCode
    }

    /// The description for people.
    public var errorDescription: String? { description }

    /// What went wrong and where, e.g. "the database '/var/lib/tasks.sqlite' is locked by another process: …".
    public var description: String {
        let location = path.map { " '\($0)'" } ?? ""
        let summary: String =
            switch reason {
            case .cannotOpen: "cannot open the database\(location)"
            case .notADatabase, .foreignDatabase: "\(path.map { "'\($0)'" } ?? "the file") is not a Progression database"
            case .corrupt: "the database\(location) is damaged"
            case .readOnly: "the database\(location) is read-only"
            case .busy: "the database\(location) is locked by another process"
            case .schemaTooNew: "the database\(location) is newer than this program"
            case .conflict: "conflict in the database\(location)"
            case .constraint: "invalid data for the database\(location)"
            case .notFound: "not found in the database\(location)"
            case .cancelled: "database operation cancelled"
            case .unavailable: "the database\(location) is unavailable"
            case .refused: "the database\(location) refused the statement"
            case .storageFailure: "the storage of the database\(location) failed"
            case .other: "database error\(location)"
            }
        return "\(summary): \(message)"
    }
}

extension TaskStoreError {
    /// Whether the failure is the storage's state rather than the data's or the file's: a full disk, an I/O error, a
    /// lock held too long, a permission that may be given back, a database server out of reach. The executor waits
    /// and tries again after these; the others (a damaged or foreign file, a newer schema, a conflict, bad data, a
    /// statement the server refused, any other failure) are final.
    package var isTransient: Bool {
        switch reason {
        case .busy, .storageFailure, .readOnly, .cannotOpen, .unavailable: true
        case .notADatabase, .foreignDatabase, .corrupt, .schemaTooNew, .conflict, .constraint, .notFound, .cancelled,
            .refused, .other:
            false
        }
    }
}
