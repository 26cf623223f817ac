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
/// (a migration edited after it landed). A database of another application — one that has tables but no record of
/// these migrations — is refused with ``SQLiteError`` (`foreignDatabase`) and not modified: only an empty database is
/// initialised.
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

    /// Checks that the database is one these migrations made: it is empty (no table, index, view or trigger), or its
    /// `schema_migrations` table, with the columns this migrator gives it, records at least one of them.
    ///
    /// - Throws: ``SQLiteError`` (`foreignDatabase`) naming a few of its tables otherwise.
    package func checkOwnership(of connection: SQLiteConnection) throws {
        let objects = try connection.query(
            "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
        ) { (type: $0.text(at: 0), name: $0.text(at: 1)) }
        guard !objects.isEmpty else { return }
        if objects.contains(where: { $0.type == "table" && $0.name == "schema_migrations" }) {
            let columns = Set(
                try connection.query("SELECT name FROM pragma_table_info('schema_migrations')") { $0.text(at: 0) })
            if columns.isSuperset(of: ["identifier", "checksum", "applied_at"]) {
                let known = Set(migrations.map(\.identifier))
                let recorded = try connection.query("SELECT identifier FROM schema_migrations") { $0.text(at: 0) }
                if recorded.contains(where: known.contains) { return }
            }
        }
        let tables = objects.filter { $0.type == "table" }.map(\.name)
        let named = (tables.isEmpty ? objects.map(\.name) : tables)
        let shown = named.prefix(5).joined(separator: ", ") + (named.count > 5 ? ", …" : "")
        throw SQLiteError(
            code: SQLiteError.foreignDatabase.rawValue,
            message: "it is another application's SQLite database (\(tables.isEmpty ? "objects" : "tables") \(shown); "
                + "none of Progression's migrations recorded) and was left untouched",
            path: connection.path)
    }

    /// Checks that the database holds nothing this binary does not know, and returns the migrations still to apply.
    ///
    /// - Throws: ``SQLiteError``: `foreignDatabase` (see ``checkOwnership(of:)``), `schemaTooNew`.
    package func pendingMigrations(in connection: SQLiteConnection) throws -> [SQLiteMigration] {
        try checkOwnership(of: connection)
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
                // Checked again inside the write lock: another process may have migrated (or filled) it meanwhile.
                try checkOwnership(of: connection)
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
