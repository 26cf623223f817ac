import Foundation
import ProgressionSQLite

/// The durable ``TaskStore``: one SQLite database file in WAL mode.
///
/// The store owns one connection and runs on a dispatch queue of its own, so a statement that waits (on the busy
/// timeout, on the disk) never blocks Swift's cooperative thread pool. Cancelling the Swift task that awaits a call
/// interrupts the statement it runs (`sqlite3_interrupt`); the transaction is rolled back.
///
/// Opening it creates the file with mode 0600 when it does not exist, and applies the migrations embedded in the binary.
/// A database written by a newer version, another application's database (tables but no Progression schema), an
/// empty file this process did not create (a truncated database), and a path through a symbolic link owned by another
/// user are refused and left untouched.
///
/// ```swift
/// let store = try SQLiteTaskStore(path: "/var/lib/myservice/tasks.sqlite")
/// let executor = TaskExecutor(store: store)
/// ```
public actor SQLiteTaskStore: TaskStore {
    /// How the database is opened.
    public struct Configuration: Sendable {
        /// `.normal`: commits survive a process crash; a power loss may lose the last ones (never corrupts).
        /// `.full`: every commit is synced to the disk.
        public enum Synchronous: Sendable { case normal, full }

        public var synchronous: Synchronous = .normal
        /// How long to wait for another process's write lock before failing with `.busy`.
        public var busyTimeout: Duration = .seconds(5)
        /// Create the file when it does not exist.
        public var createIfMissing = true
        /// Open without writing anything (no migration; every write fails), and without leaving a `-wal` or `-shm`
        /// file that the database's writer could not use.
        public var readOnly = false

        public init() {}
    }

    /// The database file.
    public nonisolated let path: String
    private let queue: DispatchSerialExecutor
    private let connection: SQLiteConnection
    private let encoder: JSONEncoder
    private let decoder = JSONDecoder()
    /// Tasks share a few option sets: their JSON is encoded once.
    private var encodedOptions: [TaskOptions: String] = [:]

    public nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }

    /// Opens the database at `path`, creating and migrating it as needed.
    ///
    /// When `path` is ``defaultPath``, its missing directories are created with mode 0700.
    ///
    /// - Throws: ``TaskStoreError`` naming the file: `.cannotOpen` (missing directory or file, a dangling symbolic
    ///   link or one owned by another user), `.notADatabase`, `.foreignDatabase`, `.corrupt` (truncated, or empty but
    ///   not new), `.readOnly`, `.busy`, `.schemaTooNew`. The file is left as it was.
    public init(path: String, configuration: Configuration = .init()) throws {
        self.path = path
        queue = DispatchSerialExecutor(label: "progression.sqlite")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        self.encoder = encoder
        var options = SQLiteConnectionOptions()
        options.readOnly = configuration.readOnly
        options.create = configuration.createIfMissing
        options.busyTimeout = configuration.busyTimeout
        options.synchronous = configuration.synchronous == .full ? .full : .normal
        let migrator = SQLiteMigrator(migrations: SQLiteMigration.embedded)
        options.validate = { connection in try migrator.checkOwnership(of: connection) }
        if path == Self.defaultPath, configuration.createIfMissing, !configuration.readOnly {
            try Self.createParentDirectories(of: path)
        }
        do {
            connection = try Self.openRetryingBusy(path: path, options: options, readOnly: configuration.readOnly)
        } catch let error as SQLiteError {
            throw Self.storeError(error, path: path)
        }
    }

    /// Opens and migrates the database. Two processes opening a new file at once can meet SQLite's deadlock
    /// avoidance (`SQLITE_BUSY` without waiting) while one switches it to WAL or migrates it: the open is tried again
    /// until the busy timeout runs out.
    private static func openRetryingBusy(
        path: String, options: SQLiteConnectionOptions, readOnly: Bool
    ) throws -> SQLiteConnection {
        let deadline = ContinuousClock.now + options.busyTimeout
        while true {
            do {
                return try openAndMigrate(path: path, options: options, readOnly: readOnly)
            } catch let error as SQLiteError where error.code.primary == SQLiteError.busy && ContinuousClock.now < deadline {
                usleep(20_000)
            }
        }
    }

    private static func openAndMigrate(
        path: String, options: SQLiteConnectionOptions, readOnly: Bool
    ) throws -> SQLiteConnection {
        do {
            // `options.validate` refuses another application's database before anything is written to it.
            let connection = try SQLiteConnection(path: path, options: options)
            let migrator = SQLiteMigrator(migrations: SQLiteMigration.embedded)
            if readOnly {
                let pending = try migrator.pendingMigrations(in: connection)
                guard pending.isEmpty else {
                    throw TaskStoreError(
                        .cannotOpen, path: path,
                        message: "the database needs migrations \(pending.map(\.identifier)) and was opened read-only")
                }
            } else {
                try migrator.migrate(connection, now: Date().storedMilliseconds)
            }
            return connection
        }
    }

    /// The default database path: `$PROGRESSION_DB`, else `$XDG_STATE_HOME/progression/progression.sqlite`, else
    /// `$HOME/.local/state/progression/progression.sqlite`. The library and `progressctl` agree on it.
    ///
    /// As the XDG Base Directory specification says, `$XDG_STATE_HOME` counts only when it is an absolute path; a
    /// missing or relative `$HOME` falls back to the home directory of the user database.
    public static var defaultPath: String {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["PROGRESSION_DB"], !path.isEmpty { return path }
        let state: String
        if let directory = environment["XDG_STATE_HOME"], directory.hasPrefix("/") {
            state = directory
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            state = (home.hasSuffix("/") ? String(home.dropLast()) : home) + "/.local/state"
        } else {
            state = NSHomeDirectory() + "/.local/state"
        }
        return state + "/progression/progression.sqlite"
    }

    /// Creates the missing directories above `path` with mode 0700 whatever the umask: the state directory holds one
    /// user's tasks. Directories that exist are left as they are.
    ///
    /// - Throws: ``TaskStoreError`` (`.cannotOpen`) naming the directory that cannot be created.
    package static func createParentDirectories(of path: String) throws {
        var missing: [String] = []
        var directory = (path as NSString).deletingLastPathComponent
        var info = stat()
        while !directory.isEmpty, directory != "/", stat(directory, &info) != 0 {
            missing.append(directory)
            directory = (directory as NSString).deletingLastPathComponent
        }
        for directory in missing.reversed() {
            guard mkdir(directory, 0o700) == 0 || errno == EEXIST else {
                throw TaskStoreError(
                    .cannotOpen, path: path,
                    message: "cannot create the directory '\(directory)': \(String(cString: strerror(errno)))")
            }
            chmod(directory, 0o700)
        }
    }

    // MARK: Writing

    public func insert(_ tasks: [TaskRecord], events: [TaskEvent]) async throws {
        try await write { connection in
            let insert = try connection.cachedStatement(Self.insertSQL)
            for task in tasks {
                try insert.execute(try values(of: task))
            }
            try insertEvents(events, connection: connection)
        }
    }

    public func apply(_ batch: TaskBatch) async throws -> TaskBatchResult {
        guard !batch.isEmpty else { return TaskBatchResult() }
        return try await write { connection in
            var rejected: [String] = []
            var conflicting: [String] = []
            let guardValue: SQLiteValue = batch.owner.map { .text($0) } ?? .null
            if !batch.inserts.isEmpty {
                let insert = try connection.cachedStatement(Self.insertSQL + " ON CONFLICT DO NOTHING")
                for record in batch.inserts {
                    try insert.execute(try values(of: record))
                    if connection.changes == 0 { conflicting.append(record.id) }
                }
            }
            if !batch.records.isEmpty {
                let upsert = try connection.cachedStatement(Self.upsertSQL)
                for record in batch.records {
                    try upsert.execute(try values(of: record) + [guardValue])
                    if connection.changes == 0 { rejected.append(record.id) }
                }
            }
            if !batch.updates.isEmpty {
                let update = try connection.cachedStatement(Self.updateSQL)
                for record in batch.updates {
                    try update.execute(Self.mutableValues(of: record) + [.text(record.id), guardValue])
                    if connection.changes == 0 { rejected.append(record.id) }
                }
            }
            if !batch.progress.isEmpty {
                let update = try connection.cachedStatement(
                    "UPDATE tasks SET progress = ?, step = ?, updated_at = ? WHERE id = ? AND (?5 IS NULL OR owner_id IS ?5)"
                )
                for change in batch.progress {
                    defer { update.reset() }
                    if let progress = change.progress { try update.bind(progress, at: 1) } else { try update.bindNull(at: 1) }
                    if let step = change.step { try update.bind(step, at: 2) } else { try update.bindNull(at: 2) }
                    try update.bind(change.updatedAt.storedMilliseconds, at: 3)
                    try update.bind(change.id, at: 4)
                    try update.bind(guardValue, at: 5)
                    try update.step()
                    if connection.changes == 0 { rejected.append(change.id) }
                }
            }
            if rejected.isEmpty && conflicting.isEmpty {
                try insertEvents(batch.events, connection: connection)
            } else {
                let skipped = Set(rejected + conflicting)
                try insertEvents(batch.events.filter { !skipped.contains($0.taskID) }, connection: connection)
            }
            return TaskBatchResult(rejectedTaskIDs: rejected, conflictingTaskIDs: conflicting)
        }
    }

    public func update(
        _ record: TaskRecord, ifStatusIn statuses: Set<TaskStatus>, ownerIs owner: String?, events: [TaskEvent]
    ) async throws -> Bool {
        try await write { connection in
            let current = try connection.query(
                "SELECT status, owner_id FROM tasks WHERE id = ?", [.text(record.id)]
            ) { (status: $0.text(at: 0), owner: $0.optionalText(at: 1)) }.first
            guard let current, let status = TaskStatus(rawValue: current.status), statuses.contains(status),
                current.owner == owner
            else { return false }
            try connection.cachedStatement(Self.upsertSQL).execute(try values(of: record) + [.null])
            try insertEvents(events, connection: connection)
            return true
        }
    }

    public func claimRoots(
        heldBy fromOwners: [String?], statuses: Set<TaskStatus>, kinds: Set<String>?, newOwner: String, limit: Int,
        now: Date
    ) async throws -> [TaskRecord] {
        guard !fromOwners.isEmpty, !statuses.isEmpty, limit > 0 else { return [] }
        return try await write { connection in
            let named = fromOwners.compactMap { $0 }
            var ownerConditions: [String] = []
            if fromOwners.contains(where: { $0 == nil }) { ownerConditions.append("owner_id IS NULL") }
            if !named.isEmpty { ownerConditions.append("owner_id IN (\(Self.placeholders(named.count)))") }
            let statusList = statuses.map(\.rawValue).sorted()
            let kindList = kinds.map { $0.sorted() }
            let kindCondition = kindList.map {
                $0.isEmpty ? "AND kind IS NULL" : "AND (kind IS NULL OR kind IN (\(Self.placeholders($0.count))))"
            } ?? ""
            let sql = """
                SELECT \(Self.columns) FROM tasks
                WHERE parent_id IS NULL AND status IN (\(Self.placeholders(statusList.count)))
                  AND (\(ownerConditions.joined(separator: " OR "))) \(kindCondition)
                ORDER BY priority DESC, created_at, id LIMIT ?
                """
            let parameters =
                statusList.map { SQLiteValue.text($0) } + named.map { .text($0) } + (kindList ?? []).map { .text($0) }
                + [.integer(Int64(limit))]
            let claimed = try connection.query(sql, parameters) { try record(from: $0) }
            let setOwner = try connection.cachedStatement("UPDATE tasks SET owner_id = ? WHERE root_id = ?")
            for root in claimed {
                try setOwner.execute([.text(newOwner), .text(root.id)])
            }
            return claimed
        }
    }

    public func transferTree(
        of rootID: String, ifStatusIn statuses: Set<TaskStatus>, from owner: String?, to newOwner: String?
    ) async throws -> Bool {
        try await write { connection in
            let current = try connection.query(
                "SELECT status, owner_id FROM tasks WHERE id = ? AND parent_id IS NULL", [.text(rootID)]
            ) { (status: $0.text(at: 0), owner: $0.optionalText(at: 1)) }.first
            guard let current, let status = TaskStatus(rawValue: current.status), statuses.contains(status),
                current.owner == owner
            else { return false }
            try connection.execute(
                "UPDATE tasks SET owner_id = ? WHERE root_id = ?", [SQLiteValue(newOwner), .text(rootID)])
            return true
        }
    }

    public func deleteTree(of id: String, ifStatusIn statuses: Set<TaskStatus>) async throws -> Int? {
        try await write { connection in
            let nodes = try subtree(of: id, connection: connection)
            guard let top = nodes.first else { return 0 }
            guard statuses.contains(top.status) else { return nil }
            if top.isRoot {
                try connection.execute("DELETE FROM events WHERE root_id = ?", [.text(id)])
                try connection.execute("DELETE FROM tasks WHERE root_id = ?", [.text(id)])
            } else {
                let deleteEvents = try connection.cachedStatement("DELETE FROM events WHERE root_id = ? AND task_id = ?")
                let deleteTask = try connection.cachedStatement("DELETE FROM tasks WHERE id = ?")
                for node in nodes.reversed() {
                    try deleteEvents.execute([.text(node.rootID), .text(node.id)])
                    try deleteTask.execute([.text(node.id)])
                }
            }
            return nodes.count
        }
    }

    public func prune(finishedBefore date: Date, statuses: Set<TaskStatus>) async throws -> Int {
        let finished = statuses.filter(\.isFinished).map(\.rawValue).sorted()
        guard !finished.isEmpty else { return 0 }
        return try await write { connection in
            let roots = try connection.query(
                """
                SELECT id FROM tasks WHERE parent_id IS NULL AND finished_at < ?
                  AND status IN (\(Self.placeholders(finished.count)))
                """,
                [.integer(date.storedMilliseconds)] + finished.map { .text($0) }
            ) { $0.text(at: 0) }
            let deleteEvents = try connection.cachedStatement("DELETE FROM events WHERE root_id = ?")
            let deleteTasks = try connection.cachedStatement("DELETE FROM tasks WHERE root_id = ?")
            for root in roots {
                try deleteEvents.execute([.text(root)])
                try deleteTasks.execute([.text(root)])
            }
            return roots.count
        }
    }

    public func saveOwner(_ owner: OwnerRecord) async throws {
        try await write { connection in
            try connection.execute(
                """
                INSERT INTO owners (id, host, pid, started_at, heartbeat_at, stopped_at) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,
                  heartbeat_at = excluded.heartbeat_at, stopped_at = excluded.stopped_at
                """,
                [
                    .text(owner.id), .text(owner.host), .integer(Int64(owner.pid)),
                    .integer(owner.startedAt.storedMilliseconds), .integer(owner.heartbeatAt.storedMilliseconds),
                    SQLiteValue(owner.stoppedAt?.storedMilliseconds),
                ])
        }
    }

    public func addControlRequest(_ request: ControlRequest) async throws -> Int64 {
        try await write { connection in
            try connection.execute(
                """
                INSERT INTO control_requests (task_id, action, owner_id, requested_at, handled_at, outcome)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(request.taskID), .text(request.action.rawValue), SQLiteValue(request.ownerID),
                    .integer(request.requestedAt.storedMilliseconds), SQLiteValue(request.handledAt?.storedMilliseconds),
                    SQLiteValue(request.outcome),
                ])
            return connection.lastInsertRowID
        }
    }

    public func completeControlRequest(id: Int64, outcome: String, at date: Date) async throws {
        try await write { connection in
            try connection.execute(
                "UPDATE control_requests SET handled_at = ?, outcome = ? WHERE id = ?",
                [.integer(date.storedMilliseconds), .text(outcome), .integer(id)])
        }
    }

    // MARK: Reading

    public func task(id: String) async throws -> TaskRecord? {
        try await read { connection in
            try connection.query("SELECT \(Self.columns) FROM tasks WHERE id = ?", [.text(id)]) {
                try record(from: $0)
            }.first
        }
    }

    public func tree(of id: String) async throws -> [TaskRecord] {
        try await read { connection in try subtree(of: id, connection: connection) }
    }

    public func roots(_ query: TaskQuery) async throws -> [TaskRecord] {
        try await read { connection in
            var conditions = ["parent_id IS NULL"]
            var parameters: [SQLiteValue] = []
            if let statuses = query.statuses {
                let list = statuses.map(\.rawValue).sorted()
                conditions.append(list.isEmpty ? "0" : "status IN (\(Self.placeholders(list.count)))")
                parameters += list.map { .text($0) }
            }
            if let kind = query.kind {
                conditions.append("kind = ?")
                parameters.append(.text(kind))
            }
            if let since = query.createdSince {
                conditions.append("created_at >= ?")
                parameters.append(.integer(since.storedMilliseconds))
            }
            parameters += [.integer(Int64(max(0, query.limit))), .integer(Int64(max(0, query.offset)))]
            return try connection.query(
                """
                SELECT \(Self.columns) FROM tasks WHERE \(conditions.joined(separator: " AND "))
                ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?
                """, parameters
            ) { try record(from: $0) }
        }
    }

    public func events(of id: String, after sequence: Int64?, limit: Int) async throws -> [TaskEvent] {
        try await read { connection in
            let nodes = try subtree(of: id, connection: connection)
            guard let top = nodes.first else { return [] }
            let ids = Set(nodes.map(\.id))
            var events: [TaskEvent] = []
            var cursor = sequence ?? 0
            // Page through the root's history; for a subtree, keep its nodes' events only.
            while events.count < limit {
                let page = try connection.query(
                    """
                    SELECT id, task_id, root_id, kind, at, attempt, progress, message, error_type FROM events
                    WHERE root_id = ? AND id > ? ORDER BY id LIMIT ?
                    """, [.text(top.rootID), .integer(cursor), .integer(Int64(max(limit, 1)))]
                ) { row in
                    TaskEvent(
                        sequence: row.int64(at: 0), taskID: row.text(at: 1), rootID: row.text(at: 2),
                        kind: TaskEvent.Kind(rawValue: row.text(at: 3)) ?? .step,
                        at: Date(storedMilliseconds: row.int64(at: 4)), attempt: Int(row.int64(at: 5)),
                        progress: row.optionalDouble(at: 6), message: row.optionalText(at: 7),
                        errorType: row.optionalText(at: 8))
                }
                guard let last = page.last else { break }
                cursor = last.sequence ?? cursor
                events += top.isRoot ? page : page.filter { ids.contains($0.taskID) }
            }
            return Array(events.prefix(limit))
        }
    }

    public func root(kind: String, idempotencyKey: String) async throws -> TaskRecord? {
        try await read { connection in
            try connection.query(
                "SELECT \(Self.columns) FROM tasks WHERE kind = ? AND idempotency_key = ?",
                [.text(kind), .text(idempotencyKey)]
            ) { try record(from: $0) }.first
        }
    }

    public func taskIDs(withPrefix prefix: String, limit: Int) async throws -> [String] {
        try await read { connection in
            // A range on the primary key: 'prefix' <= id < 'prefix' + U+10FFFF, without LIKE's wildcards.
            try connection.query(
                "SELECT id FROM tasks WHERE id >= ?1 AND id < ?1 || char(1114111) ORDER BY id LIMIT ?2",
                [.text(prefix), .integer(Int64(limit))]
            ) { $0.text(at: 0) }
        }
    }

    public func owners() async throws -> [OwnerRecord] {
        try await read { connection in
            try connection.query(
                "SELECT id, host, pid, started_at, heartbeat_at, stopped_at FROM owners ORDER BY started_at, id"
            ) { row in
                OwnerRecord(
                    id: row.text(at: 0), host: row.text(at: 1), pid: Int32(truncatingIfNeeded: row.int64(at: 2)),
                    startedAt: Date(storedMilliseconds: row.int64(at: 3)),
                    heartbeatAt: Date(storedMilliseconds: row.int64(at: 4)),
                    stoppedAt: row.optionalInt64(at: 5).map(Date.init(storedMilliseconds:)))
            }
        }
    }

    public func pendingControlRequests(for ownerID: String?) async throws -> [ControlRequest] {
        try await read { connection in
            try connection.query(
                "\(Self.controlSelect) WHERE handled_at IS NULL AND owner_id IS ? ORDER BY id",
                [SQLiteValue(ownerID)], Self.controlRequest)
        }
    }

    public func controlRequest(id: Int64) async throws -> ControlRequest? {
        try await read { connection in
            try connection.query("\(Self.controlSelect) WHERE id = ?", [.integer(id)], Self.controlRequest).first
        }
    }

    public func changeCounter() async throws -> Int64 {
        try await read { connection in
            try connection.scalarInt("PRAGMA data_version") ?? 0
        }
    }

    public func statistics() async throws -> TaskStoreStatistics {
        try await read { connection in
            var statistics = TaskStoreStatistics()
            for row in try connection.query(
                "SELECT status, count(*) FROM tasks WHERE parent_id IS NULL GROUP BY status", [],
                { ($0.text(at: 0), Int($0.int64(at: 1))) })
            {
                statistics.rootsByStatus[row.0] = row.1
            }
            for row in try connection.query(
                "SELECT coalesce(kind, ''), count(*) FROM tasks WHERE parent_id IS NULL GROUP BY kind", [],
                { ($0.text(at: 0), Int($0.int64(at: 1))) })
            {
                statistics.rootsByKind[row.0] = row.1
            }
            statistics.oldestPendingCreatedAt = try connection.scalarInt(
                "SELECT min(created_at) FROM tasks WHERE parent_id IS NULL AND status = 'pending'"
            ).map(Date.init(storedMilliseconds:))
            statistics.events = Int(try connection.scalarInt("SELECT count(*) FROM events") ?? 0)
            let pages = try connection.scalarInt("PRAGMA page_count") ?? 0
            let pageSize = try connection.scalarInt("PRAGMA page_size") ?? 0
            statistics.databaseBytes = pages * pageSize
            return statistics
        }
    }

    /// Runs `PRAGMA integrity_check` and returns its lines (`["ok"]` for a sound file).
    public func integrityCheck() async throws -> [String] {
        try await read { connection in
            try connection.query("PRAGMA integrity_check", []) { $0.text(at: 0) }
        }
    }

    /// The migrations recorded in the database, in order.
    public func schemaVersion() async throws -> [String] {
        try await read { connection in
            try SQLiteMigrator(migrations: SQLiteMigration.embedded).appliedMigrations(in: connection).map(\.identifier)
        }
    }

    /// Runs a passive WAL checkpoint: copies what it can into the database file without waiting for readers.
    public func checkpointWAL() async throws {
        try await read { connection in try connection.execute("PRAGMA wal_checkpoint(PASSIVE)") }
    }

    /// Closes the database. Later calls fail.
    public func close() {
        connection.close()
    }

    // MARK: Running SQL

    /// Runs `body` in an immediate transaction; cancellation interrupts it and rolls it back.
    private func write<T>(_ body: (SQLiteConnection) throws -> T) async throws -> T {
        try await read { connection in try connection.transaction { try body(connection) } }
    }

    /// Runs `body`; cancellation interrupts the statement it runs. SQLite errors become ``TaskStoreError``s.
    private func read<T>(_ body: (SQLiteConnection) throws -> T) async throws -> T {
        let interrupt = connection.interruptHandle
        if Task.isCancelled { throw TaskStoreError(.cancelled, path: path, message: "cancelled before it ran") }
        do {
            return try await withTaskCancellationHandler {
                try body(connection)
            } onCancel: {
                interrupt.interrupt()
            }
        } catch let error as SQLiteError {
            throw Self.storeError(error, path: path)
        } catch let error as EncodingError {
            throw TaskStoreError(.other, path: path, message: "cannot encode a value: \(error)")
        } catch let error as DecodingError {
            throw TaskStoreError(.corrupt, path: path, message: "cannot decode a stored value: \(error)")
        }
    }

    static func storeError(_ error: SQLiteError, path: String) -> TaskStoreError {
        let reason: TaskStoreError.Reason =
            switch error.code.primary {
            case SQLiteError.schemaTooNew: .schemaTooNew
            case SQLiteError.foreignDatabase: .foreignDatabase
            case SQLiteError.cantOpen: .cannotOpen
            case SQLiteError.notADatabase: .notADatabase
            case SQLiteError.corrupt: .corrupt
            case SQLiteError.readOnly: .readOnly
            case SQLiteError.busy, SQLiteError.locked: .busy
            case SQLiteError.interrupt: .cancelled
            case SQLiteError.constraint:
                // A duplicate identity is a conflict; a broken CHECK, NOT NULL or foreign key is bad data.
                [1555, 2067].contains(error.code.rawValue) ? .conflict : .constraint
            default: .other
            }
        var message = error.message
        if let sql = error.sql, reason == .constraint || reason == .other {
            message += " (in: \(sql.prefix(120)))"
        }
        return TaskStoreError(reason, path: path, message: message, sqliteCode: error.code.rawValue)
    }

    // MARK: Rows

    private static let columns = """
        id, parent_id, root_id, name, occurrence, kind, input, idempotency_key, options, status, progress, step, \
        weight, attempt, interruptions, error_type, error_description, result, checkpoint, owner_id, \
        lease_expires_at, priority, created_at, started_at, updated_at, finished_at, next_attempt_at
        """

    private static let insertSQL =
        "INSERT INTO tasks (\(columns)) VALUES (\(placeholders(27)))"

    /// Inserts a record, or replaces the stored row unless another owner holds it (parameter 28: the owner guard).
    private static let upsertSQL = """
        INSERT INTO tasks (\(columns)) VALUES (\(placeholders(27)))
        ON CONFLICT(id) DO UPDATE SET
          parent_id = excluded.parent_id, root_id = excluded.root_id, name = excluded.name,
          occurrence = excluded.occurrence, kind = excluded.kind, input = excluded.input,
          idempotency_key = excluded.idempotency_key, options = excluded.options, status = excluded.status,
          progress = excluded.progress, step = excluded.step, weight = excluded.weight, attempt = excluded.attempt,
          interruptions = excluded.interruptions, error_type = excluded.error_type,
          error_description = excluded.error_description, result = excluded.result, checkpoint = excluded.checkpoint,
          owner_id = excluded.owner_id, lease_expires_at = excluded.lease_expires_at, priority = excluded.priority,
          created_at = excluded.created_at, started_at = excluded.started_at, updated_at = excluded.updated_at,
          finished_at = excluded.finished_at, next_attempt_at = excluded.next_attempt_at
        WHERE ?28 IS NULL OR tasks.owner_id IS ?28
        """

    /// Writes the columns that change after a row is created (parameters 1–17), by id (18), unless another owner
    /// holds the row (19: the owner guard).
    private static let updateSQL = """
        UPDATE tasks SET status = ?1, progress = ?2, step = ?3, weight = ?4, attempt = ?5, interruptions = ?6,
          error_type = ?7, error_description = ?8, result = ?9, checkpoint = ?10, owner_id = ?11,
          lease_expires_at = ?12, priority = ?13, started_at = ?14, updated_at = ?15, finished_at = ?16,
          next_attempt_at = ?17
        WHERE id = ?18 AND (?19 IS NULL OR owner_id IS ?19)
        """

    private static func mutableValues(of task: TaskRecord) -> [SQLiteValue] {
        [
            .text(task.status.rawValue), SQLiteValue(task.progress), SQLiteValue(task.step), .real(task.weight),
            .integer(Int64(task.attempt)), .integer(Int64(task.interruptions)), SQLiteValue(task.errorType),
            SQLiteValue(task.errorDescription), SQLiteValue(task.result.map { [UInt8]($0) }),
            SQLiteValue(task.checkpoint.map { [UInt8]($0) }), SQLiteValue(task.ownerID),
            SQLiteValue(task.leaseExpiresAt?.storedMilliseconds), .integer(Int64(task.priority)),
            SQLiteValue(task.startedAt?.storedMilliseconds), .integer(task.updatedAt.storedMilliseconds),
            SQLiteValue(task.finishedAt?.storedMilliseconds), SQLiteValue(task.nextAttemptAt?.storedMilliseconds),
        ]
    }

    private static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    private func values(of task: TaskRecord) throws -> [SQLiteValue] {
        let options: String
        if let cached = encodedOptions[task.options] {
            options = cached
        } else {
            options = String(decoding: try encoder.encode(task.options), as: UTF8.self)
            if encodedOptions.count > 64 { encodedOptions.removeAll() }
            encodedOptions[task.options] = options
        }
        return [
            .text(task.id), SQLiteValue(task.parentID), .text(task.rootID), .text(task.name),
            .integer(Int64(task.occurrence)), SQLiteValue(task.kind), SQLiteValue(task.input.map { [UInt8]($0) }),
            SQLiteValue(task.idempotencyKey), .text(options), .text(task.status.rawValue), SQLiteValue(task.progress),
            SQLiteValue(task.step), .real(task.weight), .integer(Int64(task.attempt)),
            .integer(Int64(task.interruptions)), SQLiteValue(task.errorType), SQLiteValue(task.errorDescription),
            SQLiteValue(task.result.map { [UInt8]($0) }), SQLiteValue(task.checkpoint.map { [UInt8]($0) }),
            SQLiteValue(task.ownerID), SQLiteValue(task.leaseExpiresAt?.storedMilliseconds),
            .integer(Int64(task.priority)), .integer(task.createdAt.storedMilliseconds),
            SQLiteValue(task.startedAt?.storedMilliseconds), .integer(task.updatedAt.storedMilliseconds),
            SQLiteValue(task.finishedAt?.storedMilliseconds), SQLiteValue(task.nextAttemptAt?.storedMilliseconds),
        ]
    }

    private func record(from row: SQLiteStatement) throws -> TaskRecord {
        func date(_ index: Int32) -> Date? { row.optionalInt64(at: index).map(Date.init(storedMilliseconds:)) }
        guard let status = TaskStatus(rawValue: row.text(at: 9)) else {
            throw TaskStoreError(.corrupt, path: path, message: "unknown status '\(row.text(at: 9))'")
        }
        return TaskRecord(
            id: row.text(at: 0), parentID: row.optionalText(at: 1), rootID: row.text(at: 2), name: row.text(at: 3),
            occurrence: Int(row.int64(at: 4)), kind: row.optionalText(at: 5),
            input: row.optionalBlob(at: 6).map { Data($0) }, idempotencyKey: row.optionalText(at: 7),
            options: try decoder.decode(TaskOptions.self, from: Data(row.text(at: 8).utf8)), status: status,
            progress: row.optionalDouble(at: 10), step: row.optionalText(at: 11), weight: row.double(at: 12),
            attempt: Int(row.int64(at: 13)), interruptions: Int(row.int64(at: 14)), errorType: row.optionalText(at: 15),
            errorDescription: row.optionalText(at: 16), result: row.optionalBlob(at: 17).map { Data($0) },
            checkpoint: row.optionalBlob(at: 18).map { Data($0) }, ownerID: row.optionalText(at: 19),
            leaseExpiresAt: date(20), priority: Int(row.int64(at: 21)), createdAt: date(22) ?? Date(),
            startedAt: date(23), updatedAt: date(24), finishedAt: date(25), nextAttemptAt: date(26))
    }

    private func subtree(of id: String, connection: SQLiteConnection) throws -> [TaskRecord] {
        guard let rootID = try connection.scalarText("SELECT root_id FROM tasks WHERE id = ?", [.text(id)]) else {
            return []
        }
        let all = try connection.query("SELECT \(Self.columns) FROM tasks WHERE root_id = ?", [.text(rootID)]) {
            try record(from: $0)
        }
        return TaskTreeOrder.subtree(of: id, in: all)
    }

    private func insertEvents(_ events: [TaskEvent], connection: SQLiteConnection) throws {
        guard !events.isEmpty else { return }
        let insert = try connection.cachedStatement(
            """
            INSERT INTO events (task_id, root_id, kind, at, attempt, progress, message, error_type)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """)
        for event in events {
            try insert.execute([
                .text(event.taskID), .text(event.rootID), .text(event.kind.rawValue),
                .integer(event.at.storedMilliseconds), .integer(Int64(event.attempt)), SQLiteValue(event.progress),
                SQLiteValue(event.message), SQLiteValue(event.errorType),
            ])
        }
    }

    private static let controlSelect =
        "SELECT id, task_id, action, owner_id, requested_at, handled_at, outcome FROM control_requests"

    private static func controlRequest(_ row: SQLiteStatement) -> ControlRequest {
        ControlRequest(
            id: row.int64(at: 0), taskID: row.text(at: 1), action: ControlRequest.Action(rawValue: row.text(at: 2)) ?? .cancel,
            ownerID: row.optionalText(at: 3), requestedAt: Date(storedMilliseconds: row.int64(at: 4)),
            handledAt: row.optionalInt64(at: 5).map(Date.init(storedMilliseconds:)), outcome: row.optionalText(at: 6))
    }
}

/// Orders the nodes of one tree: parents before children, siblings by creation time, then name and occurrence.
enum TaskTreeOrder {
    static func subtree(of id: String, in nodes: [TaskRecord]) -> [TaskRecord] {
        var children: [String: [TaskRecord]] = [:]
        var top: TaskRecord?
        for node in nodes {
            if node.id == id { top = node }
            if let parent = node.parentID { children[parent, default: []].append(node) }
        }
        guard let top else { return [] }
        var ordered: [TaskRecord] = []
        var stack = [top]
        while let node = stack.popLast() {
            ordered.append(node)
            let siblings = (children[node.id] ?? []).sorted {
                ($0.createdAt, $0.name, $0.occurrence, $0.id) < ($1.createdAt, $1.name, $1.occurrence, $1.id)
            }
            stack.append(contentsOf: siblings.reversed())
        }
        return ordered
    }
}
