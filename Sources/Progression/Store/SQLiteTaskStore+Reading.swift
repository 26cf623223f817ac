import Foundation
import ProgressionSQLite

extension SQLiteTaskStore {
    /// One task, or `nil`.
    public func task(id: String) async throws -> TaskRecord? {
        try await read { connection in
            try connection.query("SELECT \(Self.columns) FROM tasks WHERE id = ?", [.text(id)]) {
                try record(from: $0)
            }.first
        }
    }

    /// The task and every node below it, parents before children, siblings in creation order.
    public func tree(of id: String) async throws -> [TaskRecord] {
        try await read { connection in try subtree(of: id, connection: connection) }
    }

    /// Roots matching `query`, in its order.
    public func roots(_ query: TaskQuery) async throws -> [TaskRecord] {
        try await read { connection in
            let (sql, parameters) = Self.rootsSQL(query)
            return try connection.query(sql, parameters) { try record(from: $0) }
        }
    }

    /// How many roots match `query` (its limit and offset ignored).
    public func countRoots(_ query: TaskQuery, upTo bound: Int?) async throws -> Int {
        try await read { connection in
            let (conditions, parameters) = Self.filter(query)
            let source = "tasks\(Self.indexHint(query))"
            guard let bound else {
                return Int(try connection.scalarInt("SELECT count(*) FROM \(source) WHERE \(conditions)", parameters) ?? 0)
            }
            let sql = "SELECT count(*) FROM (SELECT 1 FROM \(source) WHERE \(conditions) LIMIT ?)"
            return Int(try connection.scalarInt(sql, parameters + [.integer(Int64(max(0, bound)))]) ?? 0)
        }
    }

    /// The statement of a root listing, with its parameters.
    package static func rootsSQL(_ query: TaskQuery) -> (String, [SQLiteValue]) {
        let (conditions, parameters) = filter(query)
        return (
            """
            SELECT \(columns) FROM tasks\(indexHint(query)) WHERE \(conditions) ORDER BY \(query.orderClause)
            LIMIT ? OFFSET ?
            """,
            parameters + [.integer(Int64(max(0, query.limit))), .integer(Int64(max(0, query.offset)))]
        )
    }

    /// A listing of unfinished roots only (pending, running, paused) reads the partial index of those roots and sorts
    /// what it finds. Without the hint SQLite walks every root newest first through `tasks_roots_by_created` to avoid
    /// the sort, and on a store of a million finished jobs with ten paused that took 250 ms instead of 4.
    static func indexHint(_ query: TaskQuery) -> String {
        guard let statuses = query.statuses, !statuses.isEmpty, statuses.allSatisfy({ !$0.isFinished }) else {
            return ""
        }
        return " INDEXED BY tasks_roots_unfinished"
    }

    /// The WHERE clause of a root listing. A status filter that names only unfinished (or only finished) statuses
    /// says so with `finished_at`, so that SQLite can use the partial index of those roots.
    static func filter(_ query: TaskQuery) -> (String, [SQLiteValue]) {
        var conditions = ["parent_id IS NULL"]
        var parameters: [SQLiteValue] = []
        if let statuses = query.statuses {
            let list = statuses.map(\.rawValue).sorted()
            if list.isEmpty {
                conditions.append("0")
            } else {
                if statuses.allSatisfy(\.isFinished) { conditions.append("finished_at IS NOT NULL") }
                if statuses.allSatisfy({ !$0.isFinished }) { conditions.append("finished_at IS NULL") }
                conditions.append("(" + list.map { _ in "status = ?" }.joined(separator: " OR ") + ")")
                parameters += list.map { .text($0) }
            }
        }
        if let kind = query.kind {
            conditions.append("kind = ?")
            parameters.append(.text(kind))
        }
        if let since = query.createdSince {
            conditions.append("created_at >= ?")
            parameters.append(.integer(since.storedMilliseconds))
        }
        if let until = query.createdUntil {
            conditions.append("created_at < ?")
            parameters.append(.integer(until.storedMilliseconds))
        }
        if let name = query.nameContains, !name.isEmpty {
            conditions.append("instr(lower(name), ?) > 0")
            parameters.append(.text(name.asciiLowercased))
        }
        if let input = query.inputContains, !input.isEmpty {
            // Both arguments blobs: instr compares bytes (a NULL input matches nothing).
            conditions.append("instr(input, ?) > 0")
            parameters.append(.blob(Array(input.utf8)))
        }
        for filter in query.input {
            // The value as text: a string as itself, a number as its JSON text, a boolean as true or false.
            let path = "$" + filter.path.map { ".\"\($0)\"" }.joined()
            conditions.append(
                """
                (json_valid(CAST(input AS TEXT)) AND CASE json_type(CAST(input AS TEXT), ?)
                  WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN 'null'
                  WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                  ELSE CAST(json_extract(CAST(input AS TEXT), ?) AS TEXT) END = ?)
                """)
            parameters += [.text(path), .text(path), .text(filter.value)]
        }
        return (conditions.joined(separator: " AND "), parameters)
    }

    /// History matching `query`, oldest first.
    public func events(_ query: EventQuery) async throws -> [TaskEvent] {
        guard query.limit > 0 else { return [] }
        return try await read { connection in
            // A root's history needs no list of its nodes (reading a large tree cost more than its history).
            guard
                let top = try connection.query(
                    "SELECT root_id, parent_id IS NULL FROM tasks WHERE id = ?", [.text(query.taskID)],
                    { (rootID: $0.text(at: 0), isRoot: $0.int64(at: 1) != 0) }
                ).first
            else { return [] }
            let ids = top.isRoot ? nil : Set(try subtree(of: query.taskID, connection: connection).map(\.id))
            var conditions = ["root_id = ?"]
            var parameters: [SQLiteValue] = [.text(top.rootID)]
            if let since = query.since {
                conditions.append("at >= ?")
                parameters.append(.integer(since.storedMilliseconds))
            }
            if let kinds = query.kinds {
                let list = kinds.map(\.rawValue).sorted()
                conditions.append(list.isEmpty ? "0" : "(" + list.map { _ in "kind = ?" }.joined(separator: " OR ") + ")")
                parameters += list.map { .text($0) }
            }
            // Page through the root's history (backwards for a tail); for a subtree, keep its nodes' events only.
            let select =
                "SELECT \(Self.eventColumns) FROM events WHERE \(conditions.joined(separator: " AND ")) AND id \(query.tail ? "<" : ">") ? ORDER BY id \(query.tail ? "DESC" : "ASC") LIMIT ?"
            var cursor = query.firstCursor
            var events: [TaskEvent] = []
            var more = query.limit > 0
            while more {
                let page = try connection.query(
                    select, parameters + [.integer(cursor), .integer(Int64(query.pageSize))]
                ) { try event(from: $0) }
                more = query.collect(page, into: &events, ids: ids, cursor: &cursor)
            }
            return query.tail ? events.reversed() : events
        }
    }

    /// The root whose kind and idempotency key are these, if any.
    public func root(kind: String, idempotencyKey: String) async throws -> TaskRecord? {
        try await read { connection in
            try connection.query(
                "SELECT \(Self.columns) FROM tasks WHERE kind = ? AND idempotency_key = ?",
                [.text(kind), .text(idempotencyKey)]
            ) { try record(from: $0) }.first
        }
    }

    /// Ids of roots (or of any task) that begin with `prefix`, at most `limit`, in order.
    public func taskIDs(withPrefix prefix: String, rootsOnly: Bool, limit: Int) async throws -> [String] {
        try await read { connection in
            // A range on the primary key: 'prefix' <= id < 'prefix' + U+10FFFF, without LIKE's wildcards.
            try connection.query(
                """
                SELECT id FROM tasks WHERE id >= ?1 AND id < ?1 || char(1114111)\(rootsOnly ? " AND parent_id IS NULL" : "")
                ORDER BY id LIMIT ?2
                """,
                [.text(prefix), .integer(Int64(max(0, limit)))]
            ) { $0.text(at: 0) }
        }
    }

    /// Counts of roots by status and kind, the oldest pending root, the history's size and the file's.
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
                "SELECT min(created_at) FROM tasks WHERE parent_id IS NULL AND finished_at IS NULL AND status = 'pending'"
            ).map(Date.init(storedMilliseconds:))
            for row in try connection.query(
                """
                SELECT coalesce(kind, ''), count(*) FROM tasks INDEXED BY tasks_roots_unfinished
                WHERE parent_id IS NULL AND finished_at IS NULL AND status = 'pending' GROUP BY kind
                """, [], { ($0.text(at: 0), Int($0.int64(at: 1))) })
            {
                statistics.pendingByKind[row.0] = row.1
            }
            statistics.completedWithFailedSteps = Int(
                try connection.scalarInt(
                    """
                    SELECT count(*) FROM tasks AS root WHERE root.parent_id IS NULL AND root.status = 'completed'
                      AND root.id IN (SELECT root_id FROM tasks INDEXED BY tasks_failed_steps
                                      WHERE parent_id IS NOT NULL AND status = 'failed')
                    """) ?? 0)
            statistics.events = Int(try connection.scalarInt("SELECT count(*) FROM events") ?? 0)
            let pages = try connection.scalarInt("PRAGMA page_count") ?? 0
            let pageSize = try connection.scalarInt("PRAGMA page_size") ?? 0
            statistics.databaseBytes = pages * pageSize
            return statistics
        }
    }

    package func owners() async throws -> [OwnerRecord] {
        try await read { connection in
            try connection.query(
                """
                SELECT id, host, pid, started_at, heartbeat_at, stopped_at, kinds, slots, versions FROM owners
                ORDER BY started_at, id
                """
            ) { row in
                OwnerRecord(
                    id: row.text(at: 0), host: row.text(at: 1), pid: Int32(truncatingIfNeeded: row.int64(at: 2)),
                    startedAt: Date(storedMilliseconds: row.int64(at: 3)),
                    heartbeatAt: Date(storedMilliseconds: row.int64(at: 4)),
                    stoppedAt: row.optionalInt64(at: 5).map(Date.init(storedMilliseconds:)),
                    kinds: OwnerRecord.decodeKinds(row.optionalText(at: 6)), slots: row.optionalInt64(at: 7).map { Int($0) },
                    versions: OwnerRecord.decodeVersions(row.optionalText(at: 8)))
            }
        }
    }

    package func pendingControlRequests(for ownerID: String?) async throws -> [ControlRequest] {
        try await read { connection in
            try connection.query(
                "\(Self.controlSelect) WHERE handled_at IS NULL AND owner_id IS ? ORDER BY id",
                [SQLiteValue(ownerID)]
            ) { try controlRequest(from: $0) }
        }
    }

    package func controlRequest(id: Int64) async throws -> ControlRequest? {
        try await read { connection in
            try connection.query("\(Self.controlSelect) WHERE id = ?", [.integer(id)]) { try controlRequest(from: $0) }
                .first
        }
    }

    package func changeCounter() async throws -> Int64 {
        try await read { connection in
            try connection.scalarInt("PRAGMA data_version") ?? 0
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

    /// How SQLite runs a query (`EXPLAIN QUERY PLAN`), one line per step: for tests that prove an index serves a query.
    package func queryPlan(_ sql: String, _ parameters: [SQLiteValue] = []) async throws -> [String] {
        try await read { connection in
            try connection.query("EXPLAIN QUERY PLAN " + sql, parameters) { $0.text(at: 3) }
        }
    }
}
