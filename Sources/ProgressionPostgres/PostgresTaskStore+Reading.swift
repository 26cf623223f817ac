#if PostgreSQL
import Foundation
import PostgresNIO
import Progression

extension PostgresTaskStore {
    /// One task, or `nil`.
    public func task(id: String) async throws -> TaskRecord? {
        try await read { [self] connection in
            try await rows(
                prepared: "SELECT \(Self.columns) FROM \(names.tasks) WHERE id = $1", bindings(id),
                connection: connection
            ) { try record(from: $0) }.first
        }
    }

    /// The task and every node below it, parents before children, siblings in creation order.
    public func tree(of id: String) async throws -> [TaskRecord] {
        try await read { [self] connection in try await subtree(of: id, connection: connection) }
    }

    /// Roots matching `query`, in its order.
    public func roots(_ query: TaskQuery) async throws -> [TaskRecord] {
        try await read { [self] connection in
            var (conditions, parameters) = Self.filter(query)
            let order = query.orderClause
            parameters.append(Int64(max(0, query.limit)))
            parameters.append(Int64(max(0, query.offset)))
            return try await rows(
                """
                SELECT \(Self.columns) FROM \(names.tasks) WHERE \(conditions) ORDER BY \(order)
                LIMIT $\(parameters.count - 1) OFFSET $\(parameters.count)
                """, parameters, connection: connection
            ) { try record(from: $0) }
        }
    }

    /// How many roots match `query` (its limit and offset ignored).
    public func countRoots(_ query: TaskQuery, upTo bound: Int?) async throws -> Int {
        try await read { [self] connection in
            var (conditions, parameters) = Self.filter(query)
            let sql: String
            if let bound {
                // Stops after `bound` rows: a page's footer does not count a million rows.
                parameters.append(Int64(max(0, bound)))
                sql = "SELECT count(*) FROM (SELECT 1 FROM \(names.tasks) WHERE \(conditions) LIMIT $\(parameters.count)) AS page"
            } else {
                sql = "SELECT count(*) FROM \(names.tasks) WHERE \(conditions)"
            }
            return Int(try await rows(sql, parameters, connection: connection) { try $0.decode(Int64.self) }.first ?? 0)
        }
    }

    /// The WHERE clause of a root listing. A status filter that names only unfinished (or only finished) statuses
    /// says so with `finished_at`, so that the partial index of those roots serves it.
    static func filter(_ query: TaskQuery) -> (String, PostgresBindings) {
        var conditions = ["parent_id IS NULL"]
        var parameters = PostgresBindings()
        if let statuses = query.statuses {
            let list = statuses.map(\.rawValue).sorted()
            if list.isEmpty {
                conditions.append("false")
            } else {
                if statuses.allSatisfy(\.isFinished) { conditions.append("finished_at IS NOT NULL") }
                if statuses.allSatisfy({ !$0.isFinished }) { conditions.append("finished_at IS NULL") }
                parameters.append(list)
                conditions.append("status = ANY($\(parameters.count)::text[])")
            }
        }
        if let kind = query.kind {
            parameters.append(kind)
            conditions.append("kind = $\(parameters.count)")
        }
        if let since = query.createdSince {
            parameters.append(since.storedMilliseconds)
            conditions.append("created_at >= $\(parameters.count)")
        }
        if let until = query.createdUntil {
            parameters.append(until.storedMilliseconds)
            conditions.append("created_at < $\(parameters.count)")
        }
        if let name = query.nameContains, !name.isEmpty {
            // lower() of the "C" collation folds ASCII letters only, as SQLite's does.
            parameters.append(name.asciiLowercased)
            conditions.append("strpos(lower(name), $\(parameters.count)) > 0")
        }
        if let input = query.inputContains, !input.isEmpty {
            // Bytes in bytes, as SQLite's instr on blobs (a NULL input matches nothing).
            parameters.append(input)
            conditions.append("position(convert_to($\(parameters.count), 'UTF8') in input) > 0")
        }
        for filter in query.input {
            // The value as text (#>>): a string as itself, a number as its JSON text, true, false or null; an object
            // or an array never equals a filter's text. An input that is not JSON matches nothing.
            parameters.append(filter.path)
            let path = parameters.count
            parameters.append(filter.value)
            conditions.append(
                """
                (CASE WHEN \(Self.inputIsJSON) THEN jsonb_typeof(convert_from(input, 'UTF8')::jsonb #> $\(path)::text[]) NOT IN ('object', 'array')
                  AND coalesce(convert_from(input, 'UTF8')::jsonb #>> $\(path)::text[], 'null') = $\(parameters.count) END)
                """)
        }
        return (conditions.joined(separator: " AND "), parameters)
    }

    /// Whether a row's input is a JSON object (what an input filter can read): a check that needs no cast that could
    /// fail.
    static let inputIsJSON = "input IS NOT NULL AND left(convert_from(input, 'UTF8'), 1) = '{'"

    /// History matching `query`, oldest first.
    public func events(_ query: EventQuery) async throws -> [TaskEvent] {
        guard query.limit > 0 else { return [] }
        return try await read { [self] connection in
            let nodes = try await subtree(of: query.taskID, connection: connection)
            guard let top = nodes.first else { return [] }
            let ids = top.isRoot ? nil : Set(nodes.map(\.id))
            var conditions = ["root_id = $1"]
            var parameters = PostgresBindings()
            parameters.append(top.rootID)
            if let since = query.since {
                parameters.append(since.storedMilliseconds)
                conditions.append("at >= $\(parameters.count)")
            }
            if let kinds = query.kinds {
                let list = kinds.map(\.rawValue).sorted()
                if list.isEmpty {
                    conditions.append("false")
                } else {
                    parameters.append(list)
                    conditions.append("kind = ANY($\(parameters.count)::text[])")
                }
            }
            // Page through the root's history (backwards for a tail); for a subtree, keep its nodes' events only.
            let cursorIndex = parameters.count + 1
            let select = """
                SELECT \(Self.eventColumns) FROM \(names.events) WHERE \(conditions.joined(separator: " AND "))
                  AND id \(query.tail ? "<" : ">") $\(cursorIndex) ORDER BY id \(query.tail ? "DESC" : "ASC")
                LIMIT $\(cursorIndex + 1)
                """
            var cursor = query.firstCursor
            var events: [TaskEvent] = []
            var more = query.limit > 0
            while more {
                var pageParameters = parameters
                pageParameters.append(cursor)
                pageParameters.append(Int64(query.pageSize))
                let page = try await rows(select, pageParameters, connection: connection) { try event(from: $0) }
                more = query.collect(page, into: &events, ids: ids, cursor: &cursor)
            }
            return query.tail ? events.reversed() : events
        }
    }

    /// The root whose kind and idempotency key are these, if any.
    public func root(kind: String, idempotencyKey: String) async throws -> TaskRecord? {
        try await read { [self] connection in
            try await rows(
                """
                SELECT \(Self.columns) FROM \(names.tasks)
                WHERE kind = $1 AND idempotency_key = $2 AND idempotency_key IS NOT NULL
                """, bindings(kind, idempotencyKey), connection: connection
            ) { try record(from: $0) }.first
        }
    }

    /// Ids of roots (or of any task) that begin with `prefix`, at most `limit`, in order.
    public func taskIDs(withPrefix prefix: String, rootsOnly: Bool, limit: Int) async throws -> [String] {
        try await read { [self] connection in
            // A range on the primary key ("C" collation: byte order): prefix <= id < prefix || U+10FFFF, without
            // LIKE's wildcards. Roots are named by `root_id = id` (the same, by the table's CHECK), not `parent_id IS
            // NULL`, which would let the planner filter every root of a partial index (see `lockedRoots`).
            try await rows(
                """
                SELECT id FROM \(names.tasks) WHERE id >= $1 AND id < $1 || chr(1114111)\(rootsOnly ? " AND root_id = id" : "")
                ORDER BY id LIMIT $2
                """, bindings(prefix, Int64(max(0, limit))), connection: connection
            ) { try $0.decode(String.self) }
        }
    }

    /// Counts of roots by status and kind, and the oldest pending root.
    public func statistics() async throws -> TaskStoreStatistics {
        try await read { [self] connection in
            var statistics = TaskStoreStatistics()
            for (status, count) in try await rows(
                "SELECT status, count(*) FROM \(names.tasks) WHERE parent_id IS NULL GROUP BY status",
                connection: connection, { try $0.decode((String, Int64).self) })
            {
                statistics.rootsByStatus[status] = Int(count)
            }
            for (kind, count) in try await rows(
                "SELECT coalesce(kind, ''), count(*) FROM \(names.tasks) WHERE parent_id IS NULL GROUP BY kind",
                connection: connection, { try $0.decode((String, Int64).self) })
            {
                statistics.rootsByKind[kind] = Int(count)
            }
            statistics.oldestPendingCreatedAt = try await rows(
                """
                SELECT min(created_at) FROM \(names.tasks)
                WHERE parent_id IS NULL AND finished_at IS NULL AND status = 'pending'
                """, connection: connection, { try $0.decode(Int64?.self) }
            ).first?.map(Date.init(storedMilliseconds:))
            for (kind, count) in try await rows(
                """
                SELECT coalesce(kind, ''), count(*) FROM \(names.tasks)
                WHERE parent_id IS NULL AND finished_at IS NULL AND status = 'pending' GROUP BY kind
                """, connection: connection, { try $0.decode((String, Int64).self) })
            {
                statistics.pendingByKind[kind] = Int(count)
            }
            statistics.completedWithFailedSteps = Int(
                try await rows(
                    """
                    SELECT count(*) FROM \(names.tasks) AS root WHERE root.parent_id IS NULL AND root.status = 'completed'
                      AND root.id IN (SELECT root_id FROM \(names.tasks) WHERE parent_id IS NOT NULL AND status = 'failed')
                    """, connection: connection, { try $0.decode(Int64.self) }
                ).first ?? 0)
            statistics.events = Int(
                try await rows("SELECT count(*) FROM \(names.events)", connection: connection) {
                    try $0.decode(Int64.self)
                }.first ?? 0)
            statistics.databaseBytes =
                try await rows(
                    """
                    SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::int8 FROM pg_class c
                    JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'S')
                    """, bindings(names.schema), connection: connection
                ) { try $0.decode(Int64.self) }.first ?? 0
            return statistics
        }
    }

    package func owners() async throws -> [OwnerRecord] {
        try await read { [self] connection in
            try await rows(
                """
                SELECT id, host, pid, started_at, heartbeat_at, stopped_at, kinds, slots, versions FROM \(names.owners)
                ORDER BY started_at, id
                """,
                connection: connection
            ) { row in
                let (id, host, pid, startedAt, heartbeatAt, stoppedAt, kinds, slots, versions) = try row.decode(
                    (String, String, Int32, Int64, Int64, Int64?, String?, Int32?, String?).self)
                return OwnerRecord(
                    id: id, host: host, pid: pid, startedAt: Date(storedMilliseconds: startedAt),
                    heartbeatAt: Date(storedMilliseconds: heartbeatAt),
                    stoppedAt: stoppedAt.map(Date.init(storedMilliseconds:)), kinds: OwnerRecord.decodeKinds(kinds),
                    slots: slots.map { Int($0) }, versions: OwnerRecord.decodeVersions(versions))
            }
        }
    }

    package func pendingControlRequests(for ownerID: String?) async throws -> [ControlRequest] {
        try await read { [self] connection in
            if let ownerID {
                return try await rows(
                    "\(controlSelect) WHERE handled_at IS NULL AND owner_id = $1 ORDER BY id", bindings(ownerID),
                    connection: connection
                ) { try controlRequest(from: $0) }
            }
            return try await rows(
                "\(controlSelect) WHERE handled_at IS NULL AND owner_id IS NULL ORDER BY id", connection: connection
            ) { try controlRequest(from: $0) }
        }
    }

    package func controlRequest(id: Int64) async throws -> ControlRequest? {
        try await read { [self] connection in
            try await rows("\(controlSelect) WHERE id = $1", bindings(id), connection: connection) {
                try controlRequest(from: $0)
            }.first
        }
    }

    /// A number that moves whenever an executor or progressctl commits a change to the schema (its `NOTIFY`), and
    /// at least every ``Configuration/changePollInterval`` (the fallback when a notification is lost).
    package func changeCounter() async throws -> Int64 {
        try checkNotEnded()
        return changes.counter
    }

    /// Checks what the schema's constraints cannot: every subtask's root and parent exist, and every event's task.
    /// Returns one line per problem, `["ok"]` when there is none (as SQLite's `PRAGMA integrity_check`).
    public func integrityCheck() async throws -> [String] {
        try await read { [self] connection in
            let checks = [
                ("subtasks whose root is missing",
                 "SELECT count(*) FROM \(names.tasks) c WHERE c.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM \(names.tasks) r WHERE r.id = c.root_id AND r.parent_id IS NULL)"),
                ("subtasks whose parent is missing",
                 "SELECT count(*) FROM \(names.tasks) c WHERE c.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM \(names.tasks) p WHERE p.id = c.parent_id)"),
                ("events whose task is missing",
                 "SELECT count(*) FROM \(names.events) e WHERE NOT EXISTS (SELECT 1 FROM \(names.tasks) t WHERE t.id = e.task_id)"),
            ]
            var problems: [String] = []
            for (what, sql) in checks {
                let count = try await rows(sql, connection: connection) { try $0.decode(Int64.self) }.first ?? 0
                if count > 0 { problems.append("\(count) \(what)") }
            }
            return problems.isEmpty ? ["ok"] : problems
        }
    }

    /// The migrations recorded in the schema, in order.
    public func schemaVersion() async throws -> [String] {
        try await read { [self] connection in
            try await rows("SELECT identifier FROM \(names.migrations) ORDER BY identifier", connection: connection) {
                try $0.decode(String.self)
            }
        }
    }

    /// How the server runs a query (`EXPLAIN`), one line per plan node: for tests that prove an index serves a
    /// query. `sql` names tables unqualified; it runs with the store's schema first in `search_path`.
    package func queryPlan(_ sql: String, _ parameters: PostgresBindings = PostgresBindings()) async throws -> [String] {
        try await read { [self] connection in
            try await connection.query("BEGIN", logger: logger)
            do {
                try await connection.query(
                    PostgresQuery(unsafeSQL: "SET LOCAL search_path TO \(names.quoted)"), logger: logger)
                // Small tables are read sequentially whatever their indexes; the plan shows which index can serve.
                try await connection.query("SET LOCAL enable_seqscan = off", logger: logger)
                let plan = try await rows("EXPLAIN " + sql, parameters, connection: connection) {
                    try $0.decode(String.self)
                }
                try await connection.query("ROLLBACK", logger: logger)
                return plan
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }
}
#endif

#if PostgreSQL
extension PostgresTaskStore {
    /// Drops the store's schema with everything in it: for the benchmark's throwaway schemas on a server it did not
    /// start.
    package func dropSchema() async throws {
        try await write { [self] connection in
            try await connection.query(PostgresQuery(unsafeSQL: "DROP SCHEMA \(names.quoted) CASCADE"), logger: logger)
        }
    }

    /// How many unfinished roots `owner` holds (the unfinished roots' index by owner): for tools that watch a
    /// recovery.
    package func countUnfinishedRoots(heldBy owner: String) async throws -> Int {
        try await read { [self] connection in
            Int(
                try await rows(
                    "SELECT count(*) FROM \(names.tasks) WHERE parent_id IS NULL AND finished_at IS NULL AND owner_id = $1",
                    bindings(owner), connection: connection
                ) { try $0.decode(Int64.self) }.first ?? 0)
        }
    }

    /// Gives the roots `ids` to `owner` with the bare statement a claim ends with (`UPDATE … WHERE id = ANY(…)`, in
    /// a transaction of its own), without the claim's reads, checks and locks: what the server needs to change those
    /// rows alone. For the bench, beside what a claim takes. Returns how many rows changed.
    package func reassignRoots(_ ids: [String], to owner: String) async throws -> Int {
        try await write { [self] connection in
            try await rows(
                "UPDATE \(names.tasks) SET owner_id = $1 WHERE id = ANY($2::text[]) RETURNING id",
                bindings(owner, ids), connection: connection
            ) { try $0.decode(String.self) }.count
        }
    }
}
#endif
