#if PostgreSQL
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Progression
import ServiceLifecycle
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
/// The store is a `Service` (swift-service-lifecycle): creating it opens nothing; ``run()`` runs its connection pool and
/// its `LISTEN` connection, opens the schema, and returns on a graceful shutdown (or when cancelled, or on ``close()``).
/// Calls made before it is open wait for it. Put it before the executor in a `ServiceGroup`, which stops services in
/// reverse order, so that the executor's last writes go out before the store closes:
///
/// ```swift
/// import Progression
/// import ProgressionPostgres
/// import ServiceLifecycle
///
/// let store = try PostgresTaskStore(url: "postgres://jobs@db.internal:5432/batch?schema=progression")
/// let executor = TaskExecutor(store: store)
/// let group = ServiceGroup(services: [store, executor], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// Or, for a script or a tool, ``withStore(configuration:logger:_:)`` runs it around a closure.
///
/// **When the server goes away.** Every call has a deadline (``Configuration/callTimeout``): a call that gets no
/// connection, or no answer, in time fails with `.unavailable` (transient) and its connection is closed, so a
/// restarted server, a killed backend or a dropped or cut connection never holds a caller; the pool opens new
/// connections once the server answers again, and `LISTEN` listens again. A commit whose answer was lost is looked up
/// before it is reported (`txid_status`; for an executor's batch, its session's mark once its backend is gone): one
/// that went through counts as done, never as failed and written twice.
/// Server-side timeouts end what a client cut off from the server left open (its transaction and its locks).
///
/// Commits are PostgreSQL's: with the server's default `synchronous_commit=on`, a commit that returned survives a
/// crash of the server.
public final class PostgresTaskStore: TaskStoreBackend, BroadcastingChanges, Service {
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
        /// The deadline of every call: getting a connection, its statements and its commit. A call past it fails with
        /// ``TaskStoreError/Reason/unavailable`` and its connection is closed. The server ends a statement that runs
        /// longer (`statement_timeout`) and a session left idle inside a transaction for longer than twice this
        /// (`idle_in_transaction_session_timeout`), which frees the locks of a client cut off from it.
        public var callTimeout: Duration = .seconds(10)
        /// The deadline of opening the store: connecting, checking the schema and applying its migrations (which may
        /// rewrite large tables: their statements have no statement timeout).
        public var openTimeout: Duration = .seconds(120)
        /// The `application_name` of the store's sessions (what `pg_stat_activity` shows).
        public var applicationName = "progression"

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
    /// Shared with every store of this schema on this server in the process: posted on each of its notifications.
    package let beacons: StoreBeacons
    let encoder: JSONEncoder
    let decoder = JSONDecoder()
    /// Tasks share a few option sets: their JSON is encoded once.
    let encodedOptionsCache = Mutex<[TaskOptions: String]>([:])
    /// Whether the store runs, and who waits for it to be open.
    private let lifecycle = Mutex(Lifecycle())
    /// Ends ``run()``: a graceful shutdown, a cancellation or ``close()``.
    private let stopSignal = StopSignal()
    /// Writes whose commit was sent but not answered, not known yet to have committed (see ``Ambiguous``).
    let ambiguous = Mutex(Ambiguous())
    /// The backend of each pooled connection that sent a submit's insert, by connection: an insert whose answer is lost
    /// has its backend ended before its rows are sent again (``settleLostInsert(_:events:sentBy:after:)``). Forgotten
    /// all at once past 64 connections (the pool replaces its connections over months); a connection then asks again.
    let insertBackends = Mutex<[PostgresConnection.ID: BatchSession.Backend]>([:])
    /// This store instance's batches: their connection and chain (see ``BatchSession``), one call at a time.
    let batchSession = Mutex(BatchSession())
    let batchTurn = AsyncTurn()
    /// The session of ``batchSession`` in `writer_marks`.
    let sessionID = UUID().uuidString

    private struct Lifecycle {
        enum Phase {
            /// Created; ``run()`` not called yet.
            case idle
            /// ``run()`` connects and migrates.
            case opening
            case open
            /// The opening failed, or the store closed: calls fail with this.
            case ended(TaskStoreError)
        }

        var phase = Phase.idle
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
        var nextWaiter = 0
        /// The run started by ``start(configuration:logger:)``, which ``close()`` ends.
        var ownedRun: Task<Void, Never>?
    }

    /// Creates the store; nothing connects until ``run()``.
    ///
    /// - Throws: ``TaskStoreError`` (`.cannotOpen`) for a schema name that is not allowed.
    public init(configuration: Configuration, logger: Logger = Logger(label: "progression.postgres")) throws {
        self.configuration = configuration
        self.logger = logger
        let names = try PostgresNames(schema: configuration.schema)
        self.names = names
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        self.encoder = encoder
        client = PostgresClient(configuration: Self.clientConfiguration(configuration, names: names), backgroundLogger: logger)
        // The URL names a socket's directory, not its port: the port is part of the address.
        let beacons = StoreBeacons.forDatabase("postgres:\(configuration.displayURL)#\(configuration.port)")
        self.beacons = beacons
        changes = PostgresChangeListener(pollInterval: configuration.changePollInterval, commits: beacons.commits)
    }

    /// Creates the store of a `postgres://` URL (see ``Configuration/init(url:)``); nothing connects until ``run()``.
    ///
    /// - Throws: ``TaskStoreError`` (`.cannotOpen`) for a malformed URL or a schema name that is not allowed.
    public convenience init(url: String, logger: Logger = Logger(label: "progression.postgres")) throws {
        try self.init(configuration: Configuration(url: url), logger: logger)
    }

    /// Runs the store around `body`: connects, creates the schema when missing and migrates it, listens for changes,
    /// calls `body`, and closes the store when `body` returns or throws.
    ///
    /// ```swift
    /// let failed = try await PostgresTaskStore.withStore(url: "postgres://jobs@db/batch") { store in
    ///     try await store.roots(TaskQuery(statuses: [.failed]))
    /// }
    /// ```
    ///
    /// - Throws: the opening's ``TaskStoreError`` (see ``run()``), or `body`'s error.
    public static func withStore<T: Sendable>(
        configuration: Configuration, logger: Logger = Logger(label: "progression.postgres"),
        _ body: (PostgresTaskStore) async throws -> T
    ) async throws -> T {
        let store = try PostgresTaskStore(configuration: configuration, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await store.run() }
            defer { store.stopSignal.fire() }
            do {
                try await store.opened()
            } catch {
                // The run's own error (the opening's) says more than a waiter's.
                store.stopSignal.fire()
                try await group.waitForAll()
                throw error
            }
            let value = try await body(store)
            store.stopSignal.fire()
            try await group.waitForAll()
            return value
        }
    }

    /// Runs the store around `body` (see ``withStore(configuration:logger:_:)``).
    public static func withStore<T: Sendable>(
        url: String, logger: Logger = Logger(label: "progression.postgres"), _ body: (PostgresTaskStore) async throws -> T
    ) async throws -> T {
        try await withStore(configuration: Configuration(url: url), logger: logger, body)
    }

    /// Runs the store: its connection pool and its `LISTEN` connection; opens the schema (creating it when missing and
    /// migrating it); then serves calls until a graceful shutdown, the cancellation of the calling task, or
    /// ``close()``. Calls fail once it returned.
    ///
    /// - Throws: ``TaskStoreError``: `.cannotOpen` (no server, a refused login, a missing database, or, without
    ///   ``Configuration/createIfMissing``, a missing schema), `.foreignDatabase` (the schema holds tables but no
    ///   Progression records), `.schemaTooNew` (migrations this binary does not know), `.corrupt` (a migration whose
    ///   checksum differs). The schema is left as it was. Also when the store runs already or ran before.
    public func run() async throws {
        try lifecycle.withLock { state throws(TaskStoreError) in
            guard case .idle = state.phase else {
                throw TaskStoreError(.other, path: location, message: "the store runs already, or ran before")
            }
            state.phase = .opening
        }
        let client = client
        let changes = changes
        let names = names
        let logger = logger
        var outcome: TaskStoreError = TaskStoreError(.cannotOpen, path: location, message: "the store was closed")
        do {
            try await withGracefulShutdownHandler {
                try await withTaskCancellationHandler {
                    try await withThrowingDiscardingTaskGroup { group in
                        group.addTask { await client.run() }
                        group.addTask { await changes.listen(client: client, channel: names.channel, logger: logger) }
                        try await self.open()
                        // A control request written right after the store opened must not wait for the poll: the
                        // listener is up before the store is used (or the poll covers it when it cannot start).
                        await changes.waitUntilListening(timeout: self.configuration.connectTimeout)
                        self.setOpen()
                        await self.stopSignal.wait()
                        changes.close()
                        await self.closeBatchConnection()
                        group.cancelAll()
                    }
                } onCancel: {
                    self.stopSignal.fire()
                }
            } onGracefulShutdown: {
                self.stopSignal.fire()
            }
        } catch {
            outcome = Self.storeError(error, location: location)
            await closeBatchConnection()
            end(outcome)
            throw outcome
        }
        end(outcome)
    }

    /// Connects and migrates, within the open timeout.
    private func open() async throws {
        let migrator = PostgresMigrator(
            names: names, migrations: PostgresMigration.embedded, idleInTransactionLimit: configuration.openTimeout,
            location: location)
        let configuration = configuration
        let names = names
        try await withCallDeadline(configuration.openTimeout, opening: true) { connection in
            try await migrator.prepare(
                connection: connection, logger: self.logger, create: configuration.createIfMissing,
                readOnly: configuration.readOnly)
            guard !configuration.readOnly else { return }
            // The marks of writer sessions silent for a week (stores that ended without a word): a lost answer is
            // settled within seconds of the server answering again, and a live session whose mark went goes on from
            // none (``applyInOneCall``). Housekeeping: the store opens all the same when it fails (a statement
            // timeout on a loaded server).
            let cutoff = Date().addingTimeInterval(-7 * 86_400).storedMilliseconds
            _ = try? await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        WITH gone AS (DELETE FROM \(names.writerMarks) WHERE written_at < $1 RETURNING session)
                        DELETE FROM \(names.writerOutcomes) WHERE session IN (SELECT session FROM gone)
                        """, binds: bindings(cutoff)), logger: self.logger)
        }
    }

    /// Opens the store in a task of its own, for tools that cannot run it in a structured way (a synchronous
    /// factory); ``close()`` ends it. Calls wait for the opening and fail with its error.
    package static func start(
        configuration: Configuration, logger: Logger = Logger(label: "progression.postgres")
    ) throws -> PostgresTaskStore {
        let store = try PostgresTaskStore(configuration: configuration, logger: logger)
        let task = Task { _ = try? await store.run() }
        store.lifecycle.withLock { $0.ownedRun = task }
        return store
    }

    /// Opens the store in a task of its own and waits until it is open (see ``start(configuration:logger:)``).
    package static func started(
        configuration: Configuration, logger: Logger = Logger(label: "progression.postgres")
    ) async throws -> PostgresTaskStore {
        let store = try start(configuration: configuration, logger: logger)
        do {
            try await store.opened()
        } catch {
            await store.close()
            throw error
        }
        return store
    }

    /// Ends ``run()`` (its connections close); later calls fail. Returns once a run started by the store itself
    /// ended; a run started by the caller ends in the caller's task.
    public func close() async {
        stopSignal.fire()
        let (owned, waiters) = lifecycle.withLock { state in
            if case .idle = state.phase {
                state.phase = .ended(TaskStoreError(.cannotOpen, path: location, message: "the store was closed"))
            }
            guard case .ended = state.phase else { return (state.ownedRun, [CheckedContinuation<Void, any Error>]()) }
            defer { state.waiters = [:] }
            return (state.ownedRun, Array(state.waiters.values))
        }
        let error = TaskStoreError(.cannotOpen, path: location, message: "the store was closed")
        for waiter in waiters { waiter.resume(throwing: error) }
        await owned?.value
    }

    private func setOpen() {
        let waiters = lifecycle.withLock { state in
            state.phase = .open
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    private func end(_ error: TaskStoreError) {
        let waiters = lifecycle.withLock { state in
            if case .ended = state.phase {} else { state.phase = .ended(error) }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    /// Waits until the store is open (cancellable).
    ///
    /// - Throws: the error of the opening, or of a store that closed.
    func opened() async throws {
        let id = lifecycle.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let now: Result<Void, any Error>? = lifecycle.withLock { state in
                    switch state.phase {
                    case .open: return .success(())
                    case .ended(let error): return .failure(error)
                    case .idle, .opening:
                        if Task.isCancelled { return .failure(CancellationError()) }
                        state.waiters[id] = continuation
                        return nil
                    }
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            let waiter = lifecycle.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Throws the error of a store whose opening failed or that closed.
    func checkNotEnded() throws {
        try lifecycle.withLock { state throws(TaskStoreError) in
            if case .ended(let error) = state.phase { throw error }
        }
    }

    /// Why a call found no open store, for its error.
    private var notOpenReason: TaskStoreError {
        lifecycle.withLock { state in
            switch state.phase {
            case .idle:
                TaskStoreError(
                    .cannotOpen, path: location,
                    message: "the store is not running: run it (run() in a ServiceGroup, or PostgresTaskStore.withStore)")
            case .opening:
                TaskStoreError(
                    .unavailable, path: location,
                    message: "no connection to the server within \(configuration.openTimeout + configuration.callTimeout) (still opening)")
            case .open:
                TaskStoreError(
                    .unavailable, path: location, message: "no answer from the server within \(configuration.callTimeout)")
            case .ended(let error): error
            }
        }
    }

    deinit {
        stopSignal.fire()
    }

    /// The server and schema, for messages.
    var location: String { configuration.displayURL }

    private static func clientConfiguration(_ configuration: Configuration, names: PostgresNames) -> PostgresClient.Configuration {
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
        client.options.additionalStartupParameters = startupParameters(configuration, names: names)
        return client
    }

    /// What every session of the store sets when it connects.
    static func startupParameters(_ configuration: Configuration, names: PostgresNames) -> [(String, String)] {
        let timeout = configuration.callTimeout.settingMilliseconds
        var parameters = [
            ("application_name", configuration.applicationName),
            // What the server ends on its own: a statement past the call's deadline, and a transaction whose client
            // went silent (a cut link): its locks would hold every other executor's claims and writes of those rows.
            ("statement_timeout", "\(timeout)"),
            ("idle_in_transaction_session_timeout", "\(2 * timeout)"),
            // A TCP peer that stopped answering is dropped within seconds, not hours (ignored on a Unix socket).
            ("tcp_keepalives_idle", "5"), ("tcp_keepalives_interval", "2"), ("tcp_keepalives_count", "3"),
            ("tcp_user_timeout", "\(timeout)"),
        ]
        if configuration.readOnly { parameters.append(("default_transaction_read_only", "on")) }
        // The store's schema first: the batch procedure (``BatchCall``) and its body name their tables unqualified;
        // every other statement qualifies them.
        parameters.append(("search_path", "\(names.quoted), public"))
        return parameters
    }

    // MARK: Running SQL

    /// Runs `body` on one connection within ``Configuration/callTimeout`` (getting the connection included). Past the
    /// deadline the connection is closed (which fails its statement at once; the pool opens another) and the call
    /// fails with `.unavailable`; a cancelled call ends the same way.
    ///
    /// The caller is resumed by the deadline itself, not by the end of `body`: a statement written to a connection
    /// the server had just closed can wait for an answer that never comes (postgres-nio fails it only if its
    /// channel handler still sees it), and such a call must not hold its caller. `body` then ends on its own, or
    /// never; its connection is closed either way, so no commit of a transaction can follow a deadline. A statement
    /// outside a transaction may still commit after it: a submit's insert settles that by ending its backend
    /// (``settleLostInsert(_:events:sentBy:after:)``).
    private func withCallDeadline<T: Sendable>(
        _ timeout: Duration, opening: Bool = false, cancellable: Bool = true,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let slot = ConnectionSlot()
        let outcome = CallOutcome<T>()
        let client = client
        // A call made while the store opens waits for the opening, which has a deadline of its own (a loaded server
        // creating many schemas at once can take longer than a call's): the call's starts after it.
        let waitsForOpening = !opening && lifecycle.withLock { state in
            if case .open = state.phase { false } else { true }
        }
        let deadline = waitsForOpening ? configuration.openTimeout + timeout : timeout
        let work = Task {
            do {
                if !opening { try await self.opened() }
                let value = try await client.withPooledConnection { connection in
                    guard slot.attach(connection) else { throw CallDeadlineExceeded() }
                    defer { slot.detach() }
                    return try await withTaskExecutorPreference(EventLoopTaskExecutor(connection.eventLoop)) {
                        try await body(connection)
                    }
                }
                outcome.finish(.success(value))
            } catch {
                outcome.finish(.failure(error))
            }
        }
        let timer = Task {
            do { try await Task.sleep(for: deadline) } catch { return }
            // A connection in use is closed (its statement fails at once) before the caller learns of the deadline,
            // so that nothing is committed after it; a wait for a connection is cancelled.
            _ = slot.expire()
            outcome.finish(.failure(CallDeadlineExceeded()))
            work.cancel()
        }
        let result = await withTaskCancellationHandler {
            await outcome.wait()
        } onCancel: {
            // The call itself is cancelled (a shutdown): a statement in flight is not waited for, unless its answer is
            // what says whether it committed (a statement outside a transaction).
            guard cancellable else { return }
            _ = slot.expire()
            outcome.finish(.failure(CancellationError()))
            work.cancel()
        }
        timer.cancel()
        switch result {
        case .success(let value):
            return value
        case .failure(let error) where error is CallDeadlineExceeded:
            throw expiredError(opening: opening)
        case .failure(let error):
            throw error
        }
    }

    private func expiredError(opening: Bool) -> TaskStoreError {
        if opening {
            return TaskStoreError(
                .cannotOpen, path: location,
                message: "no answer from the server within \(configuration.openTimeout)")
        }
        return notOpenReason
    }

    /// Runs `body` on one connection in a transaction, within the call's deadline: committed when it returns, rolled
    /// back when it throws (the error rethrown as a ``TaskStoreError``).
    ///
    /// When the connection is lost after the `COMMIT` was sent (a killed backend, a restart, a cut link), whether the
    /// transaction committed is looked up (`txid_status`) on another connection: the value is returned when it did.
    /// When that cannot be known yet (the server is down), `pending` is called with the transaction id before the
    /// `.unavailable` error is thrown, so that a caller can look again later (see ``Ambiguous``).
    ///
    /// With `notify`, the transaction wakes every listener of the schema (other executors, progressctl) when it
    /// commits; the notification goes in the statement that reads the transaction's id, before the `COMMIT`.
    @discardableResult
    func write<T: Sendable>(
        notify: Bool = false, pending: (@Sendable (Int64, T) -> Void)? = nil,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let last = "SELECT txid_current()" + (notify ? " FROM pg_notify('\(names.channel)', '')" : "")
        return try await write(
            pending: pending,
            identified: { connection in
                let value = try await body(connection)
                // Read last, once nothing can fail but the commit: only a commit needs to be looked up.
                let xid = try await self.rows(last, connection: connection) { try $0.decode(Int64.self) }.first
                return (value, xid)
            })
    }

    /// Runs `body` in a transaction as ``write(notify:pending:_:)`` does; `body` returns its value with the
    /// transaction's id (`txid_current()`), read in its last statement. `setUp`: a statement that sets the transaction
    /// up, run after `BEGIN`.
    func write<T: Sendable>(
        pending: (@Sendable (Int64, T) -> Void)? = nil, setUp: String? = nil,
        identified body: @escaping @Sendable (PostgresConnection) async throws -> (T, Int64?)
    ) async throws -> T {
        // Once the caller gave up (a deadline, a lost connection), the body sends no COMMIT; before, what it read is
        // recorded, so that the caller looks up a COMMIT that may have gone out. Either the caller sees the xid, or
        // the body sees that it was given up: never a COMMIT the caller does not know of (which would write the batch
        // twice, its new rows then conflicting with themselves).
        let commit = Mutex<(xid: Int64?, value: T?, abandoned: Bool)>((nil, nil, false))
        let logger = logger
        do {
            return try await withCallDeadline(configuration.callTimeout) { connection in
                try await connection.query("BEGIN", logger: logger)
                if let setUp { try await connection.query(PostgresQuery(unsafeSQL: setUp), logger: logger) }
                do {
                    let (value, xid) = try await body(connection)
                    let proceed = commit.withLock { state -> Bool in
                        guard !state.abandoned else { return false }
                        state.xid = xid
                        state.value = value
                        return true
                    }
                    guard proceed else { throw CallDeadlineExceeded() }
                    try await connection.query("COMMIT", logger: logger)
                    return value
                } catch {
                    if commit.withLock({ $0.value == nil }) {
                        _ = try? await connection.query("ROLLBACK", logger: logger)
                    }
                    throw error
                }
            }
        } catch {
            let storeError = Self.storeError(error, location: location)
            // A server's answer (an error with a SQLSTATE other than a shutdown's) is final. A lost connection or a
            // deadline is not: the COMMIT may have been sent (by this task, or by the body still running when the
            // deadline passed, before its connection closed) and gone through; the server knows.
            let recorded = commit.withLock { state -> Int64? in
                state.abandoned = true
                return state.xid
            }
            guard storeError.reason == .unavailable, let xid = recorded else { throw storeError }
            let status = await transactionStatus(xid)
            let value = commit.withLock { $0.value }
            switch status {
            case .committed?:
                guard let value else { throw storeError }  // A commit follows the body's value: not reached.
                logger.notice("a commit's answer was lost; it committed", metadata: ["xid": "\(xid)"])
                return value
            case .aborted?:
                throw storeError
            case nil:
                guard let value else { throw storeError }  // Never sent: it cannot commit.
                pending?(xid, value)
                throw TaskStoreError(
                    .unavailable, path: location,
                    message: "the connection was lost while committing, and whether it committed is not known yet "
                        + "(\(storeError.message))")
            }
        }
    }

    /// Whether a transaction committed, as the server knows it (`txid_status`); asked again while it is in progress
    /// (a backend that is still finishing), within the call timeout. `nil`: not known (no answer).
    func transactionStatus(_ xid: Int64) async -> TransactionStatus? {
        let deadline = ContinuousClock.now + configuration.callTimeout
        var wait = Duration.milliseconds(20)
        while ContinuousClock.now < deadline {
            let answer: String?? = try? await withCallDeadline(configuration.callTimeout) { connection in
                try await self.rows("SELECT txid_status($1)", bindings(xid), connection: connection) {
                    try $0.decode(String?.self)
                }.first ?? nil
            }
            switch answer {
            case "committed"??: return .committed
            case "aborted"??: return .aborted
            // Too old to be known (NULL): it ended long ago, and a lost answer is recent; not reached in practice.
            case .some(.none): return .aborted
            default: break
            }
            do { try await Task.sleep(for: wait) } catch { return nil }
            wait = min(wait * 2, .milliseconds(500))
        }
        return nil
    }

    /// How a transaction ended.
    enum TransactionStatus {
        case committed
        case aborted
    }

    /// Runs `body` on one connection outside a transaction (each statement commits on its own), within the call's
    /// deadline. Not `cancellable`: the caller's cancellation does not end the call, whose answer it then waits for.
    @discardableResult
    func read<T: Sendable>(
        timeout: Duration? = nil, cancellable: Bool = true,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        do {
            return try await withCallDeadline(timeout ?? configuration.callTimeout, cancellable: cancellable, body)
        } catch {
            throw Self.storeError(error, location: location)
        }
    }

}

/// The qualified names of the store's objects in its schema, checked once.
extension Duration {
    /// The duration as a PostgreSQL timeout setting: whole milliseconds, at least 1 (0 would turn the limit off).
    var settingMilliseconds: Int64 {
        max(1, components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000)
    }
}

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
    var writerMarks: String { "\(quoted).writer_marks" }
    var writerOutcomes: String { "\(quoted).writer_outcomes" }
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
