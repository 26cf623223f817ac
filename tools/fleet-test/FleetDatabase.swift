import Foundation
import Progression
#if PostgreSQL
import ProgressionPostgres
#endif

/// The database of a fleet process: a SQLite file, or a `postgres://` URL (with the `PostgreSQL` trait).
enum FleetDatabase {
    static func isPostgres(_ db: String) -> Bool {
        db.lowercased().hasPrefix("postgres://") || db.lowercased().hasPrefix("postgresql://")
    }

    /// An executor on `db`.
    static func executor(db: String, configuration: TaskExecutor.Configuration) async throws -> TaskExecutor {
        guard isPostgres(db) else { return try TaskExecutor(path: db, configuration: configuration) }
        #if PostgreSQL
        return TaskExecutor(store: try await PostgresTaskStore.started(configuration: .init(url: db)), configuration: configuration)
        #else
        throw FleetError("'\(db.prefix(11))…' needs a build with the PostgreSQL trait")
        #endif
    }

    /// A producer on `db`.
    static func client(db: String) async throws -> JobClient {
        guard isPostgres(db) else { return JobClient(store: try SQLiteTaskStore(path: db)) }
        #if PostgreSQL
        return JobClient(store: try await PostgresTaskStore.started(configuration: .init(url: db)))
        #else
        throw FleetError("'\(db.prefix(11))…' needs a build with the PostgreSQL trait")
        #endif
    }
}

/// A fleet process's error, in words.
struct FleetError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
