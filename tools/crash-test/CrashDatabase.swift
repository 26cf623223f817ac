import Foundation
import Progression
#if PostgreSQL
import ProgressionPostgres
import ProgressionPostgresTestSupport
#endif

/// The crash test's database: a SQLite file, or, with `run --postgres` (built with the `PostgreSQL` trait), a schema on
/// a PostgreSQL server that the test starts on this machine (`initdb` and `pg_ctl` in a temporary directory).
enum CrashDatabase {
    /// Whether `db` is a PostgreSQL URL rather than a file.
    static func isPostgres(_ db: String) -> Bool {
        db.lowercased().hasPrefix("postgres://") || db.lowercased().hasPrefix("postgresql://")
    }

    #if PostgreSQL
    /// The server of `run --postgres`, started once; it stops when this process ends.
    private static let server = Result { try LocalPostgresServer(durable: false) }
    #endif

    /// Starts a PostgreSQL server for the run and returns the URL of a new schema on it.
    ///
    /// - Throws: when this binary was built without PostgreSQL, or the server cannot start (saying what to install).
    static func startPostgres() throws -> String {
        #if PostgreSQL
        return try server.get().url(schema: "crash_\(UInt32.random(in: 0...UInt32.max))")
        #else
        throw CrashDatabaseError("--postgres needs a build with the PostgreSQL trait (swift build --traits PostgreSQL)")
        #endif
    }

    /// An executor on `db`.
    static func executor(db: String, configuration: TaskExecutor.Configuration) async throws -> TaskExecutor {
        guard isPostgres(db) else { return try TaskExecutor(path: db, configuration: configuration) }
        #if PostgreSQL
        return TaskExecutor(store: try await PostgresTaskStore.started(configuration: PostgresTaskStore.Configuration(url: db)), configuration: configuration)
        #else
        throw CrashDatabaseError("'\(db.prefix(11))…' needs a build with the PostgreSQL trait")
        #endif
    }

    /// The store of `db` for the final check, with the database's own integrity check (`["ok"]` when sound).
    static func open(_ db: String) async throws -> (store: any TaskStore, integrityCheck: () async throws -> [String]) {
        guard isPostgres(db) else {
            let store = try SQLiteTaskStore(path: db)
            return (store, { try await store.integrityCheck() })
        }
        #if PostgreSQL
        let store = try await PostgresTaskStore.started(configuration: PostgresTaskStore.Configuration(url: db))
        return (store, { try await store.integrityCheck() })
        #else
        throw CrashDatabaseError("'\(db.prefix(11))…' needs a build with the PostgreSQL trait")
        #endif
    }
}

/// A crash-test setup error, in words.
struct CrashDatabaseError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
