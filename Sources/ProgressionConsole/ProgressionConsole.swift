#if Console
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Progression
import ProgressionOperator
import ServiceLifecycle
import Synchronization
#if PostgreSQL
import ProgressionPostgres
#endif

/// The operator's console in a browser: what `progressctl` shows — an overview, the list of tasks with filters, each
/// job's tree, input, result, errors and history — with live progress bars, and its changes (pause, resume, cancel,
/// retry, remove; one task, or every task a filter chooses) made through the same control path as `progressctl`.
///
/// A service mounts it in its own Hummingbird application, on the store its executor uses, and runs it with its
/// other services (the console's one poller of the store's change feed):
///
/// ```swift
/// import Hummingbird
/// import Progression
/// import ProgressionConsole
///
/// let store = try SQLiteTaskStore(path: "/var/lib/myservice/tasks.sqlite")
/// let executor = TaskExecutor(store: store)
/// let console = try ProgressionConsole(
///     store: store, configuration: .init(path: "/console", token: ProcessInfo.processInfo.environment["CONSOLE_TOKEN"]))
/// let router = Router()
/// console.addRoutes(to: router)
/// let app = Application(router: router, services: [executor, console])
/// try await app.runService()
/// ```
///
/// Without a token the console only reads. With one, every change needs it: a bearer header, or a session opened by
/// signing in with it, whose CSRF token every form carries. Operators can run the same console on any database with
/// `progressctl console --db …` (built with the `Console` trait).
///
/// Every route answers HTML to a browser, JSON to `Accept: application/json` (or `?format=json`), and a stream of
/// Server-Sent Events to `Accept: text/event-stream` (the page's live updates).
public final class ProgressionConsole: Service, Sendable {
    /// Where the console is mounted and who may change tasks.
    public struct Configuration: Sendable {
        /// The path the routes are mounted at: `""` for the root of the server, else `/console`-like.
        public var path: String
        /// The token that opens changes (at least 16 characters); `nil`: the console only reads.
        public var token: String?
        /// How often the store's change counter is looked at.
        public var changePollInterval: Duration = .milliseconds(100)
        /// The shortest time between two updates of one page: 250 ms, at most four a second.
        public var updateInterval: Duration = .milliseconds(250)
        /// The shortest time between two updates of the overview (its counts read every root's status).
        public var overviewInterval: Duration = .seconds(5)
        /// How long a change waits for the executor that holds the task to apply it (as `progressctl --wait`).
        public var controlWait: Duration = .seconds(5)
        /// Whether `GET /metrics` (the fleet's gauges in Prometheus's text format) needs the token as a bearer header;
        /// by default it is read as the pages are, without it (it says no more than the overview).
        public var metricsNeedToken = false
        /// How long a read of the gauges answers the scrapes that follow it.
        public var metricsCacheTime: Duration = .seconds(5)
        /// How long without a heartbeat an executor counts as gone in the gauges (as the executors' `ownerStaleAfter`).
        public var ownerStaleAfter: Duration = .seconds(15)
        /// Whether the session and CSRF cookies carry `Secure` (sent back over HTTPS only). `nil` (the default): when
        /// the request came over HTTPS, as a reverse proxy that ends TLS says with `X-Forwarded-Proto: https` or
        /// `Forwarded: proto=https`; set `true` when the console is only ever reached over HTTPS.
        public var secureCookies: Bool? = nil

        /// A console at `path`, read-only without a `token`.
        public init(path: String = "/console", token: String? = nil) {
            self.path = path
            self.token = token
        }
    }

    /// Why a console cannot be made.
    public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
        /// What is wrong, in a sentence.
        public var description: String
    }

    /// The shortest token accepted.
    public static let shortestToken = 16

    let configuration: Configuration
    let base: String
    let reader: ConsoleReader
    let access: ConsoleAccess
    let hub: LiveHub
    let flashes = FlashMessages()
    /// The last read of the fleet's gauges, for the scrapes within ``Configuration/metricsCacheTime``.
    let lastGauges = Mutex<(at: ContinuousClock.Instant, text: String)?>(nil)
    let logger: Logger

    /// A console on the store of an executor (a `SQLiteTaskStore`, a `PostgresTaskStore` or an
    /// `InMemoryTaskStore`).
    ///
    /// For a SQLite store the console opens a connection of its own to the same file (read-only without a token):
    /// its reads never wait behind the executor's writes, it sees the executor's commits in the file's change
    /// counter, and the executor sees its control requests the same way it sees progressctl's.
    ///
    /// - Throws: ``ConfigurationError`` for a path or token that is not allowed, or a store of another kind;
    ///   `TaskStoreError` when the file cannot be opened.
    public convenience init(
        store: any TaskStore, configuration: Configuration = .init(),
        logger: Logger = Logger(label: "progression.console")
    ) throws {
        let operatorStore: OperatorStore
        if let sqlite = store as? SQLiteTaskStore {
            var options = SQLiteTaskStore.Configuration()
            options.createIfMissing = false
            options.readOnly = configuration.token == nil
            operatorStore = OperatorStore(sqlite: try SQLiteTaskStore(path: sqlite.path, configuration: options))
        } else if let memory = store as? InMemoryTaskStore {
            operatorStore = OperatorStore(base: memory, location: "memory")
        } else {
            #if PostgreSQL
            if let postgres = store as? PostgresTaskStore {
                operatorStore = OperatorStore(base: postgres, location: postgres.configuration.displayURL)
            } else {
                throw ConfigurationError(description: "the console reads a SQLiteTaskStore, PostgresTaskStore or InMemoryTaskStore, not a \(type(of: store))")
            }
            #else
            throw ConfigurationError(description: "the console reads a SQLiteTaskStore or InMemoryTaskStore, not a \(type(of: store))")
            #endif
        }
        try self.init(operatorStore: operatorStore, configuration: configuration, logger: logger)
    }

    /// A console on the store of `executor` (see ``init(store:configuration:logger:)``).
    ///
    /// - Throws: as ``init(store:configuration:logger:)``.
    public convenience init(
        executor: TaskExecutor, configuration: Configuration = .init(),
        logger: Logger = Logger(label: "progression.console")
    ) throws {
        try self.init(store: executor.store, configuration: configuration, logger: logger)
    }

    /// A console on the store progressctl opened.
    package init(operatorStore: OperatorStore, configuration: Configuration, logger: Logger) throws {
        let path = configuration.path
        guard path.isEmpty || (path.hasPrefix("/") && !path.hasSuffix("/") && !path.contains("//")
            && path.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F && !"?#%\"'<>\\".unicodeScalars.contains($0) }))
        else {
            throw ConfigurationError(description: "the console's path '\(path)' must be empty or start with '/' (not end with one) and hold no spaces, quotes, '?', '#' or '%'")
        }
        if let token = configuration.token {
            guard token.count >= Self.shortestToken, !token.contains(where: \.isWhitespace) else {
                throw ConfigurationError(description: "the console's token must be at least \(Self.shortestToken) characters, without spaces")
            }
        }
        if configuration.metricsNeedToken, configuration.token == nil {
            throw ConfigurationError(description: "the console's metrics need a token, and it has none")
        }
        self.configuration = configuration
        base = path
        reader = ConsoleReader(store: operatorStore)
        access = ConsoleAccess(token: configuration.token)
        hub = LiveHub(store: operatorStore, pollInterval: configuration.changePollInterval, logger: logger)
        self.logger = logger
    }

    /// Runs the console's poller of the change feed until the service group shuts down; the pages' live updates
    /// stop with it.
    public func run() async throws {
        await hub.run()
    }

    /// The store the console reads.
    package var store: OperatorStore { reader.store }

    /// The live hub, for tests and the benchmark.
    package var liveHub: LiveHub { hub }
}

/// Messages left by a change for the page it redirects to, kept a minute.
final class FlashMessages: Sendable {
    private let messages = Mutex<[String: (notice: PageContext.Notice, expires: ContinuousClock.Instant)]>([:])

    /// Keeps `notice`; returns its key.
    func keep(_ notice: PageContext.Notice) -> String {
        let key = ConsoleAccess.randomToken()
        let now = ContinuousClock.now
        messages.withLock { messages in
            messages = messages.filter { $0.value.expires > now }
            if messages.count < 1_000 { messages[key] = (notice, now + .seconds(60)) }
        }
        return key
    }

    /// The notice kept as `key`, once.
    func take(_ key: String?) -> PageContext.Notice? {
        guard let key else { return nil }
        return messages.withLock { $0.removeValue(forKey: key)?.notice }
    }
}
#endif
