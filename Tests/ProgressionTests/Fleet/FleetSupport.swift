import Foundation
import Progression
import ProgressionTestSupport
import Synchronization
import Testing

#if PostgreSQL
import ProgressionPostgres
import ProgressionPostgresTestSupport
#endif

/// Several connections to one database, as several processes have: a producer and workers in one test.
struct SharedDatabase: Sendable {
    let kind: StoreKind
    let directory: TemporaryDirectory
    private let memory: InMemoryTaskStore?
    /// The stores opened, closed by ``closeAll()`` (a PostgreSQL store holds connections until it is closed).
    private let opened = Opened()
    #if PostgreSQL
    private let postgres: PostgresTaskStore.Configuration?
    #endif

    init(_ kind: StoreKind) throws {
        self.kind = kind
        directory = try TemporaryDirectory()
        memory = kind == .memory ? InMemoryTaskStore() : nil
        #if PostgreSQL
        postgres =
            kind == .postgres
            ? try LocalPostgresServer.shared().configuration(
                schema: "fleet_" + UUID().uuidString.prefix(8).lowercased() + "_\(UInt32.random(in: 0...UInt32.max))")
            : nil
        #endif
    }

    /// A new connection (the same store for the in-memory kind).
    func open() throws -> any TaskStoreBackend {
        if let memory { return memory }
        #if PostgreSQL
        if let postgres {
            let store = try PostgresTaskStore.start(configuration: postgres)
            opened.stores.withLock { $0.append(store) }
            return store
        }
        #endif
        return try SQLiteTaskStore(path: directory.file("fleet.sqlite"))
    }

    /// Closes the PostgreSQL stores opened so far (their connections count against the test server's limit).
    func closeAll() async {
        #if PostgreSQL
        let stores = opened.stores.withLock { stores in
            defer { stores.removeAll() }
            return stores
        }
        for store in stores { await (store as? PostgresTaskStore)?.close() }
        #endif
    }

    final class Opened: Sendable {
        let stores = Mutex<[any TaskStoreBackend]>([])
    }

    /// A worker on a connection of its own.
    func worker(
        slots: Int, clock: (any Clock<Duration>)? = nil, configure: (inout TaskExecutor.Configuration) -> Void = { _ in }
    ) throws -> TaskExecutor {
        var configuration = TaskExecutor.Configuration()
        configuration.maxConcurrentTasks = slots
        configuration.completedTaskVisibility = .seconds(600)
        configuration.writeWindow = .milliseconds(5)
        configuration.controlPollInterval = .milliseconds(20)
        // A change of a task another live worker holds waits for its answer: generous, for a loaded machine.
        configuration.controlAnswerTimeout = .seconds(60)
        if let clock { configuration.clock = clock }
        configure(&configuration)
        return TaskExecutor(backend: try open(), configuration: configuration)
    }

    /// A producer on a connection of its own.
    func producer(clock: (any Clock<Duration>)? = nil) throws -> JobClient {
        var configuration = JobClient.Configuration()
        if let clock { configuration.clock = clock }
        return JobClient(backend: try open(), configuration: configuration)
    }
}

/// A job that doubles its number and says which worker ran it.
struct Doubler: JobKind {
    struct Input: Codable, Sendable { var n: Int }
    struct Output: Codable, Sendable, Equatable {
        var doubled: Int
        var worker: String
    }
    static let name = "double"
    let worker: String

    func run(_ input: Input, context: any TaskContext) async throws -> Output {
        try await context.report(.progress(0.5))
        return Output(doubled: input.n * 2, worker: worker)
    }
}

/// A job that returns its text.
struct Echo: JobKind {
    struct Input: Codable, Sendable { var text: String }
    static let name = "echo"

    func run(_ input: Input, context: any TaskContext) async throws -> String { input.text }
}

/// A job that holds its slot until the test opens its gate, counting its starts and which worker ran it.
struct Held: JobKind {
    struct Input: Codable, Sendable { var n: Int }
    static let name = "held"
    static let options = TaskOptions.interactive
    let worker: String
    let gate: Gate
    let runs: Runs

    func run(_ input: Input, context: any TaskContext) async throws {
        runs.started(input.n, by: worker)
        await gate.wait()
        try await context.report(.progress(1))
    }
}

/// Who ran what, and how many run at once.
final class Runs: Sendable {
    private let state = Mutex<(byWorker: [String: [Int]], running: Int, most: Int)>(([:], 0, 0))

    func started(_ n: Int, by worker: String) {
        state.withLock { state in
            state.byWorker[worker, default: []].append(n)
            state.running += 1
            state.most = max(state.most, state.running)
        }
    }

    func ended() {
        state.withLock { $0.running -= 1 }
    }

    var byWorker: [String: [Int]] { state.withLock { $0.byWorker } }
    var total: Int { state.withLock { $0.byWorker.values.reduce(0) { $0 + $1.count } } }
}

extension TaskStore {
    /// Roots by status and owner, for checks that sample the store.
    func census() async throws -> [TaskRecord] {
        try await roots(TaskQuery(limit: 100_000))
    }
}
