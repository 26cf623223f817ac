#if PostgreSQL
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Progression
import Synchronization

/// The ``TaskStore`` on PostgreSQL: several executors on several hosts share one database.
///
/// It keeps the contract of ``SQLiteTaskStore`` — the same orderings, conflicts, compare-and-set changes and fencing —
/// with PostgreSQL's concurrency: executors claim work with `SELECT … FOR UPDATE SKIP LOCKED` (by priority, then
/// age), every write of an executor is fenced through its root's owner (an executor that stalled past its lease finds
/// its writes rejected), and control requests reach their owner through `LISTEN`/`NOTIFY`, with a poll as a fallback.
///
/// Everything lives in one schema (``Configuration/schema``, default `progression`), so several services can share a
/// database. Opening the store creates that schema and applies the migrations embedded in the binary, each in its own
/// transaction with a record and a checksum; a schema written by a newer version, or one that holds tables but no
/// Progression records, is refused and left untouched.
///
/// ```swift
/// import Progression
/// import ProgressionPostgres
///
/// let store = try await PostgresTaskStore(url: "postgres://jobs@db.internal:5432/batch?schema=progression")
/// let executor = TaskExecutor(store: store)
/// ```
///
/// The store runs a small connection pool (``Configuration/maximumConnections``, one of them kept for `LISTEN`);
/// ``close()`` ends it. Commits are PostgreSQL's: with the server's default `synchronous_commit=on`, a commit that
/// returned survives a crash of the server.
public final class PostgresTaskStore: TaskStoreBackend {
    /// How the store connects and where its tables live.
    public struct Configuration: Sendable {
        /// How the connection is encrypted.
        public enum TLSMode: String, Sendable, Hashable {
            /// Never (a Unix socket, a trusted network).
            case disable
            /// When the server offers it.
            case prefer
            /// Always: a server without TLS is refused.
            case require
        }

        /// The server's host name or address (TCP); `nil` with ``unixSocketPath``.
        public var host: String?
        /// The server's TCP port.
        public var port: Int = 5432
        /// The server's Unix socket file (e.g. `/var/run/postgresql/.s.PGSQL.5432`), instead of a host.
        public var unixSocketPath: String?
        /// The role to log in as.
        public var username: String
        /// Its password, when the server asks for one.
        public var password: String?
        /// The database; `nil`: the server's default (the user's name).
        public var database: String?
        /// The schema that holds every table of the store: letters, digits and `_`, not starting with a digit, at most
        /// 48 characters.
        public var schema: String = "progression"
        /// TLS for TCP connections.
        public var tls: TLSMode = .prefer
        /// The most connections the store opens at once (one is kept for `LISTEN`); at least 2.
        public var maximumConnections: Int = 4
        /// How long to wait for a connection.
        public var connectTimeout: Duration = .seconds(10)
        /// Create the schema (and apply the migrations) when it does not exist.
        public var createIfMissing = true
        /// Read only: no migration, and every write fails (the session's transactions are read-only).
        public var readOnly = false
        /// The fallback of `LISTEN`/`NOTIFY`: ``TaskStoreBackend/changeCounter()`` moves at least this often, so a
        /// poller looks again even when a notification was lost (a reconnect).
        public var changePollInterval: Duration = .seconds(1)

        /// A configuration for a server on TCP.
        public init(host: String, port: Int = 5432, username: String, password: String? = nil, database: String?) {
            self.host = host
            self.port = port
            self.username = username
            self.password = password
            self.database = database
        }

        /// A configuration for a server on a Unix socket (the socket file, not its directory).
        public init(unixSocketPath: String, username: String, password: String? = nil, database: String?) {
            self.unixSocketPath = unixSocketPath
            self.username = username
            self.password = password
            self.database = database
            tls = .disable
        }

        /// A configuration from a URL: `postgres://user[:password]@host[:port]/database[?schema=…&sslmode=…]`.
        ///
        /// `sslmode` is `disable`, `prefer` (the default) or `require` (`verify-full` counts as `require`). A Unix
        /// socket is named by its directory as libpq does — `postgres://user@/db?host=/var/run/postgresql` — or by a
        /// percent-encoded host (`postgres://user@%2Fvar%2Frun%2Fpostgresql/db`); the file in it is
        /// `.s.PGSQL.<port>`. The user defaults to `$USER`.
        ///
        /// - Throws: ``TaskStoreError`` (`.cannotOpen`) saying what is wrong with the URL.
        public init(url: String) throws {
            self = try PostgresURL.parse(url)
        }

        /// The URL of this configuration without its password, for messages.
        public var displayURL: String {
            var text = "postgres://\(username)@"
            if let unixSocketPath {
                let directory = (unixSocketPath as NSString).deletingLastPathComponent
                text += "/\(database ?? "")?host=\(directory)&"
            } else {
                text += "\(host ?? "localhost"):\(port)/\(database ?? "")?"
            }
            return text + "schema=\(schema)"
        }
    }

    /// What the store connects to.
    public let configuration: Configuration
    let client: PostgresClient
    let logger: Logger
    let names: PostgresNames
    let changes: PostgresChangeListener
    private let runTask: Task<Void, Never>
    private let listenTask: Task<Void, Never>
    private let readyTask: Task<Void, any Error>
    let encoder: JSONEncoder
    let decoder = JSONDecoder()
    /// Tasks share a few option sets: their JSON is encoded once.
    let encodedOptionsCache = Mutex<[TaskOptions: String]>([:])

    /// Connects, creates the schema when missing and migrates it, and starts listening for changes.
    ///
    /// - Throws: ``TaskStoreError``: `.cannotOpen` (no server, a refused login, a missing database, a bad schema name,
    ///   or, without ``Configuration/createIfMissing``, a missing schema), `.foreignDatabase` (the schema holds tables
    ///   but no Progression records), `.schemaTooNew` (migrations this binary does not know), `.corrupt` (a migration
    ///   whose checksum differs). The schema is left as it was.
    public convenience init(
        configuration: Configuration, logger: Logger = Logger(label: "progression.postgres")
    ) async throws {
        try self.init(opening: configuration, logger: logger)
        do {
            try await opened()
        } catch {
            await close()
            throw error
        }
    }

    /// Opens the store at a `postgres://` URL (see ``Configuration/init(url:)``).
    ///
    /// - Throws: as ``init(configuration:logger:)``, and `.cannotOpen` for a malformed URL.
    public convenience init(url: String, logger: Logger = Logger(label: "progression.postgres")) async throws {
        try await self.init(configuration: Configuration(url: url), logger: logger)
    }

    /// Starts opening the store in the background (connecting, migrating, listening) and returns at once: every call
    /// waits for the opening first, and fails with its error when it failed. For callers that cannot wait here
    /// (a synchronous factory); ``init(configuration:logger:)`` waits and throws at once.
    ///
    /// - Throws: ``TaskStoreError`` (`.cannotOpen`) for a schema name that is not allowed.
    package init(opening configuration: Configuration, logger: Logger = Logger(label: "progression.postgres")) throws {
        self.configuration = configuration
        self.logger = logger
        let names = try PostgresNames(schema: configuration.schema)
        self.names = names
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        self.encoder = encoder
        let client = PostgresClient(configuration: Self.clientConfiguration(configuration), backgroundLogger: logger)
        self.client = client
        runTask = Task { await client.run() }
        let changes = PostgresChangeListener(pollInterval: configuration.changePollInterval)
        self.changes = changes
        listenTask = Task { await changes.listen(client: client, channel: names.channel, logger: logger) }
        let location = configuration.displayURL
        readyTask = Task {
            do {
                try await PostgresMigrator(names: names, migrations: PostgresMigration.embedded, location: location)
                    .prepare(
                        client: client, logger: logger, create: configuration.createIfMissing,
                        readOnly: configuration.readOnly)
            } catch {
                throw Self.storeError(error, location: location)
            }
            // A control request written right after the store opened must not wait for the poll: the listener is up
            // before the store is used (or the poll covers it when it cannot start).
            await changes.waitUntilListening(timeout: configuration.connectTimeout)
        }
    }

    /// Waits until the store is open.
    ///
    /// - Throws: the error of the opening.
    func opened() async throws {
        try await readyTask.value
    }

    deinit {
        readyTask.cancel()
        listenTask.cancel()
        runTask.cancel()
    }

    /// Closes the store's connections. Later calls fail.
    public func close() async {
        readyTask.cancel()
        listenTask.cancel()
        runTask.cancel()
        _ = await readyTask.result
        await listenTask.value
        await runTask.value
    }

    /// The server and schema, for messages.
    var location: String { configuration.displayURL }

    private static func clientConfiguration(_ configuration: Configuration) -> PostgresClient.Configuration {
        var client: PostgresClient.Configuration
        if let socket = configuration.unixSocketPath {
            client = .init(
                unixSocketPath: socket, username: configuration.username, password: configuration.password,
                database: configuration.database)
        } else {
            let tls: PostgresClient.Configuration.TLS =
                switch configuration.tls {
                case .disable: .disable
                case .prefer: .prefer(.makeClientConfiguration())
                case .require: .require(.makeClientConfiguration())
                }
            client = .init(
                host: configuration.host ?? "localhost", port: configuration.port, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: tls)
        }
        client.options.maximumConnections = max(2, configuration.maximumConnections)
        client.options.minimumConnections = 0
        client.options.connectTimeout = configuration.connectTimeout
        client.options.connectionIdleTimeout = .seconds(60)
        var parameters = [("application_name", "progression")]
        if configuration.readOnly { parameters.append(("default_transaction_read_only", "on")) }
        client.options.additionalStartupParameters = parameters
        return client
    }

    // MARK: Running SQL

    /// Runs `body` on one connection in a transaction: committed when it returns, rolled back when it throws (the
    /// error rethrown as a ``TaskStoreError``).
    @discardableResult
    func write<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await opened()
        do {
            return try await client.withConnection { connection in
                try await connection.query("BEGIN", logger: logger)
                do {
                    let value = try await body(connection)
                    try await connection.query("COMMIT", logger: logger)
                    return value
                } catch {
                    _ = try? await connection.query("ROLLBACK", logger: logger)
                    throw error
                }
            }
        } catch {
            throw Self.storeError(error, location: location)
        }
    }

    /// Runs `body` on one connection outside a transaction (each statement commits on its own).
    @discardableResult
    func read<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await opened()
        do {
            return try await client.withConnection { connection in try await body(connection) }
        } catch {
            throw Self.storeError(error, location: location)
        }
    }

    /// A server error's SQLSTATE and message as a ``TaskStoreError``.
    static func storeError(_ error: any Error, location: String) -> TaskStoreError {
        if let error = error as? TaskStoreError { return error }
        if error is CancellationError {
            return TaskStoreError(.cancelled, path: location, message: "cancelled before it ran")
        }
        if let error = error as? ProgressionError {
            // Never reached through `write` (callers rethrow lifecycle refusals themselves); kept for safety.
            return TaskStoreError(.other, path: location, message: error.description)
        }
        if let error = error as? EncodingError {
            return TaskStoreError(.other, path: location, message: "cannot encode a value: \(error)")
        }
        if let error = error as? DecodingError {
            return TaskStoreError(.corrupt, path: location, message: "cannot decode a stored value: \(error)")
        }
        guard let error = error as? PSQLError else {
            return TaskStoreError(.other, path: location, message: String(describing: error))
        }
        if let state = error.serverInfo?[.sqlState] {
            let message = error.serverInfo?[.message] ?? "server error \(state)"
            let detail = error.serverInfo?[.detail].map { " (\($0))" } ?? ""
            let reason: TaskStoreError.Reason =
                switch state {
                case "23505", "23P01": .conflict
                case "23514", "23502", "23503", "22003", "22P02", "22001": .constraint
                case "25006": .readOnly
                case "40001", "40P01", "55P03", "53300": .busy
                case "57014": .cancelled
                case "3D000", "3F000", "42501": .cannotOpen
                case _ where state.hasPrefix("28"): .cannotOpen
                case _ where state.hasPrefix("08"): .cannotOpen
                default: .other
                }
            return TaskStoreError(reason, path: location, message: message + detail)
        }
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .poolClosed, .sslUnsupported,
            .failedToAddSSLHandler, .unsupportedAuthMechanism, .authMechanismRequiresPassword, .saslError:
            var message = "cannot connect: \(error.code)"
            if let underlying = error.underlying { message += " (\(underlying))" }
            return TaskStoreError(.cannotOpen, path: location, message: message)
        case .queryCancelled:
            return TaskStoreError(.cancelled, path: location, message: "the query was cancelled")
        default:
            return TaskStoreError(.other, path: location, message: String(reflecting: error))
        }
    }
}

/// The qualified names of the store's objects in its schema, checked once.
struct PostgresNames: Sendable {
    /// The schema, as written by the user.
    let schema: String
    /// The schema as an SQL identifier (quoted).
    let quoted: String
    /// The `NOTIFY` channel of the schema.
    let channel: String

    /// - Throws: ``TaskStoreError`` (`.cannotOpen`) for a schema name that is not a plain identifier.
    init(schema: String) throws {
        let bytes = Array(schema.utf8)
        let valid =
            !bytes.isEmpty && bytes.count <= 48
            && bytes.allSatisfy { $0 == 95 || (65...90).contains($0) || (97...122).contains($0) || (48...57).contains($0) }
            && !(48...57).contains(bytes[0])
        guard valid else {
            throw TaskStoreError(
                .cannotOpen,
                message: "the schema name '\(schema)' is not allowed: use letters, digits and '_' (not first), at most 48")
        }
        self.schema = schema
        quoted = "\"\(schema)\""
        channel = "\(schema)_progression_changes"
    }

    var tasks: String { "\(quoted).tasks" }
    var events: String { "\(quoted).events" }
    var owners: String { "\(quoted).owners" }
    var controlRequests: String { "\(quoted).control_requests" }
    var jobKinds: String { "\(quoted).job_kinds" }
    var pausedKinds: String { "\(quoted).paused_kinds" }
    var schedules: String { "\(quoted).schedules" }
    var migrations: String { "\(quoted).schema_migrations" }
    var rootIdentifiers: String { "\(quoted).root_identifiers" }

    /// The statement that wakes every listener of the schema (committed with the transaction that runs it).
    var notify: String { "SELECT pg_notify('\(channel)', '')" }
}
#endif
