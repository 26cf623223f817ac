#if PostgreSQL
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// A statement of the store's hot paths (a submit, a claim, a start, a read of one job) kept prepared on each
/// connection, so that the server parses it once per connection instead of at each call, and may keep its plan.
///
/// A statement sent with `query` is an unnamed one: the server parses, analyzes and plans it at every call. On the way
/// of one job on PostgreSQL that was about 2 ms of the server's time (the statement log of `postgres-latency`, in
/// docs/performance.md), more than any statement's execution.
///
/// postgres-nio prepares a statement under ``PostgresPreparedStatement``'s static `name` and `sql`, while the store's
/// SQL is built at run time (it names the store's schema, and a claim's text depends on its owners and kinds). The two
/// are therefore read from a task-local value bound around the call (``run(_:_:connection:logger:)``). That is sound
/// because `PostgresConnection.execute(_:logger:)` reads both in the calling task, within the binding's scope: to build
/// the task it sends to its channel, and again to describe an error it rethrows. Nothing reads them on another task.
/// `preparedStatementsAreKeptByTheirTextOnEachConnection` (PreparedSQLTests) fails if that ever changes: it runs two
/// statements under names of their own on one connection and checks each one's answer.
///
/// Only statements whose texts are few go through here: each distinct text stays prepared on each connection for its
/// life (postgres-nio has no way to forget one). A claim's text has a branch for each owner it takes from, so a claim
/// from more than a few owners goes unnamed (``maximumClaimBranches``).
struct PreparedSQL: PostgresPreparedStatement {
    typealias Row = PostgresRow

    /// The name and text of the statement being sent (bound by ``run(_:_:connection:logger:)``).
    struct Text: Sendable {
        var name: String
        var sql: String
    }

    @TaskLocal static var current = Text(name: "", sql: "")

    static var name: String {
        let name = current.name
        // Read outside a binding, every statement would share one empty name: a wrong answer, not a slow one.
        precondition(!name.isEmpty, "a prepared statement's name was read outside its call")
        return name
    }

    static var sql: String { current.sql }

    let bindings: PostgresBindings

    func makeBindings() throws -> PostgresBindings { bindings }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

    /// The rows of `sql` with `bindings`, through the statement prepared under its name on `connection`.
    static func run(
        _ sql: String, _ bindings: PostgresBindings, connection: PostgresConnection, logger: Logger
    ) async throws -> [PostgresRow] {
        let name = names.name(for: sql)
        do {
            return try await $current.withValue(Text(name: name, sql: sql)) {
                var rows: [PostgresRow] = []
                for try await row in try await connection.execute(PreparedSQL(bindings: bindings), logger: logger) {
                    rows.append(row)
                }
                return rows
            }
        } catch let error as PSQLError {
            // postgres-nio keeps a statement whose preparation failed as failed on that connection for good. A text
            // the server could not prepare then (an object missing, a transaction already failed) gets a new name,
            // so that it is prepared again once the cause is gone. Most errors of an execution (a constraint, a
            // value) keep the name. Some classes come from either (a privilege is checked as the statement runs), so
            // a text is renamed at most once a minute: a call that keeps failing leaves at most one more statement a
            // minute on a connection, and a cause fixed is seen within a minute.
            if let code = error.serverInfo?[.sqlState], Self.failsPreparation(code) {
                names.renew(sql, after: name, at: .now)
            }
            throw error
        }
    }

    /// Whether a server error of this SQLSTATE can come from preparing a statement: syntax, a missing object or
    /// privilege (class 42), a missing schema (3F), a transaction that had already failed (25P02), a feature not
    /// supported (0A).
    static func failsPreparation(_ code: String) -> Bool {
        code.hasPrefix("42") || code.hasPrefix("3F") || code.hasPrefix("0A") || code == "25P02"
    }

    /// The names given to the texts sent in this process.
    static let names = Names()

    /// The most branches a claim's text has and still goes through here: the unowned roots, this executor's, one
    /// owner's more, and the roots whose time has come.
    static let maximumClaimBranches = 4

    /// A name for each text, unique in the process: `progression_` and a number (a text is long, and a name is at
    /// most 63 bytes).
    final class Names: Sendable {
        struct Entry {
            var name: String
            var renamedAt: ContinuousClock.Instant?
        }

        private let state = Mutex<(byText: [String: Entry], next: Int)>(([:], 1))

        /// How long a text keeps a name it was given after an error before it can be given another.
        static let renamingInterval = Duration.seconds(60)

        func name(for sql: String) -> String {
            state.withLock { state in
                if let entry = state.byText[sql] { return entry.name }
                let name = "progression_\(state.next)"
                state.next += 1
                state.byText[sql] = Entry(name: name)
                return name
            }
        }

        /// Gives `sql` a new name at `now`, unless another call already did since `name` was read, or it was given
        /// one less than ``renamingInterval`` before.
        func renew(_ sql: String, after name: String, at now: ContinuousClock.Instant) {
            state.withLock { state in
                guard let entry = state.byText[sql], entry.name == name else { return }
                if let renamed = entry.renamedAt, now - renamed < Self.renamingInterval { return }
                state.byText[sql] = Entry(name: "progression_\(state.next)", renamedAt: now)
                state.next += 1
            }
        }
    }
}
#endif
