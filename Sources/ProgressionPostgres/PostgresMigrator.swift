#if PostgreSQL
import Foundation
import Logging
import PostgresNIO
import Progression

/// One migration of `migrations/postgres/`, embedded in the binary.
struct PostgresMigration: Sendable, Hashable {
    /// The file's name without `.sql`, e.g. `0001_initial`; migrations apply in the order of their identifiers.
    var identifier: String
    /// The file's SQL: several statements, run with `search_path` set to the store's schema.
    var sql: String
}

/// Creates and migrates the store's schema.
///
/// Each migration runs in a transaction of its own together with its record (identifier, SHA-256 of its SQL, time),
/// under an advisory lock of the schema, so that processes opening a new database at once migrate it once. Before
/// anything is written, the schema is checked: one with tables but no record table is another application's
/// (`.foreignDatabase`), one with a record this binary does not know is newer (`.schemaTooNew`), one whose recorded
/// checksum differs from the embedded SQL was changed (`.corrupt`); all are left untouched.
struct PostgresMigrator {
    let names: PostgresNames
    let migrations: [PostgresMigration]
    /// How long the server lets a migration's transaction wait between its statements (the store's open timeout: a
    /// store's sessions otherwise end a transaction idle for twice the call timeout, and a loaded client can pause that
    /// long between two statements of a migration).
    var idleInTransactionLimit: Duration = .seconds(120)
    let location: String
    /// Runs after each migration's `BEGIN`: a test stands for a client that pauses there (a loaded machine).
    var afterBegin: (@Sendable () async -> Void)?

    /// Checks the schema and applies what is pending; with `readOnly`, only checks (pending migrations are refused).
    ///
    /// The session's limits are lifted for the migrations and put back after, set outside any transaction: a limit set
    /// inside one (`SET LOCAL`) comes too late when the client pauses between `BEGIN` and it, and a session the server
    /// ends while idle in a transaction leaves the connection's next statement unanswered (postgres-nio 1.33.2, here:
    /// `aMigrationOutlivesAClientThatPausesInItsTransaction`), until the open's deadline.
    func prepare(connection: PostgresConnection, logger: Logger, create: Bool, readOnly: Bool) async throws {
        let saved = try await connection.query(
            "SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')",
            logger: logger
        ).collect().first.map { try $0.decode((String, String).self) }
        // A migration may rewrite a large table: the store's statement timeout is for its calls, not for this.
        try await setLimits(
            statement: "0", idle: "\(idleInTransactionLimit.settingMilliseconds)", connection: connection, logger: logger)
        do {
            while try await step(connection, logger: logger, create: create, readOnly: readOnly) != nil {}
        } catch {
            if let saved { try? await setLimits(statement: saved.0, idle: saved.1, connection: connection, logger: logger) }
            throw error
        }
        if let saved { try await setLimits(statement: saved.0, idle: saved.1, connection: connection, logger: logger) }
    }

    private func setLimits(statement: String, idle: String, connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT set_config('statement_timeout', $1, false),
                           set_config('idle_in_transaction_session_timeout', $2, false)
                    """, binds: bindings(statement, idle)),
            logger: logger)
    }

    /// Applies the next pending migration in one transaction; returns its identifier, or `nil` when none is pending.
    private func step(_ connection: PostgresConnection, logger: Logger, create: Bool, readOnly: Bool) async throws
        -> String?
    {
        try await connection.query("BEGIN", logger: logger)
        do {
            await afterBegin?()
            let applied = try await stepInTransaction(connection, logger: logger, create: create, readOnly: readOnly)
            try await connection.query(applied == nil ? "ROLLBACK" : "COMMIT", logger: logger)
            return applied
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    private func stepInTransaction(
        _ connection: PostgresConnection, logger: Logger, create: Bool, readOnly: Bool
    ) async throws -> String? {
        if !readOnly {
            // One migrating process per schema; the lock ends with the transaction.
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "SELECT pg_advisory_xact_lock(hashtext($1))",
                    binds: bindings("progression.migrate." + names.schema)),
                logger: logger)
        }
        let tables = try await connection.query(
            PostgresQuery(
                unsafeSQL: "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1",
                binds: bindings(names.schema)),
            logger: logger
        ).collect().map { try $0.decode(String.self) }
        let schemaExists = try await connection.query(
            PostgresQuery(
                unsafeSQL: "SELECT count(*) FROM pg_namespace WHERE nspname = $1", binds: bindings(names.schema)),
            logger: logger
        ).collect().first.map { try $0.decode(Int64.self) } ?? 0 > 0

        var records: [(identifier: String, checksum: String)] = []
        if tables.contains("schema_migrations") {
            records = try await connection.query(
                PostgresQuery(unsafeSQL: "SELECT identifier, checksum FROM \(names.migrations) ORDER BY identifier"),
                logger: logger
            ).collect().map { try $0.decode((String, String).self) }
        } else if !tables.isEmpty {
            throw TaskStoreError(
                .foreignDatabase, path: location,
                message: "the schema '\(names.schema)' has tables (\(tables.sorted().prefix(5).joined(separator: ", "))) "
                    + "but no Progression migrations: it belongs to another application and was left untouched")
        } else if !schemaExists || tables.isEmpty {
            guard create, !readOnly else {
                throw TaskStoreError(
                    .cannotOpen, path: location,
                    message: "no Progression schema '\(names.schema)' in this database (an executor creates it)")
            }
        }

        let known = Dictionary(uniqueKeysWithValues: migrations.map { ($0.identifier, $0) })
        let unknown = records.map(\.identifier).filter { known[$0] == nil }
        guard unknown.isEmpty else {
            throw TaskStoreError(
                .schemaTooNew, path: location,
                message: "the schema '\(names.schema)' has migrations \(unknown) that this program does not know; "
                    + "use a newer version (nothing was changed)")
        }
        for record in records {
            let expected = try await checksum(of: known[record.identifier]!.sql, connection: connection, logger: logger)
            guard expected == record.checksum else {
                throw TaskStoreError(
                    .corrupt, path: location,
                    message: "migration \(record.identifier) of schema '\(names.schema)' was changed after it was applied "
                        + "(its checksum differs)")
            }
        }
        let done = Set(records.map(\.identifier))
        guard let next = migrations.sorted(by: { $0.identifier < $1.identifier }).first(where: { !done.contains($0.identifier) })
        else { return nil }
        guard !readOnly else {
            throw TaskStoreError(
                .cannotOpen, path: location,
                message: "the schema '\(names.schema)' needs migration \(next.identifier) and was opened read-only")
        }
        if records.isEmpty {
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(names.quoted)"), logger: logger)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        CREATE TABLE IF NOT EXISTS \(names.migrations) (
                            identifier text COLLATE "C" PRIMARY KEY,
                            checksum text NOT NULL,
                            applied_at bigint NOT NULL)
                        """), logger: logger)
        }
        try await connection.query(
            PostgresQuery(unsafeSQL: "SET LOCAL search_path TO \(names.quoted)"), logger: logger)
        for statement in Self.statements(of: next.sql) {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
        }
        let sum = try await checksum(of: next.sql, connection: connection, logger: logger)
        try await connection.query(
            PostgresQuery(
                unsafeSQL: "INSERT INTO \(names.migrations) (identifier, checksum, applied_at) VALUES ($1, $2, $3)",
                binds: bindings(next.identifier, sum, Int64((Date().timeIntervalSince1970 * 1000).rounded()))),
            logger: logger)
        logger.debug("applied migration", metadata: ["migration": "\(next.identifier)", "schema": "\(names.schema)"])
        return next.identifier
    }

    /// The statements of a migration file, one by one (a prepared statement takes one): comments (`--` to the end of
    /// the line) removed, split at each `;` outside dollar quotes (`$tag$ … $tag$`, a procedure's body). Migration files
    /// keep `--` and `;` out of their string literals, `--` out of dollar-quoted bodies but as a comment, and `$` out of
    /// identifiers and of string literals (either would be taken for a dollar quote).
    static func statements(of sql: String) -> [String] {
        let code = sql.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            guard let comment = line.range(of: "--") else { return line }
            return line[..<comment.lowerBound]
        }.joined(separator: "\n")
        var statements: [String] = []
        var current = ""
        var quote: Substring?
        var rest = Substring(code)
        while let character = rest.first {
            if character == "$", let tag = dollarTag(at: rest) {
                if quote == nil {
                    quote = tag
                } else if quote == tag {
                    quote = nil
                }
                current += tag
                rest = rest.dropFirst(tag.count)
                continue
            }
            if character == ";" && quote == nil {
                statements.append(current)
                current = ""
            } else {
                current.append(character)
            }
            rest = rest.dropFirst()
        }
        statements.append(current)
        return statements.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
    }

    /// The dollar-quote tag (`$$`, `$body$`) that `text` starts with, if any.
    private static func dollarTag(at text: Substring) -> Substring? {
        var end = text.index(after: text.startIndex)
        while end < text.endIndex,
            text[end] == "_" || text[end].isLetter || (end > text.index(after: text.startIndex) && text[end].isNumber)
        {
            end = text.index(after: end)
        }
        guard end < text.endIndex, text[end] == "$" else { return nil }
        return text[...end]
    }

    /// The SHA-256 of `sql`, in hex, computed by the server.
    private func checksum(of sql: String, connection: PostgresConnection, logger: Logger) async throws -> String {
        try await connection.query(
            PostgresQuery(unsafeSQL: "SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", binds: bindings(sql)),
            logger: logger
        ).collect().first.map { try $0.decode(String.self) } ?? ""
    }
}
#endif
