#if PostgreSQL
import Foundation
import Logging
import PostgresNIO
import Testing
@testable import Progression
@testable import ProgressionPostgres
import ProgressionPostgresTestSupport

/// The store's hot statements, kept prepared on each connection under a name for each text (``PreparedSQL``).
struct PreparedSQLTests {
    /// Two texts on one connection, each sent twice in turn: each answers its own query, and the server holds both,
    /// each under its own name. Were postgres-nio to read a statement's name outside the call's binding, the second
    /// text would run the first one's statement (or trap), and this would fail.
    @Test func preparedStatementsAreKeptByTheirTextOnEachConnection() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("prepared"))
        defer { Task { await store.close() } }
        let plus = "SELECT $1::int8 + 1 AS answer"
        let times = "SELECT $1::int8 * 10 AS answer"
        let (answers, held) = try await store.client.withConnection { connection in
            var answers: [Int64] = []
            for (sql, value) in [(plus, Int64(4)), (times, 4), (plus, 7), (times, 7)] {
                let rows = try await PreparedSQL.run(sql, bindings(value), connection: connection, logger: store.logger)
                answers += try rows.map { try $0.decode(Int64.self) }
            }
            let held = try await PreparedSQL.run(
                "SELECT name, statement FROM pg_prepared_statements WHERE statement = ANY($1::text[])",
                bindings([plus, times]), connection: connection, logger: store.logger
            ).map { try $0.decode((String, String).self) }
            return (answers, held)
        }
        #expect(answers == [5, 40, 8, 70])
        let names = Dictionary(uniqueKeysWithValues: held.map { ($0.1, $0.0) })
        #expect(names[plus] == PreparedSQL.names.name(for: plus))
        #expect(names[times] == PreparedSQL.names.name(for: times))
        #expect(names[plus] != names[times])
    }

    /// postgres-nio keeps a statement whose preparation failed as failed on its connection: a text that named a table
    /// not there yet is prepared again under a new name, and runs once the table exists.
    @Test func aStatementTheServerCouldNotPrepareRunsOnceItCan() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("prepared"))
        defer { Task { await store.close() } }
        let table = "\(store.names.quoted).later_\(UInt32.random(in: 0...UInt32.max))"
        let sql = "SELECT count(*) FROM \(table) WHERE $1::int8 > 0"
        let count = try await store.client.withConnection { connection in
            let before = PreparedSQL.names.name(for: sql)
            await #expect(throws: PSQLError.self) {
                try await PreparedSQL.run(sql, bindings(Int64(1)), connection: connection, logger: store.logger)
            }
            #expect(PreparedSQL.names.name(for: sql) != before)
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (id int)"), logger: store.logger)
            return try await PreparedSQL.run(sql, bindings(Int64(1)), connection: connection, logger: store.logger)
                .map { try $0.decode(Int64.self) }.first
        }
        #expect(count == 0)
    }

    /// A text is given a new name after an error at most once a minute: an error that comes back at every call (a
    /// privilege the role lacks is checked as the statement runs) leaves at most one more statement a minute.
    @Test func aTextIsRenamedAtMostOnceAMinute() {
        let names = PreparedSQL.Names()
        let start = ContinuousClock.now
        let first = names.name(for: "SELECT 1")
        names.renew("SELECT 1", after: first, at: start)
        let second = names.name(for: "SELECT 1")
        #expect(second != first)
        names.renew("SELECT 1", after: second, at: start + .seconds(59))
        #expect(names.name(for: "SELECT 1") == second)
        names.renew("SELECT 1", after: first, at: start + .seconds(120))
        #expect(names.name(for: "SELECT 1") == second, "a name already replaced is not renamed again")
        names.renew("SELECT 1", after: second, at: start + .seconds(60))
        #expect(names.name(for: "SELECT 1") != second)
        #expect(names.name(for: "SELECT 2") != names.name(for: "SELECT 1"))
    }

    /// An error of the execution (here a division by zero) keeps the statement's name: it stays prepared.
    @Test func anErrorOfTheExecutionKeepsTheName() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("prepared"))
        defer { Task { await store.close() } }
        let sql = "SELECT 10 / $1::int8"
        let answer = try await store.client.withConnection { connection in
            let before = PreparedSQL.names.name(for: sql)
            await #expect(throws: PSQLError.self) {
                try await PreparedSQL.run(sql, bindings(Int64(0)), connection: connection, logger: store.logger)
            }
            #expect(PreparedSQL.names.name(for: sql) == before)
            return try await PreparedSQL.run(sql, bindings(Int64(5)), connection: connection, logger: store.logger)
                .map { try $0.decode(Int64.self) }.first
        }
        #expect(answer == 2)
    }

    // MARK: The plans kept for a claim
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func job(_ id: String) -> TaskRecord {
        TaskRecord(id: id, name: id, kind: "export", options: .interactive, status: .pending, createdAt: now)
    }

    /// An executor's claim of every unowned job, with a slot for each, so that each is started in the claim.
    static func claim(_ store: PostgresTaskStore) async throws -> [ClaimedRoot] {
        let starts = ClaimStarts(kinds: ["export"], versions: [:], clock: { now }) { _, _ in true }
        return try await store.claimRoots(
            RootClaim(
                fromOwners: [nil], kinds: ["export"], newOwner: "me", limit: 10, now: now, readsTrees: true,
                versions: [:], starts: starts))
    }

    /// The server keeps a plan for a prepared statement after its first five calls, made with the table as it was
    /// then. The first claims of a new schema run while `tasks` holds a few rows, when a scan of the whole table is the
    /// cheapest plan; kept, that plan then scanned the grown table at every claim. A claim turns sequential scans off
    /// for its transaction, so that each plan kept looks its rows up by index: after 16 claims on an empty table and
    /// 5,000 jobs more, no statement the store's connection keeps prepared with a plan scans `tasks` whole. The
    /// claim's statements after its first are planned once and that plan kept (`plan_cache_mode`): the read of which roots
    /// have subtasks with the starts, whose array values made the server plan it again at every call, too.
    @Test func eachPreparedStatementOfAClaimUsesItsIndexes() async throws {
        var configuration = try await LocalPostgresServer.shared().configuration(
            schema: PostgresSchemaTests.schemaName("plans"))
        configuration.maximumConnections = 2
        configuration.callTimeout = .seconds(60)
        let store = try await PostgresTaskStore.started(configuration: configuration)
        defer { Task { await store.close() } }
        // The store's listener holds one of the two connections, so that every call goes through the other.
        await store.changes.waitUntilListening(timeout: .seconds(60))
        // No automatic ANALYZE: it would drop the plans kept, and those made again would see the grown table.
        _ = try await store.client.withConnection { connection in
            try await connection.query(
                PostgresQuery(unsafeSQL: "ALTER TABLE \(store.names.tasks) SET (autovacuum_enabled = false)"),
                logger: store.logger)
        }
        for round in 0..<16 {
            try await store.insert([Self.job("job\(round)")], events: [])
            let claimed = try await Self.claim(store)
            #expect(claimed.map(\.id) == ["job\(round)"])
            #expect(claimed.map(\.started) == [true])
        }
        let planned = try await store.client.withConnection { connection in
            try await connection.query(
                """
                SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements
                WHERE name LIKE 'progression%' AND (statement LIKE '%SKIP LOCKED%'
                  OR statement LIKE 'WITH nested AS%' OR statement LIKE 'SELECT DISTINCT root_id%')
                """, logger: store.logger
            ).collect().map { try $0.decode((String, Int64, Int64).self) }
        }
        #expect(planned.count == 2, "the claim's statement, and the subtasks' read with the starts: \(planned.map(\.0))")
        for (statement, generic, custom) in planned {
            #expect(custom == 0 && generic == 16, "\(statement): \(generic) calls on the plan kept, \(custom) planned")
        }
        try await store.insert((0..<5_000).map { Self.job("later\($0)") }, events: [])
        let plans = try await store.client.withConnection { connection in
            try await Self.keptPlans(on: connection, logger: store.logger)
        }
        #expect(plans.contains { $0.statement.contains("SKIP LOCKED") }, "the claim's statement has a plan kept")
        for plan in plans {
            #expect(!plan.plan.contains("Seq Scan on tasks"), "\(plan.statement)\n\(plan.plan)")
        }
    }

    /// A claim's text has a branch for each owner it takes from, and each text stays prepared on a connection for the
    /// connection's life: a claim from more owners than ``PreparedSQL/maximumClaimBranches`` allows (a branch each, and
    /// one for the roots whose time has come) goes unnamed, so that claims from ever new sets of dead owners leave no
    /// statements behind. Either way it takes every owner's roots.
    @Test(arguments: [PreparedSQL.maximumClaimBranches - 1, PreparedSQL.maximumClaimBranches])
    func aClaimFromMoreOwnersThanItsBranchesAllowIsNotKeptPrepared(owners: Int) async throws {
        var configuration = try await LocalPostgresServer.shared().configuration(
            schema: PostgresSchemaTests.schemaName("branches"))
        configuration.maximumConnections = 2
        configuration.callTimeout = .seconds(60)
        let store = try await PostgresTaskStore.started(configuration: configuration)
        defer { Task { await store.close() } }
        // The store's listener holds one of the two connections, so that every call goes through the other.
        await store.changes.waitUntilListening(timeout: .seconds(60))
        let dead = (0..<owners).map { "dead\($0)" }
        for owner in dead {
            var job = Self.job("job-" + owner)
            job.ownerID = owner
            try await store.insert([job], events: [])
        }
        let claimed = try await store.claimRoots(
            RootClaim(fromOwners: dead, kinds: nil, newOwner: "me", limit: 10, now: Self.now))
        #expect(Set(claimed.map(\.id)) == Set(dead.map { "job-" + $0 }))
        let kept = try await store.client.withConnection { connection in
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT count(*) FROM pg_prepared_statements
                        WHERE name LIKE 'progression%' AND statement LIKE '%SKIP LOCKED%' AND strpos(statement, $1) > 0
                        """, binds: bindings(store.names.tasks)),
                logger: store.logger
            ).collect().map { try $0.decode(Int64.self) }.first
        }
        #expect(kept == (owners < PreparedSQL.maximumClaimBranches ? 1 : 0))
    }

    /// The statements `connection` keeps prepared that read or write `tasks` and whose plan the server keeps (a
    /// generic plan), with that plan.
    static func keptPlans(
        on connection: PostgresConnection, logger: Logger
    ) async throws -> [(statement: String, plan: String)] {
        let kept = try await connection.query(
            """
            SELECT name, statement, cardinality(parameter_types) FROM pg_prepared_statements
            WHERE name LIKE 'progression%' AND statement LIKE '%.tasks%' AND generic_plans > 0
            """, logger: logger
        ).collect().map { try $0.decode((String, String, Int).self) }
        var plans: [(statement: String, plan: String)] = []
        for (name, statement, parameters) in kept {
            let values = Array(repeating: "NULL", count: parameters).joined(separator: ", ")
            let lines = try await connection.query(
                PostgresQuery(unsafeSQL: "EXPLAIN EXECUTE \(name)\(parameters == 0 ? "" : "(\(values))")"),
                logger: logger
            ).collect().map { try $0.decode(String.self) }
            plans.append((statement, lines.joined(separator: "\n")))
        }
        return plans
    }
}
#endif
