import Foundation
import Progression
#if PostgreSQL
import ProgressionPostgres
#endif

/// `--db` and `$PROGRESSION_DB` as a PostgreSQL URL (`postgres://user@host:port/db?schema=…`), for executors on
/// several hosts sharing one database.
enum DemoDatabase {
    /// Whether `location` names a PostgreSQL database rather than a file.
    static func isPostgres(_ location: String) -> Bool {
        let lowered = location.lowercased()
        return lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://")
    }

    /// The location for messages and logs: a URL without its password.
    static func displayName(_ location: String) -> String {
        #if PostgreSQL
        if isPostgres(location), let configuration = try? PostgresTaskStore.Configuration(url: location) {
            return configuration.displayURL
        }
        #endif
        return location
    }

    /// The PostgreSQL store of `url`, created and migrated when its schema is new.
    ///
    /// - Throws: ``DemoError`` naming the server, or saying that the demo was built without PostgreSQL.
    static func openPostgres(_ url: String) async throws -> any TaskStore {
        #if PostgreSQL
        do {
            // Runs in a task of its own for the process's life (the process ends with the command).
            return try await PostgresTaskStore.started(configuration: PostgresTaskStore.Configuration(url: url))
        } catch let error as TaskStoreError {
            throw DemoError(error.description)
        }
        #else
        throw DemoError(
            "'\(url.prefix(11))…' is a PostgreSQL URL, and this progression-demo was built without PostgreSQL "
                + "(build it with: swift build --traits PostgreSQL)")
        #endif
    }
}
