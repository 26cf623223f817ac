import Foundation
import Progression
#if PostgreSQL
import ProgressionPostgres
#endif

/// The store progressctl and the console work on: a SQLite file or, with the `PostgreSQL` trait, a PostgreSQL schema named by a
/// `postgres://` URL. Commands see one concrete type whatever the database is; what only one kind of database has
/// (SQLite's integrity check, its file) is asked through the capabilities below.
package final class OperatorStore: TaskStoreForwarding {
    /// The database as the user named it: a file's path, or a URL.
    package let location: String
    private let base: any TaskStoreBackend
    /// The SQLite store, when the database is a file.
    package let sqlite: SQLiteTaskStore?

    package init(sqlite store: SQLiteTaskStore) {
        base = store
        sqlite = store
        location = store.path
    }

    package init(base: any TaskStoreBackend, location: String) {
        self.base = base
        sqlite = nil
        self.location = location
    }

    /// Whether the database is a file (whose identity `watch` checks while it runs).
    package var isFile: Bool { sqlite != nil }

    /// The database's own consistency check: lines of problems, `["ok"]` when there are none.
    package func integrityCheck() async throws -> [String] {
        if let sqlite { return try await sqlite.integrityCheck() }
        #if PostgreSQL
        if let postgres = base as? PostgresTaskStore { return try await postgres.integrityCheck() }
        #endif
        return ["ok"]
    }

    /// The migrations recorded in the database, in order.
    package func schemaVersion() async throws -> [String] {
        if let sqlite { return try await sqlite.schemaVersion() }
        #if PostgreSQL
        if let postgres = base as? PostgresTaskStore { return try await postgres.schemaVersion() }
        #endif
        return []
    }

    /// The database's size on disk: a SQLite file with its log, or a PostgreSQL schema's tables and indexes; 0 when
    /// it cannot be read.
    package func databaseBytes() async -> Int64 {
        if let sqlite { return Self.fileBytes(sqlite.path) }
        return (try? await base.statistics().databaseBytes) ?? 0
    }

    /// The size of a database file and its write-ahead log.
    package static func fileBytes(_ path: String) -> Int64 {
        [path, path + "-wal"].reduce(0) { total, file in
            let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.int64Value
            return total + (size ?? 0)
        }
    }

    /// ``rootOutcomes(after:since:)`` of a store that is not a file.
    func baseOutcomes(after cursor: RootOutcomeCursor?, since date: Date) async throws -> RootOutcomePage? {
        #if PostgreSQL
        if let postgres = base as? PostgresTaskStore { return try await postgres.rootOutcomes(after: cursor, since: date) }
        #endif
        return nil
    }

    /// Every call of the store's protocols goes to the store it opened.
    package func forward<T: Sendable>(
        _ call: ForwardedCall, _ body: @Sendable (any TaskStoreBackend) async throws -> T
    ) async throws -> T {
        try await body(base)
    }
}

/// `--db` and `$PROGRESSION_DB` as a PostgreSQL URL.
package enum DatabaseURL {
    /// Whether `location` names a PostgreSQL database rather than a file.
    package static func isPostgres(_ location: String) -> Bool {
        let lowered = location.lowercased()
        return lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://")
    }

    /// The store of a PostgreSQL URL; never creates the schema. It connects on its first call, whose failure (no
    /// server, no schema) is reported like any store error.
    ///
    /// - Parameter connections: the most connections the store opens (one of them listens for changes).
    /// - Throws: ``CLIError`` for a malformed URL, or when progressctl was built without PostgreSQL.
    package static func openPostgres(_ url: String, readOnly: Bool, connections: Int = 2) throws -> OperatorStore {
        #if PostgreSQL
        do {
            var configuration = try PostgresTaskStore.Configuration(url: url)
            configuration.createIfMissing = false
            configuration.readOnly = readOnly
            configuration.maximumConnections = max(2, connections)
            return OperatorStore(
                base: try PostgresTaskStore.start(configuration: configuration), location: configuration.displayURL)
        } catch let error as TaskStoreError {
            throw CLIError(store: error)
        }
        #else
        throw CLIError(
            "'\(url.prefix(11))…' is a PostgreSQL URL, and this progressctl was built without PostgreSQL "
                + "(build it with: swift build --traits PostgreSQL)")
        #endif
    }
}
