#if PostgreSQL
import Foundation
import Logging
import PostgresNIO
import Progression
import ProgressionTestSupport
import Testing
@testable import ProgressionPostgres
import ProgressionPostgresTestSupport

/// What is particular to PostgreSQL: the schema and its migrations, the indexes each query uses, notifications, and
/// claims of several executors at once.
struct PostgresSchemaTests {
    static func schemaName(_ prefix: String) -> String { "\(prefix)_\(UInt32.random(in: 0...UInt32.max))" }

    static func open(_ schema: String, _ change: (inout PostgresTaskStore.Configuration) -> Void = { _ in })
        async throws -> PostgresTaskStore
    {
        var configuration = try await LocalPostgresServer.shared().configuration(schema: schema)
        change(&configuration)
        return try await PostgresTaskStore.started(configuration: configuration)
    }

    /// Runs SQL on the server outside any store (as another application, or an older or newer program, would).
    static func execute(_ sql: String) async throws -> [PostgresRow] {
        let store = try await open("scratch")
        defer { Task { await store.close() } }
        return try await store.client.query(PostgresQuery(unsafeSQL: sql)).collect()
    }

    static func count(_ sql: String) async throws -> Int64 {
        try await execute(sql).first.map { try $0.decode(Int64.self) } ?? -1
    }

    @Test func aSchemaWithAMigrationThisProgramDoesNotKnowIsRefusedAndLeftUntouched() async throws {
        let schema = Self.schemaName("newer")
        let store = try await Self.open(schema)
        try await store.insert([TaskRecord(id: "kept", name: "kept", createdAt: Date())], events: [])
        #expect(try await store.schemaVersion() == PostgresMigration.embedded.map(\.identifier))
        await store.close()
        _ = try await Self.execute(
            "INSERT INTO \"\(schema)\".schema_migrations (identifier, checksum, applied_at) VALUES ('9999_future', 'x', 0)")
        let error = await #expect(throws: TaskStoreError.self) { _ = try await Self.open(schema) }
        #expect(error?.reason == .schemaTooNew)
        #expect(error?.description.contains("9999_future") == true)
        #expect(
            try await Self.count("SELECT count(*) FROM \"\(schema)\".schema_migrations")
                == PostgresMigration.embedded.count + 1)
        #expect(try await Self.count("SELECT count(*) FROM \"\(schema)\".tasks WHERE id = 'kept'") == 1)
    }

    @Test func anotherApplicationsSchemaIsRefusedAndLeftUntouched() async throws {
        let schema = Self.schemaName("foreign")
        _ = try await Self.execute("CREATE SCHEMA \"\(schema)\"")
        _ = try await Self.execute("CREATE TABLE \"\(schema)\".tasks (id int)")
        let error = await #expect(throws: TaskStoreError.self) { _ = try await Self.open(schema) }
        #expect(error?.reason == .foreignDatabase)
        #expect(
            try await Self.count(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = '\(schema)'") == 1)
    }

    @Test func aMissingSchemaIsNotCreatedWhenAskedNotToAndAChangedMigrationIsCaught() async throws {
        let missing = Self.schemaName("missing")
        let error = await #expect(throws: TaskStoreError.self) {
            _ = try await Self.open(missing) { $0.createIfMissing = false }
        }
        #expect(error?.reason == .cannotOpen)
        #expect(try await Self.count("SELECT count(*) FROM pg_namespace WHERE nspname = '\(missing)'") == 0)

        let changed = Self.schemaName("changed")
        try await Self.open(changed).close()
        _ = try await Self.execute("UPDATE \"\(changed)\".schema_migrations SET checksum = 'edited'")
        let corrupt = await #expect(throws: TaskStoreError.self) { _ = try await Self.open(changed) }
        #expect(corrupt?.reason == .corrupt)
    }

    @Test func processesOpeningANewSchemaAtOnceMigrateItOnce() async throws {
        let schema = Self.schemaName("race")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask { try await Self.open(schema).close() }
            }
            try await group.waitForAll()
        }
        #expect(
            try await Self.count("SELECT count(*) FROM \"\(schema)\".schema_migrations")
                == Int64(PostgresMigration.embedded.count))
    }

    /// A client that pauses inside a migration's transaction longer than its session lets a transaction sit idle (a
    /// store's sessions end one idle for twice the call timeout; a loaded machine pauses that long): the migrations
    /// lift the limit for their transactions, complete, and leave the session's limits as they found them. Without
    /// it, the server ends the session and the connection's next statement is never answered.
    @Test func aMigrationOutlivesAClientThatPausesInItsTransaction() async throws {
        let store = try await Self.open("scratch")
        defer { Task { await store.close() } }
        var pausing = PostgresMigrator(
            names: try PostgresNames(schema: Self.schemaName("paused")), migrations: PostgresMigration.embedded,
            idleInTransactionLimit: .seconds(60), location: "test")
        pausing.afterBegin = { try? await Task.sleep(for: .milliseconds(400)) }
        let migrator = pausing
        let limits = try await within(.seconds(120), "the migrations") {
            try await store.client.withConnection { connection in
                try await connection.query(
                    "SELECT set_config('idle_in_transaction_session_timeout', '100', false), set_config('statement_timeout', '5000', false)",
                    logger: store.logger)
                try await migrator.prepare(connection: connection, logger: store.logger, create: true, readOnly: false)
                return try await connection.query(
                    "SELECT current_setting('idle_in_transaction_session_timeout'), current_setting('statement_timeout')",
                    logger: store.logger
                ).collect().first.map { try $0.decode((String, String).self) }
            }
        }
        #expect(limits?.0 == "100ms" && limits?.1 == "5s", "\(String(describing: limits))")
        #expect(
            try await Self.count("SELECT count(*) FROM \"\(migrator.names.schema)\".schema_migrations")
                == Int64(PostgresMigration.embedded.count))
    }

    /// A schema an earlier binary migrated (every migration but the last) and filled is brought up to date by this
    /// one, its tasks kept, and its batches go on through the procedure as the last migration left it.
    @Test func aSchemaOfAnEarlierBinaryWithTasksIsMigratedAndItsTasksGoOn() async throws {
        let schema = Self.schemaName("earlier")
        let scratch = try await Self.open("scratch")
        defer { Task { await scratch.close() } }
        let earlier = PostgresMigrator(
            names: try PostgresNames(schema: schema), migrations: Array(PostgresMigration.embedded.dropLast()),
            idleInTransactionLimit: .seconds(60), location: "test")
        let options = String(decoding: try JSONEncoder().encode(TaskOptions.default), as: UTF8.self)
        try await within(.seconds(120), "the earlier migrations and a task") {
            try await scratch.client.withConnection { connection in
                try await earlier.prepare(connection: connection, logger: scratch.logger, create: true, readOnly: false)
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO "\(schema)".tasks (id, root_id, name, options, status, owner_id, created_at, started_at, updated_at)
                            VALUES ('kept', 'kept', 'written before the upgrade', '\(options.replacingOccurrences(of: "'", with: "''"))', 'running', 'o', 1000, 1000, 1000)
                            """), logger: scratch.logger)
            }
        }
        let store = try await Self.open(schema)
        defer { Task { await store.close() } }
        #expect(
            try await Self.count("SELECT count(*) FROM \"\(schema)\".schema_migrations")
                == Int64(PostgresMigration.embedded.count))
        var kept = try #require(try await store.task(id: "kept"))
        #expect(kept.name == "written before the upgrade" && kept.status == .running && kept.ownerID == "o")
        kept.progress = 0.5
        let step = TaskRecord(
            id: "kept.1", parentID: "kept", rootID: "kept", name: "step", status: .running, createdAt: Date())
        let written = try await store.apply(
            TaskBatch(
                inserts: [step], updates: [TaskUpdate(kept, columns: [.progress])],
                events: [TaskEvent(taskID: "kept.1", rootID: "kept", kind: .created, at: Date(), attempt: 1)],
                owner: "o"))
        #expect(written.rejectedTaskIDs.isEmpty && written.conflictingTaskIDs.isEmpty)
        #expect(try await store.task(id: "kept")?.progress == 0.5)
        #expect(try await store.events(of: "kept").map(\.taskID) == ["kept.1"])
    }

    /// Each index of migrations/postgres serves the query named beside it.
    @Test(arguments: [
        // A claim's own reads: of a dead owner's roots, and of the unowned ones (of some kinds).
        ("tasks_roots_unfinished",
         PostgresTaskStore.readyRoots(in: "tasks", where: "owner_id = 'o'", kindCondition: "", limit: "10")),
        ("tasks_roots_unfinished",
         PostgresTaskStore.readyRoots(
            in: "tasks", where: "owner_id IS NULL", kindCondition: " AND (kind IS NULL OR kind = ANY('{k}'::text[]))",
            limit: "10")),
        ("tasks_roots_finished",
         "SELECT id FROM tasks WHERE parent_id IS NULL AND finished_at IS NOT NULL AND status = ANY('{completed,failed}'::text[]) AND created_at < 1700002000000 AND finished_at < 1700002000000"),
        ("tasks_roots_finished",
         "SELECT id FROM tasks WHERE parent_id IS NULL AND finished_at IS NOT NULL AND status = ANY('{failed}'::text[]) ORDER BY created_at DESC, id DESC LIMIT 50"),
        ("tasks_roots_by_created",
         "SELECT id FROM tasks WHERE parent_id IS NULL ORDER BY created_at DESC, id DESC LIMIT 50 OFFSET 0"),
        ("tasks_children_by_root", "SELECT id FROM tasks WHERE root_id = 'r' AND parent_id IS NOT NULL"),
        ("tasks_child_identity", "SELECT id FROM tasks WHERE parent_id = 'p' AND name = 'n' AND occurrence = 0"),
        ("tasks_idempotency",
         "SELECT id FROM tasks WHERE kind = 'k' AND idempotency_key = 'x' AND idempotency_key IS NOT NULL"),
        ("tasks_pkey", "SELECT id FROM tasks WHERE id >= 'ab' AND id < 'ab' || chr(1114111) ORDER BY id LIMIT 5"),
        ("events_by_root", "SELECT id FROM events WHERE root_id = 'r' AND id > 0 ORDER BY id ASC LIMIT 64"),
        ("control_requests_pending",
         "SELECT id FROM control_requests WHERE handled_at IS NULL AND owner_id = 'o' ORDER BY id"),
    ])
    func eachIndexServesItsQuery(index: String, query: String) async throws {
        let schema = Self.schemaName("plans")
        let store = try await Self.open(schema)
        defer { Task { await store.close() } }
        // A realistic mix, analyzed, so that the planner chooses as it would in service: mostly finished roots of a
        // few statuses, unfinished ones of a few owners (and unowned), trees, history, requests.
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        var records: [TaskRecord] = []
        var events: [TaskEvent] = []
        for index in 0..<3000 {
            let finished = index % 3 != 0
            let status: TaskStatus = finished ? (index % 7 == 0 ? .failed : .completed) : (index % 2 == 0 ? .pending : .running)
            let created = t0.addingTimeInterval(Double(index))
            let root = TaskRecord(
                id: String(format: "root%05d", index), name: "job \(index)", kind: "k",
                idempotencyKey: index % 5 == 0 ? "key\(index)" : nil, status: status,
                ownerID: index % 4 == 0 ? nil : "o\(index % 6)", createdAt: created,
                finishedAt: finished ? created.addingTimeInterval(1) : nil)
            records.append(root)
            for child in 0..<2 where index % 6 == 0 {
                records.append(
                    TaskRecord(
                        id: root.id + ".\(child)", parentID: root.id, rootID: root.id, name: "step \(child)",
                        status: status, createdAt: created, finishedAt: root.finishedAt))
            }
            events.append(TaskEvent(taskID: root.id, rootID: root.id, kind: .created, at: created, attempt: 1))
        }
        try await store.insert(records, events: events)
        for index in 0..<200 {
            let id = try await store.addControlRequest(
                ControlRequest(taskID: "root00000", action: .pause, ownerID: "o\(index % 6)", requestedAt: t0))
            if index % 10 != 0 { try await store.completeControlRequest(id: id, outcome: "applied", at: t0) }
        }
        _ = try await store.client.query(PostgresQuery(unsafeSQL: "ANALYZE \"\(schema)\".tasks"))
        _ = try await store.client.query(PostgresQuery(unsafeSQL: "ANALYZE \"\(schema)\".events"))
        _ = try await store.client.query(PostgresQuery(unsafeSQL: "ANALYZE \"\(schema)\".control_requests"))
        let plan = try await store.queryPlan(query)
        #expect(plan.contains { $0.contains(index) }, "\(plan.joined(separator: "\n"))")
        if index == "tasks_roots_unfinished" {
            // A claim reads the roots in the index's order and stops at its limit: no sort of every candidate.
            #expect(!plan.contains { $0.contains("Sort") }, "\(plan.joined(separator: "\n"))")
        }
    }

    /// The stores' one description of `tasks` names the columns of this schema's table, in its order.
    @Test func theDescriptionNamesEveryColumnOfThePostgresTableOnce() async throws {
        let schema = Self.schemaName("columns")
        let store = try await Self.open(schema)
        defer { Task { await store.close() } }
        let names = try await Self.execute(
            """
            SELECT column_name::text FROM information_schema.columns
            WHERE table_schema = '\(schema)' AND table_name = 'tasks' ORDER BY ordinal_position
            """
        ).map { try $0.decode(String.self) }
        #expect(names == TaskTableColumn.allCases.map(\.name))
    }

    /// A write locks its roots through the primary key even on a table that grew since it was last analyzed (a new
    /// schema filling up), where a condition naming roots let the planner filter every root of a partial index.
    @Test func aWriteLocksItsRootsThroughThePrimaryKeyOnATableNotYetAnalyzed() async throws {
        let schema = Self.schemaName("lockplan")
        let store = try await Self.open(schema)
        defer { Task { await store.close() } }
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let roots = (0..<3000).map { index in
            TaskRecord(
                id: String(format: "root%05d", index), name: "job \(index)", kind: "k", status: .running,
                ownerID: "o", createdAt: t0.addingTimeInterval(Double(index)))
        }
        try await store.insert(roots, events: [])
        let ids = "'{" + stride(from: 5, to: 3000, by: 375).map { String(format: "root%05d", $0) }.joined(separator: ",")
            + "}'::text[]"
        for (columns, condition) in [("id, owner_id, status", nil), ("id", "owner_id = 'o'")] {
            let plan = try await store.queryPlan(
                PostgresTaskStore.lockedRoots(in: "tasks", columns: columns, ids: ids, condition: condition))
            #expect(plan.contains { $0.contains("tasks_pkey") }, "\(plan.joined(separator: "\n"))")
        }
    }

    @Test func aControlRequestWakesAnotherStoreThroughNotifyNotThePoll() async throws {
        let schema = Self.schemaName("notify")
        let writer = try await Self.open(schema)
        let listener = try await Self.open(schema) { $0.changePollInterval = .seconds(3600) }
        defer { Task { await writer.close(); await listener.close() } }
        let before = try await listener.changeCounter()
        _ = try await writer.addControlRequest(
            ControlRequest(taskID: "t", action: .pause, ownerID: "o", requestedAt: Date()))
        // The listener's fallback poll is an hour away: a change seen within this (load-proof) deadline came by
        // the notification.
        try await poll("the notification", timeout: .seconds(60)) { try await listener.changeCounter() != before }
    }

    @Test func executorsClaimingAtOnceTakeDisjointRootsByPriorityThenAge() async throws {
        let schema = Self.schemaName("claims")
        let first = try await Self.open(schema)
        let second = try await Self.open(schema)
        defer { Task { await first.close(); await second.close() } }
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let roots = (0..<300).map { index in
            TaskRecord(
                id: String(format: "r%03d", index), name: "r", kind: "job", priority: index < 20 ? 5 : 0,
                createdAt: t0.addingTimeInterval(Double(index)))
        }
        try await first.insert(roots, events: [])
        async let a = first.claimRoots(RootClaim(fromOwners: [nil], kinds: ["job"], newOwner: "a", limit: 120))
        async let b = second.claimRoots(RootClaim(fromOwners: [nil], kinds: ["job"], newOwner: "b", limit: 120))
        let (claimedA, claimedB) = try await (a, b)
        #expect(Set(claimedA.map(\.id)).isDisjoint(with: claimedB.map(\.id)))
        #expect(claimedA.count + claimedB.count == 240)
        // Each took its chunk by priority then age.
        for claimed in [claimedA, claimedB] {
            let order = claimed.map { ($0.priority, $0.createdAt) }
            #expect(zip(order, order.dropFirst()).allSatisfy { $0.0 > $1.0 || ($0.0 == $1.0 && $0.1 <= $1.1) })
        }
        #expect(Set((claimedA + claimedB).map(\.id)).isSuperset(of: roots.prefix(20).map(\.id)))
        let rest = try await first.claimRoots(RootClaim(fromOwners: [nil], kinds: nil, newOwner: "c", limit: 1000))
        #expect(rest.count == 60)
    }
}
#endif
