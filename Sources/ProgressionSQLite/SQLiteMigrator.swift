import CSQLite

/// One schema migration: an identifier that sorts in order (`0001_initial`) and its SQL.
package struct SQLiteMigration: Sendable, Hashable {
    package let identifier: String
    package let sql: String

    package init(identifier: String, sql: String) {
        self.identifier = identifier
        self.sql = sql
    }

    /// FNV-1a 64 of the SQL, recorded with the migration so that an edited migration is noticed.
    package var checksum: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in sql.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// Applies migrations in order, each in its own immediate transaction together with the row that records it.
///
/// A database that records a migration this binary does not know was written by a newer version: it is refused with
/// ``SQLiteError`` (`schemaTooNew`) and not modified. So is one whose record of a known migration has another checksum
/// (a migration edited after it landed).
package struct SQLiteMigrator: Sendable {
    package let migrations: [SQLiteMigration]

    package init(migrations: [SQLiteMigration]) {
        self.migrations = migrations.sorted { $0.identifier < $1.identifier }
    }

    /// The identifiers recorded in the database, in order; empty for a new database.
    package func appliedMigrations(in connection: SQLiteConnection) throws -> [(identifier: String, checksum: String)] {
        let hasTable = try connection.scalarInt(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'") ?? 0
        guard hasTable > 0 else { return [] }
        return try connection.query("SELECT identifier, checksum FROM schema_migrations ORDER BY identifier") {
            (identifier: $0.text(at: 0), checksum: $0.text(at: 1))
        }
    }

    /// Checks that the database holds nothing this binary does not know, and returns the migrations still to apply.
    package func pendingMigrations(in connection: SQLiteConnection) throws -> [SQLiteMigration] {
        let applied = try appliedMigrations(in: connection)
        let known = Dictionary(uniqueKeysWithValues: migrations.map { ($0.identifier, $0) })
        let unknown = applied.filter { known[$0.identifier] == nil }.map(\.identifier)
        guard unknown.isEmpty else {
            throw SQLiteError(
                code: SQLiteError.schemaTooNew.rawValue,
                message: "the database was written by a newer version of Progression: it has migration(s) "
                    + "\(unknown.joined(separator: ", ")) that this binary does not know "
                    + "(it knows up to \(migrations.last?.identifier ?? "none")); upgrade the binary",
                path: connection.path)
        }
        for record in applied where known[record.identifier]?.checksum != record.checksum {
            throw SQLiteError(
                code: SQLiteError.schemaTooNew.rawValue,
                message: "migration \(record.identifier) in the database differs from the one in this binary "
                    + "(checksum \(record.checksum), expected \(known[record.identifier]?.checksum ?? "?"))",
                path: connection.path)
        }
        let appliedIdentifiers = Set(applied.map(\.identifier))
        return migrations.filter { !appliedIdentifiers.contains($0.identifier) }
    }

    /// Applies every pending migration. Returns the identifiers applied.
    @discardableResult
    package func migrate(_ connection: SQLiteConnection, now: Int64) throws -> [String] {
        let pending = try pendingMigrations(in: connection)
        for migration in pending {
            try connection.transaction {
                // Checked again inside the write lock: another process may have migrated meanwhile.
                let alreadyApplied = try appliedMigrations(in: connection).contains { $0.identifier == migration.identifier }
                guard !alreadyApplied else { return }
                try connection.execute(
                    """
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        identifier TEXT PRIMARY KEY NOT NULL,
                        checksum TEXT NOT NULL,
                        applied_at INTEGER NOT NULL
                    ) STRICT
                    """)
                try connection.execute(migration.sql)
                try connection.execute(
                    "INSERT INTO schema_migrations (identifier, checksum, applied_at) VALUES (?, ?, ?)",
                    [.text(migration.identifier), .text(migration.checksum), .integer(now)])
            }
        }
        return pending.map(\.identifier)
    }
}
