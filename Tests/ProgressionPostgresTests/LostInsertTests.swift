#if PostgreSQL
import Foundation
import PostgresNIO
import Progression
import ProgressionTestSupport
import Testing
@testable import ProgressionPostgres

/// A submit's insert is one statement outside a transaction, which the server commits before it answers: when the
/// answer is lost, the rows sent again settle whether it went through (``PostgresTaskStore/settleLostInsert``).
struct LostInsertTests {
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)
    static let lost = TaskStoreError(.unavailable, path: "test", message: "the answer was lost")

    static func job(_ id: String, input: String = "{}") -> TaskRecord {
        TaskRecord(id: id, name: "job", kind: "k", input: Data(input.utf8), createdAt: t0)
    }

    static func created(_ record: TaskRecord) -> TaskEvent {
        TaskEvent(taskID: record.id, rootID: record.id, kind: .created, at: t0, attempt: 1, message: record.name)
    }

    /// Whether the lost insert had committed before it is settled.
    enum Lost: String, CaseIterable {
        case committed, notCommitted
    }

    @Test(arguments: Lost.allCases)
    func aLostInsertIsStoredOnceWhetherItCommittedOrNot(lost: Lost) async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("lostinsert"))
        defer { Task { await store.close() } }
        let jobs = [Self.job("a"), Self.job("b")]
        let events = jobs.map(Self.created)
        if lost == .committed { try await store.insert(jobs, events: events) }
        try await store.settleLostInsert(jobs, events: events, after: Self.lost)
        for job in jobs {
            #expect(try await store.task(id: job.id)?.input == job.input)
            #expect(try await store.events(of: job.id).map(\.kind) == [.created])
        }
    }

    /// Another insert holds one of the ids (a job of its own): the lost insert cannot have committed, and settling it
    /// writes none of its rows.
    @Test func aLostInsertWhoseIdAnotherJobHoldsIsAConflictAndWritesNothing() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("lostinsert"))
        defer { Task { await store.close() } }
        let theirs = Self.job("a", input: #"{"theirs":1}"#)
        try await store.insert([theirs], events: [Self.created(theirs)])
        let mine = [Self.job("a"), Self.job("b")]
        let error = await #expect(throws: TaskStoreError.self) {
            try await store.settleLostInsert(mine, events: mine.map(Self.created), after: Self.lost)
        }
        #expect(error?.reason == .conflict)
        #expect(try await store.task(id: "a")?.input == theirs.input)
        #expect(try await store.events(of: "a").count == 1)
        #expect(try await store.task(id: "b") == nil)
        #expect(try await store.events(of: "b").isEmpty)
    }

    /// How the transaction holding the submitted id ends.
    enum Holder: String, CaseIterable {
        case rollsBack, commitsItsOwnJob
    }

    /// A submit whose backend is killed while its insert waits for the id another transaction holds: the store sends
    /// the rows again, which wait for that transaction in turn. When it rolls back, the submit succeeds with its row and
    /// event stored once; when it commits a job of its own with the id, the submit is a conflict and writes nothing.
    @Test(arguments: Holder.allCases)
    func aSubmitWhoseBackendIsKilledIsSettledByItsRows(holder: Holder) async throws {
        let schema = PostgresSchemaTests.schemaName("killedinsert")
        let store = try await PostgresSchemaTests.open(schema) { $0.callTimeout = .seconds(120) }
        let observer = try await PostgresSchemaTests.open(schema) { $0.callTimeout = .seconds(120) }
        defer { Task { await store.close(); await observer.close() } }
        let theirs = Self.job("a", input: #"{"theirs":1}"#)
        let mine = Self.job("a")
        let locked = Gate()
        let release = Gate()
        defer { release.open() }
        let holding = Task {
            try await observer.client.withConnection { connection in
                try await connection.query("SET idle_in_transaction_session_timeout = 0", logger: observer.logger)
                try await connection.query("BEGIN", logger: observer.logger)
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: observer.insertSQL(onConflict: ""), binds: try observer.columnArrays([theirs])),
                    logger: observer.logger)
                locked.open()
                await release.wait()
                try await connection.query(
                    holder == .rollsBack ? "ROLLBACK" : "COMMIT", logger: observer.logger)
                try await connection.query("RESET idle_in_transaction_session_timeout", logger: observer.logger)
            }
        }
        try await within(.seconds(120), "the id held") { await locked.wait() }
        let submitting = Task { try await store.insert([mine], events: [Self.created(mine)]) }
        let first = try await Self.insertWaitingForALock(in: schema, observer: observer, other: nil)
        #expect(try await Self.terminate(first, observer: observer))
        // Sent again on another connection: it waits for the same transaction.
        do {
            _ = try await Self.insertWaitingForALock(in: schema, observer: observer, other: first)
        } catch {
            let rows = try await observer.read { connection in
                try await observer.rows(
                    "SELECT pid, state, wait_event_type, wait_event, query FROM pg_stat_activity",
                    connection: connection
                ) { try $0.decode((Int32, String?, String?, String?, String?).self) }
            }
            for row in rows { print("DEBUG \(row)") }
            throw error
        }
        release.open()
        try await holding.value
        switch holder {
        case .rollsBack:
            try await submitting.value
            #expect(try await observer.task(id: "a")?.input == mine.input)
        case .commitsItsOwnJob:
            let error = await #expect(throws: TaskStoreError.self) { try await submitting.value }
            #expect(error?.reason == .conflict)
            #expect(try await observer.task(id: "a")?.input == theirs.input)
        }
        #expect(try await observer.events(of: "a").map(\.kind) == (holder == .rollsBack ? [.created] : []))
    }

    /// The backend of an insert into `schema`'s tasks that waits for a lock (not `other`), as `observer` sees it.
    static func insertWaitingForALock(in schema: String, observer: PostgresTaskStore, other: Int32?) async throws
        -> Int32
    {
        var found: Int32?
        try await poll("an insert into \(schema) to wait for the id", timeout: .seconds(60)) {
            found = try await observer.read { connection in
                try await observer.rows(
                    """
                    SELECT pid FROM pg_stat_activity
                    WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO "' || $1 || '".tasks%'
                      AND pid <> coalesce($2, 0)
                    """, bindings(schema, other), connection: connection
                ) { try $0.decode(Int32.self) }.first
            }
            return found != nil
        }
        return try #require(found)
    }

    static func terminate(_ pid: Int32, observer: PostgresTaskStore) async throws -> Bool {
        try await observer.read { connection in
            try await observer.rows("SELECT pg_terminate_backend($1)", bindings(pid), connection: connection) {
                try $0.decode(Bool.self)
            }.first ?? false
        }
    }
}
#endif
