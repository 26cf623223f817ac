import Foundation
import Progression
#if PostgreSQL
import ProgressionPostgres
#endif

/// The store progressctl works on: a SQLite file or, with the `PostgreSQL` trait, a PostgreSQL schema named by a
/// `postgres://` URL. Commands see one concrete type whatever the database is; what only one kind of database has
/// (SQLite's integrity check, its file) is asked through the capabilities below.
final class OperatorStore: TaskStoreBackend {
    /// The database as the user named it: a file's path, or a URL.
    let location: String
    private let base: any TaskStoreBackend
    /// The SQLite store, when the database is a file.
    let sqlite: SQLiteTaskStore?

    init(sqlite store: SQLiteTaskStore) {
        base = store
        sqlite = store
        location = store.path
    }

    init(base: any TaskStoreBackend, location: String) {
        self.base = base
        sqlite = nil
        self.location = location
    }

    /// Whether the database is a file (whose identity `watch` checks while it runs).
    var isFile: Bool { sqlite != nil }

    /// The database's own consistency check: lines of problems, `["ok"]` when there are none.
    func integrityCheck() async throws -> [String] {
        if let sqlite { return try await sqlite.integrityCheck() }
        #if PostgreSQL
        if let postgres = base as? PostgresTaskStore { return try await postgres.integrityCheck() }
        #endif
        return ["ok"]
    }

    /// The migrations recorded in the database, in order.
    func schemaVersion() async throws -> [String] {
        if let sqlite { return try await sqlite.schemaVersion() }
        #if PostgreSQL
        if let postgres = base as? PostgresTaskStore { return try await postgres.schemaVersion() }
        #endif
        return []
    }

    /// The database's size on disk: a SQLite file with its log, or a PostgreSQL schema's tables and indexes; 0 when
    /// it cannot be read.
    func databaseBytes() async -> Int64 {
        if let sqlite { return Progressctl.Prune.databaseBytes(sqlite.path) }
        return (try? await base.statistics().databaseBytes) ?? 0
    }

    // MARK: TaskStore

    func task(id: String) async throws -> TaskRecord? { try await base.task(id: id) }
    func tree(of id: String) async throws -> [TaskRecord] { try await base.tree(of: id) }
    func roots(_ query: TaskQuery) async throws -> [TaskRecord] { try await base.roots(query) }
    func countRoots(_ query: TaskQuery, upTo bound: Int?) async throws -> Int {
        try await base.countRoots(query, upTo: bound)
    }
    func events(_ query: EventQuery) async throws -> [TaskEvent] { try await base.events(query) }
    func root(kind: String, idempotencyKey: String) async throws -> TaskRecord? {
        try await base.root(kind: kind, idempotencyKey: idempotencyKey)
    }
    func taskIDs(withPrefix prefix: String, rootsOnly: Bool, limit: Int) async throws -> [String] {
        try await base.taskIDs(withPrefix: prefix, rootsOnly: rootsOnly, limit: limit)
    }
    func statistics() async throws -> TaskStoreStatistics { try await base.statistics() }

    // MARK: TaskStoreBackend

    func reserveIdentifiers(_ count: Int) async throws -> Range<Int64> { try await base.reserveIdentifiers(count) }
    func insert(_ tasks: [TaskRecord], events: [TaskEvent]) async throws { try await base.insert(tasks, events: events) }
    func apply(_ batch: TaskBatch) async throws -> TaskBatchResult { try await base.apply(batch) }
    func change(_ request: TaskChangeRequest) async throws -> TaskChangeResult { try await base.change(request) }
    func claimRoots(_ claim: RootClaim) async throws -> [ClaimedRoot] { try await base.claimRoots(claim) }
    func transferTree(
        of rootID: String, ifStatusIn statuses: Set<TaskStatus>, from owner: String?, to newOwner: String?
    ) async throws -> Bool {
        try await base.transferTree(of: rootID, ifStatusIn: statuses, from: owner, to: newOwner)
    }
    func prune(finishedBefore date: Date, statuses: Set<TaskStatus>, dryRun: Bool) async throws -> PruneResult {
        try await base.prune(finishedBefore: date, statuses: statuses, dryRun: dryRun)
    }
    func saveOwner(_ owner: OwnerRecord) async throws { try await base.saveOwner(owner) }
    func owners() async throws -> [OwnerRecord] { try await base.owners() }
    func addControlRequest(_ request: ControlRequest) async throws -> Int64 { try await base.addControlRequest(request) }
    func pendingControlRequests(for ownerID: String?) async throws -> [ControlRequest] {
        try await base.pendingControlRequests(for: ownerID)
    }
    func controlRequest(id: Int64) async throws -> ControlRequest? { try await base.controlRequest(id: id) }
    func completeControlRequest(id: Int64, outcome: String, at date: Date) async throws {
        try await base.completeControlRequest(id: id, outcome: outcome, at: date)
    }
    func changeCounter() async throws -> Int64 { try await base.changeCounter() }
    func maintain(_ work: StoreMaintenance) async throws { try await base.maintain(work) }
    func saveKinds(_ kinds: [String: TaskOptions], at date: Date) async throws { try await base.saveKinds(kinds, at: date) }
    func registeredKinds() async throws -> [String: TaskOptions] { try await base.registeredKinds() }
}

/// `--db` and `$PROGRESSION_DB` as a PostgreSQL URL.
enum DatabaseURL {
    /// Whether `location` names a PostgreSQL database rather than a file.
    static func isPostgres(_ location: String) -> Bool {
        let lowered = location.lowercased()
        return lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://")
    }

    /// The store of a PostgreSQL URL; never creates the schema. It connects on its first call, whose failure (no
    /// server, no schema) is reported like any store error.
    ///
    /// - Throws: ``CLIError`` for a malformed URL, or when progressctl was built without PostgreSQL.
    static func openPostgres(_ url: String, readOnly: Bool) throws -> OperatorStore {
        #if PostgreSQL
        do {
            var configuration = try PostgresTaskStore.Configuration(url: url)
            configuration.createIfMissing = false
            configuration.readOnly = readOnly
            configuration.maximumConnections = 2
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
