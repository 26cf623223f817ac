#if PostgreSQL
import Foundation
import PostgresNIO
import Progression
import ProgressionTestSupport
import Testing
@testable import ProgressionPostgres

/// A submit's insert is one statement outside a transaction, which the server commits before it answers: when the
/// answer is lost, the backend it was sent to is ended and the rows sent again settle whether it went through
/// (``PostgresTaskStore/settleLostInsert(_:events:sentBy:after:)``).
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
        try await store.settleLostInsert(jobs, events: events, sentBy: nil, after: Self.lost)
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
        let theirs = Self.theirs
        try await store.insert([theirs], events: [Self.created(theirs)])
        let mine = [Self.job("a"), Self.job("b")]
        let error = await #expect(throws: TaskStoreError.self) {
            try await store.settleLostInsert(mine, events: mine.map(Self.created), sentBy: nil, after: Self.lost)
        }
        #expect(error?.reason == .conflict)
        #expect(try await store.task(id: "a")?.input == theirs.input)
        #expect(try await store.events(of: "a").count == 1)
        #expect(try await store.task(id: "b") == nil)
        #expect(try await store.events(of: "b").isEmpty)
    }

    /// Another job with the id "a".
    static let theirs = job("a", input: #"{"theirs":1}"#)

    /// A store of a new `schema` whose calls outlive any wait of these tests, with connections to spare for them.
    static func open(_ schema: String) async throws -> PostgresTaskStore {
        try await PostgresSchemaTests.open(schema) {
            $0.callTimeout = .seconds(120)
            $0.maximumConnections = 8
        }
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
        let store = try await Self.open(schema)
        defer { Task { await store.close() } }
        let theirs = Self.theirs
        let mine = Self.job("a")
        let held = try await Held(theirs, in: store, ending: holder)
        defer { held.release.open() }
        let submitting = Task { try await store.insert([mine], events: [Self.created(mine)]) }
        let first = try await Self.insertWaitingForALock(in: schema, observer: store, other: nil)
        #expect(try await Self.terminate(first.pid, observer: store))
        // Sent again on another connection: it waits for the same transaction.
        _ = try await Self.insertWaitingForALock(in: schema, observer: store, other: first.pid)
        held.release.open()
        try await held.holding.value
        switch holder {
        case .rollsBack:
            try await submitting.value
            #expect(try await store.task(id: "a")?.input == mine.input)
        case .commitsItsOwnJob:
            let error = await #expect(throws: TaskStoreError.self) { try await submitting.value }
            #expect(error?.reason == .conflict)
            #expect(try await store.task(id: "a")?.input == theirs.input)
        }
        #expect(try await store.events(of: "a").map(\.kind) == (holder == .rollsBack ? [.created] : []))
    }

    /// An insert whose answer is lost may still wait on the server, or still be on its way there: the settle ends the
    /// backend it was sent to before it sends the rows again, so that the lost insert can never run after them (were
    /// the rows then stored, run and removed, it would store the job a second time). Here the lost insert waits for
    /// the id another transaction holds; the settle ends its backend (the insert fails), then, once that transaction
    /// rolls back, stores the rows itself.
    @Test func aLostInsertsBackendIsEndedBeforeItsRowsAreSentAgain() async throws {
        let schema = PostgresSchemaTests.schemaName("lostbackend")
        let store = try await Self.open(schema)
        defer { Task { await store.close() } }
        let mine = Self.job("a")
        let held = try await Held(Self.theirs, in: store, ending: .rollsBack)
        defer { held.release.open() }
        // The lost insert, on a connection of the store's pool whose answer nobody reads.
        let lostInsert = Task {
            try await store.client.withPooledConnection { connection in
                try await connection.query(
                    PostgresQuery(unsafeSQL: store.insertSQL(onConflict: ""), binds: try store.columnArrays([mine])),
                    logger: store.logger)
            }
        }
        let first = try await Self.insertWaitingForALock(in: schema, observer: store, other: nil)
        let settling = Task {
            try await store.settleLostInsert([mine], events: [Self.created(mine)], sentBy: first, after: Self.lost)
        }
        // The rows sent again wait for the transaction holding the id, and the lost insert's backend is gone.
        _ = try await Self.insertWaitingForALock(in: schema, observer: store, other: first.pid)
        #expect(try await !Self.isListed(first, observer: store))
        await #expect(throws: (any Error).self) { try await lostInsert.value }
        held.release.open()
        try await held.holding.value
        try await settling.value
        #expect(try await store.task(id: "a")?.input == mine.input)
        #expect(try await store.events(of: "a").map(\.kind) == [.created])
    }

    /// A submit whose task is cancelled while its insert waits on the server is not given up: its answer says whether
    /// the job is stored, and here it is (a cancelled call that returned at once would leave a job stored that its
    /// caller was told was not).
    @Test func aCancelledSubmitWaitsForItsInsertsAnswer() async throws {
        let schema = PostgresSchemaTests.schemaName("cancelledinsert")
        let store = try await Self.open(schema)
        defer { Task { await store.close() } }
        let mine = Self.job("a")
        let held = try await Held(Self.theirs, in: store, ending: .rollsBack)
        defer { held.release.open() }
        let submitting = Task { try await store.insert([mine], events: [Self.created(mine)]) }
        _ = try await Self.insertWaitingForALock(in: schema, observer: store, other: nil)
        submitting.cancel()
        held.release.open()
        try await held.holding.value
        try await submitting.value
        #expect(try await store.task(id: "a")?.input == mine.input)
        #expect(try await store.events(of: "a").map(\.kind) == [.created])
    }

    /// A transaction of `store`'s pool that has inserted `record` and holds its id until `release` opens, then ends
    /// as `ending` says.
    struct Held {
        let release: Gate
        let holding: Task<Void, any Error>

        init(_ record: TaskRecord, in store: PostgresTaskStore, ending: Holder) async throws {
            let locked = Gate()
            let release = Gate()
            self.release = release
            holding = Task {
                try await store.client.withPooledConnection { connection in
                    // Held as long as the test needs, however loaded the machine.
                    try await connection.query("SET idle_in_transaction_session_timeout = 0", logger: store.logger)
                    try await connection.query("BEGIN", logger: store.logger)
                    try await connection.query(
                        PostgresQuery(unsafeSQL: store.insertSQL(onConflict: ""), binds: try store.columnArrays([record])),
                        logger: store.logger)
                    locked.open()
                    await release.wait()
                    try await connection.query(ending == .rollsBack ? "ROLLBACK" : "COMMIT", logger: store.logger)
                    try await connection.query("RESET idle_in_transaction_session_timeout", logger: store.logger)
                }
            }
            try await within(.seconds(120), "the id held") { await locked.wait() }
        }
    }

    /// The backend of an insert into `schema`'s tasks that waits for a lock (not `other`), as `observer` sees it.
    static func insertWaitingForALock(in schema: String, observer: PostgresTaskStore, other: Int32?) async throws
        -> BatchSession.Backend
    {
        var found: BatchSession.Backend?
        try await poll("an insert into \(schema) to wait for the id", timeout: .seconds(60)) {
            found = try await observer.read { connection in
                try await observer.rows(
                    """
                    SELECT pid, (extract(epoch FROM backend_start) * 1000000)::int8 FROM pg_stat_activity
                    WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO "' || $1 || '".tasks%'
                      AND pid <> coalesce($2, 0)
                    """, bindings(schema, other), connection: connection
                ) { row in
                    let (pid, start) = try row.decode((Int32, Int64).self)
                    return BatchSession.Backend(pid: pid, start: start)
                }.first
            }
            return found != nil
        }
        return try #require(found)
    }

    static func isListed(_ backend: BatchSession.Backend, observer: PostgresTaskStore) async throws -> Bool {
        try await observer.read { connection in
            try await observer.rows(
                """
                SELECT count(*) FROM pg_stat_activity
                WHERE pid = $1 AND (extract(epoch FROM backend_start) * 1000000)::int8 = $2
                """, bindings(backend.pid, backend.start), connection: connection
            ) { try $0.decode(Int64.self) }.first != 0
        }
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
