#if PostgreSQL
import Foundation
import Logging
import PostgresNIO
import Progression
import ProgressionTestSupport
import Synchronization
import Testing
@testable import ProgressionPostgres
import ProgressionPostgresTestSupport

/// An executor's batch as one call of the schema's `apply_batch` procedure (migration 0003), which commits before it
/// answers: its plan, its column masks, its chain of batches, and what the store does when the answer is lost.
struct BatchCallTests {
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    /// Holds a row lock on task `id` in a transaction of `store`'s until `release` opens; `locked` opens once held.
    static func holdLock(on id: String, in store: PostgresTaskStore, locked: Gate, release: Gate) -> Task<Void, any Error> {
        Task {
            try await store.client.withConnection { connection in
                // Held as long as the test needs, however loaded the machine: not ended as idle in a transaction.
                try await connection.query("SET idle_in_transaction_session_timeout = 0", logger: store.logger)
                try await connection.query("BEGIN", logger: store.logger)
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "SELECT 1 FROM \(store.names.tasks) WHERE id = $1 FOR UPDATE", binds: bindings(id)),
                    logger: store.logger)
                locked.open()
                await release.wait()
                try await connection.query("COMMIT", logger: store.logger)
                try await connection.query("RESET idle_in_transaction_session_timeout", logger: store.logger)
            }
        }
    }

    /// Waits until the backend of `store`'s batch connection waits for a lock, as `observer` sees it; returns it.
    static func batchBackendWaitingForALock(
        of store: PostgresTaskStore, observer: PostgresTaskStore
    ) async throws -> BatchSession.Backend {
        var found: BatchSession.Backend?
        try await poll("the batch to wait for the lock", timeout: .seconds(60)) {
            guard let backend = store.batchSession.withLock({ $0.backend }) else { return false }
            let waiting = try await observer.read { connection in
                try await observer.rows(
                    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", bindings(backend.pid),
                    connection: connection
                ) { try $0.decode(String?.self) }.first ?? nil
            }
            if waiting == "Lock" { found = backend }
            return found != nil
        }
        return try #require(found)
    }

    static func backendIsListed(_ backend: BatchSession.Backend, by store: PostgresTaskStore) async throws -> Bool {
        try await store.read { connection in
            try await store.rows(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", bindings(backend.pid), connection: connection
            ) { try $0.decode(Int64.self) }.first != 0
        }
    }

    /// A call whose answer does not come within its deadline (it waits for a lock another session holds): its
    /// connection is closed, and the store says the batch did not commit only once its backend is gone (ended by the
    /// store, or by the server's statement timeout, which is the same deadline), so that nothing of it commits once
    /// the lock is released. The next batch goes on a new connection.
    @Test func aBatchWhoseAnswerIsLostIsEndedWithItsBackendAndNeverCommitsLater() async throws {
        let schema = PostgresSchemaTests.schemaName("lostbatch")
        // Long enough that the batch reaches its lock wait before its deadline on a loaded machine.
        let store = try await PostgresSchemaTests.open(schema) { $0.callTimeout = .seconds(10) }
        let observer = try await PostgresSchemaTests.open(schema) { $0.callTimeout = .seconds(120) }
        defer { Task { await store.close(); await observer.close() } }
        var root = TaskRecord(id: "r", name: "r", kind: "k", status: .running, ownerID: "o", createdAt: Self.t0)
        try await store.insert([root], events: [])
        let locked = Gate()
        let release = Gate()
        defer { release.open() }
        let holder = Self.holdLock(on: "r", in: observer, locked: locked, release: release)
        try await within(.seconds(120), "the lock") { await locked.wait() }
        root.progress = 0.5
        let batch = TaskBatch(
            updates: [TaskUpdate(root, columns: .progress)],
            events: [TaskEvent(taskID: "r", rootID: "r", kind: .step, at: Self.t0, attempt: 1, message: "half")],
            owner: "o")
        let applying = Task { try await store.apply(batch) }
        let backend = try await Self.batchBackendWaitingForALock(of: store, observer: observer)
        let error = await #expect(throws: TaskStoreError.self) { _ = try await applying.value }
        // The store's deadline (unavailable), or the server's statement timeout, the same, a moment later (busy).
        #expect(error?.reason == .unavailable || error?.reason == .busy, "\(String(describing: error))")
        // Ended before the store answered: nothing of it can commit once the lock is released.
        #expect(try await !Self.backendIsListed(backend, by: observer))
        release.open()
        try await holder.value
        #expect(try await observer.task(id: "r")?.progress == nil)
        #expect(try await observer.events(of: "r").isEmpty)
        _ = try await store.apply(batch)
        #expect(try await observer.task(id: "r")?.progress == 0.5)
        #expect(try await observer.events(of: "r").map(\.message) == ["half"])
        #expect(store.batchSession.withLock { $0.backend } != backend)
    }

    /// A batch that commits while the link to the server is cut (its answer held by the cut): the store cannot ask
    /// whether it committed, records it, and says it failed; once the link heals, the batch sent again (as the
    /// executor sends it) finds out first, from the session's mark, that it did: its new row is written as an update
    /// and its event is not stored twice.
    @Test func aBatchThatCommittedBehindACutLinkIsKnownAsWrittenOnceTheServerAnswers() async throws {
        let server = try await PostgresResilienceTests.server(tcp: true)
        defer { server.discard() }
        let proxy = try TCPProxy(port: server.tcpPort)
        defer { proxy.stop() }
        var throughProxy = PostgresTaskStore.Configuration(
            host: "127.0.0.1", port: proxy.port, username: server.username, database: server.database)
        throughProxy.schema = "cutbatch"
        throughProxy.tls = .disable
        // Long enough that the batch, blocked on the lock, outlives (on a loaded machine) the steps below until the
        // lock is released: the server's statement timeout is the same.
        throughProxy.callTimeout = .seconds(10)
        throughProxy.connectTimeout = .seconds(10)
        var direct = server.configuration(schema: "cutbatch")
        direct.callTimeout = .seconds(120)
        try await PostgresTaskStore.withStore(configuration: throughProxy) { store in
            try await PostgresTaskStore.withStore(configuration: direct) { observer in
                let root = TaskRecord(id: "r", name: "r", kind: "k", status: .running, ownerID: "o", createdAt: Self.t0)
                try await store.insert([root], events: [])
                let step = TaskRecord(
                    id: "r.1", parentID: "r", rootID: "r", name: "step", status: .running, createdAt: Self.t0)
                let batch = TaskBatch(
                    inserts: [step], events: [TaskEvent(taskID: "r.1", rootID: "r", kind: .created, at: Self.t0, attempt: 1)],
                    owner: "o")
                let locked = Gate()
                let release = Gate()
                defer { release.open() }
                let holder = Self.holdLock(on: "r", in: observer, locked: locked, release: release)
                try await within(.seconds(120), "the lock") { await locked.wait() }
                let applying = Task { try await store.apply(batch) }
                _ = try await Self.batchBackendWaitingForALock(of: store, observer: observer)
                proxy.cut()
                release.open()
                try await holder.value
                try await poll("the batch to commit on the server", timeout: .seconds(60)) {
                    try await observer.task(id: "r.1") != nil
                }
                let error = await #expect(throws: TaskStoreError.self) { _ = try await applying.value }
                #expect(error?.reason == .unavailable)
                #expect(store.ambiguous.withLock { $0.batches.count } == 1)
                proxy.heal()
                // Sent again as the executor sends it, until the server answers (the pool connects again after the
                // cut with a backoff of its own): each try asks about the lost batch first, and sends nothing until
                // it knows.
                var answered: TaskBatchResult?
                try await poll("the batch sent again to be written", timeout: .seconds(120), every: .milliseconds(200)) {
                    answered = try? await store.apply(batch)
                    return answered != nil
                }
                let result = try #require(answered)
                #expect(result.conflictingTaskIDs.isEmpty && result.rejectedTaskIDs.isEmpty, "\(result)")
                #expect(try await observer.events(of: "r.1").filter { $0.kind == .created }.count == 1)
                #expect(store.ambiguous.withLock { $0.stored.isEmpty && $0.batches.isEmpty })
            }
        }
    }

    /// The procedure writes a column of an update only where the update's column set has it: its masks are
    /// TaskColumns' bits, written in the migration (a column set and the procedure disagreeing would write one
    /// column's value over another, or drop it).
    @Test(arguments: (0..<32).map { TaskColumns(rawValue: 1 << $0) }.filter { TaskColumns.all.contains($0) })
    func anUpdateWritesOnlyTheColumnsOfItsSet(column: TaskColumns) async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("mask"))
        defer { Task { await store.close() } }
        let before = TaskRecord(
            id: "r", name: "r", kind: "k", options: .default, status: .completed, progress: 0.25, step: "a",
            weight: 1, attempt: 1, interruptions: 0, errorType: "A", errorDescription: "a", result: Data("a".utf8),
            checkpoint: Data("a".utf8), ownerID: "o", priority: 1, createdAt: Self.t0,
            startedAt: Self.t0.addingTimeInterval(1), updatedAt: Self.t0.addingTimeInterval(2),
            finishedAt: Self.t0.addingTimeInterval(3), nextAttemptAt: Self.t0.addingTimeInterval(4), total: 10, rate: 1)
        var after = TaskRecord(
            id: "r", name: "r", kind: "k", options: TaskOptions.interactive.retryable(), status: .failed,
            progress: 0.75, step: "b", weight: 2, attempt: 2, interruptions: 1, errorType: "B", errorDescription: "b",
            result: Data("b".utf8), checkpoint: Data("b".utf8), ownerID: "p", priority: 2, createdAt: Self.t0,
            startedAt: Self.t0.addingTimeInterval(11), updatedAt: Self.t0.addingTimeInterval(12),
            finishedAt: Self.t0.addingTimeInterval(13), nextAttemptAt: Self.t0.addingTimeInterval(14), total: 20, rate: 2)
        // Job trees' columns (migration 0005), which the transaction path writes.
        after.wait = .jobs
        after.waitingFor = "jobs"
        after.waitingProgress = 0.5
        after.share = 0.5
        after.awaited = true
        after.version = "2"  // migration 0007: written with a job's first start, through the procedure
        #expect(TaskColumns.changed(from: before, to: after) == .all)
        try await store.insert([before], events: [])
        let result = try await store.apply(TaskBatch(updates: [TaskUpdate(after, columns: column)], owner: "o"))
        #expect(result.rejectedTaskIDs.isEmpty)
        let stored = try #require(try await store.task(id: "r"))
        var expected = before
        column.copy(from: after, into: &expected)
        #expect(TaskColumns.changed(from: expected, to: stored) == [], "\(stored)")
    }

    /// Each batch names the one before it in its session, and writes nothing unless that one committed: a batch sent
    /// behind one that failed (on the same connection, before the failure was known) cannot write over what the
    /// failed one left out.
    @Test func aBatchWritesNothingUnlessTheOneBeforeItInItsSessionCommitted() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("chain"))
        defer { Task { await store.close() } }
        var root = TaskRecord(id: "r", name: "r", kind: "k", status: .running, ownerID: "o", createdAt: Self.t0)
        try await store.insert([root], events: [])
        let session = "test-\(UUID().uuidString)"
        func call(_ batch: Int64, after: Int64, progress: Double) async throws -> Bool {
            root.progress = progress
            let call = try BatchCall(
                TaskBatch(updates: [TaskUpdate(root, columns: .progress)], owner: "o"),
                numbers: BatchCall.Numbers(batch: batch, after: after, acknowledged: 0), session: session, now: Date(),
                store: store)
            return try await store.read { connection in
                var applied: Bool?
                for try await row in try await connection.execute(call, logger: store.logger) { applied = row.0 }
                return try #require(applied as Bool?)
            }
        }
        #expect(try await call(2, after: 1, progress: 0.1) == false)
        #expect(try await store.task(id: "r")?.progress == nil)
        #expect(try await call(1, after: 0, progress: 0.2) == true)
        #expect(try await call(3, after: 2, progress: 0.3) == false)
        #expect(try await store.task(id: "r")?.progress == 0.2)
        #expect(try await call(3, after: 1, progress: 0.4) == true)
        #expect(try await store.task(id: "r")?.progress == 0.4)
    }

    /// A store that opens removes the marks of writer sessions silent for a week; a live session whose mark went (or
    /// was changed from outside) goes on from the mark the server has, instead of having every batch refused.
    @Test func aSessionWhoseMarkWasRemovedGoesOn() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("pruned"))
        defer { Task { await store.close() } }
        var root = TaskRecord(id: "r", name: "r", kind: "k", status: .running, ownerID: "o", createdAt: Self.t0)
        try await store.insert([root], events: [])
        for progress in [0.25, 0.5] {
            root.progress = progress
            _ = try await store.apply(TaskBatch(updates: [TaskUpdate(root, columns: .progress)], owner: "o"))
        }
        let marks = "\(store.names.writerMarks)"
        _ = try await store.read { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "DELETE FROM \(marks)"), logger: store.logger)
        }
        root.progress = 0.75
        _ = try await store.apply(TaskBatch(updates: [TaskUpdate(root, columns: .progress)], owner: "o"))
        #expect(try await store.task(id: "r")?.progress == 0.75)
        root.progress = 1
        _ = try await store.apply(TaskBatch(updates: [TaskUpdate(root, columns: .progress)], owner: "o"))
        #expect(try await store.task(id: "r")?.progress == 1)
    }

    /// Writes `batch`, then rewinds the store's chain as though its answer had been lost and the store had settled it
    /// as not committed (what the chaos run once saw).
    static func applyAndSettleAsNotCommitted(_ batch: TaskBatch, in store: PostgresTaskStore) async throws {
        #expect(try await store.apply(batch) == TaskBatchResult())
        store.batchSession.withLock { state in
            let written = state.committed
            state.committed = written - 1
            state.failed(written, settled: .init(batch: written, writes: .written(by: batch)))
        }
    }

    /// A batch whose lost answer was settled as not committed, though it had committed (seen once in the chaos run:
    /// the next batch found the session's mark on it): the executor sends its rows and events again, and the store,
    /// refused by the mark, learns from it that they are stored; its new row is written as an update (not reported as
    /// a conflict, which would stop the task as lost to another owner) and its event is not stored twice.
    @Test func aBatchSettledAsNotCommittedThatHadCommittedIsNotWrittenTwice() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("misjudged"))
        defer { Task { await store.close() } }
        let root = TaskRecord(id: "r", name: "r", kind: "k", status: .running, ownerID: "o", createdAt: Self.t0)
        try await store.insert([root], events: [])
        var step = TaskRecord(
            id: "r.1", parentID: "r", rootID: "r", name: "one", kind: nil, status: .running, ownerID: nil,
            createdAt: Self.t0)
        let event = TaskEvent(taskID: "r.1", rootID: "r", kind: .step, at: Self.t0, attempt: 1, message: "one")
        let batch = TaskBatch(inserts: [step], events: [event], owner: "o")
        try await Self.applyAndSettleAsNotCommitted(batch, in: store)
        // The executor sends it again, with what changed since.
        step.progress = 0.5
        let again = TaskBatch(inserts: [step], events: [event], owner: "o")
        #expect(try await store.apply(again) == TaskBatchResult())
        #expect(try await store.task(id: "r.1")?.progress == 0.5)
        #expect(try await store.events(of: "r").filter { $0.taskID == "r.1" }.map(\.message) == ["one"])
        // Known as stored until a batch that left them out committed; then the chain goes on as usual.
        #expect(store.ambiguous.withLock { $0.stored.isEmpty })
        step.progress = 1
        #expect(try await store.apply(TaskBatch(updates: [TaskUpdate(step, columns: .progress)], owner: "o")) == TaskBatchResult())
        #expect(try await store.task(id: "r.1")?.progress == 1)
        #expect(store.batchSession.withLock { $0.unconfirmed.isEmpty })
    }

    /// A job queued here unowned is taken by the update that starts it, guarded by the status the writer read. When
    /// that batch committed but was settled as not committed, the executor sends the guarded update again; the row is
    /// held by this owner now, so the guard would refuse it (and the job would stop as lost to another owner while
    /// the store shows it running under a live one): it is written as held instead.
    @Test func aRootTakenByABatchSettledAsNotCommittedIsWrittenAsHeldWhenSentAgain() async throws {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("retaken"))
        defer { Task { await store.close() } }
        var root = TaskRecord(id: "q", name: "q", kind: "k", status: .pending, createdAt: Self.t0)
        try await store.insert([root], events: [])
        root.status = .running
        root.ownerID = "o"
        root.startedAt = Self.t0
        let started = TaskEvent(taskID: "q", rootID: "q", kind: .started, at: Self.t0, attempt: 1)
        let start = TaskBatch(
            updates: [TaskUpdate(root, columns: [.status, .owner, .startedAt], unownedWithStatus: .pending)],
            events: [started], owner: "o")
        try await Self.applyAndSettleAsNotCommitted(start, in: store)
        root.progress = 0.5
        var again = start
        again.updates = [TaskUpdate(root, columns: [.status, .owner, .startedAt, .progress], unownedWithStatus: .pending)]
        #expect(try await store.apply(again) == TaskBatchResult())
        #expect(try await store.task(id: "q")?.progress == 0.5)
        #expect(try await store.task(id: "q")?.ownerID == "o")
        #expect(try await store.events(of: "q").filter { $0.kind == .started }.count == 1)
    }

    /// The procedure's statement runs a plan PL/pgSQL makes once per session, generic (planning it each time was half
    /// of the server's time per batch), with index access only: made at the session's first batch, on a table that
    /// may be all but empty (a new schema), it must reach `tasks` through its indexes once the table grew. This runs a
    /// batch on an empty table, adds 3,000 roots, runs another on the same connection, and counts its scans of
    /// `tasks` (the server's counters, flushed after each step).
    @Test func aBatchPlanMadeOnAnEmptyTableReadsTasksThroughIndexesOnceItGrew() async throws {
        // The counters are the server's, for every session: the schema is made by a store that closes first, and its
        // sessions (whose counts, the index builds among them, are flushed when they end) are gone before counting.
        let schema = PostgresSchemaTests.schemaName("batchplan")
        let creator = "create-\(schema)"
        let making = try await PostgresSchemaTests.open(schema) { $0.applicationName = creator }
        await making.close()
        let store = try await PostgresSchemaTests.open(schema)
        defer { Task { await store.close() } }
        try await poll("the creating store's sessions to end", timeout: .seconds(60)) {
            try await store.read { connection in
                try await store.rows(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", bindings(creator),
                    connection: connection
                ) { try $0.decode(Int64.self) }.first == 0
            }
        }
        let t0 = Self.t0
        let first = TaskRecord(id: "first", name: "first", kind: "k", status: .running, ownerID: "o", createdAt: t0)
        let progressed = TaskRecord(
            id: "root00100", name: "job 100", kind: "k", status: .running, progress: 0.5, ownerID: "o", createdAt: t0)
        let step = TaskRecord(
            id: "root02000.1", parentID: "root02000", rootID: "root02000", name: "step", status: .running,
            createdAt: t0.addingTimeInterval(5_000))
        let session = "test-\(UUID().uuidString)"
        let firstCall = try BatchCall(
            TaskBatch(
                inserts: [first], events: [TaskEvent(taskID: "first", rootID: "first", kind: .created, at: t0, attempt: 1)],
                owner: "o"),
            numbers: BatchCall.Numbers(batch: 1, after: 0, acknowledged: 0), session: session, now: Date(), store: store)
        // What an executor writes later for two jobs in flight: one reports progress, one pushes a step.
        let laterCall = try BatchCall(
            TaskBatch(
                inserts: [step], updates: [TaskUpdate(progressed, columns: [.progress])],
                events: [TaskEvent(taskID: step.id, rootID: step.rootID, kind: .started, at: step.createdAt, attempt: 1)],
                owner: "o"),
            numbers: BatchCall.Numbers(batch: 2, after: 1, acknowledged: 1), session: session, now: Date(), store: store)
        let logger = store.logger
        let tasks = "\(store.names.quoted).tasks"
        let (answer, scans) = try await store.read { connection in
            // The server's counters of scans of `tasks`, with this backend's flushed first.
            func scans() async throws -> (sequential: Int64, index: Int64) {
                try await connection.query("SELECT pg_stat_force_next_flush()", logger: logger)
                try await connection.query("SELECT pg_stat_clear_snapshot()", logger: logger)
                return try await store.rows(
                    """
                    SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0) FROM pg_stat_user_tables
                    WHERE relid = '\(tasks)'::regclass
                    """, connection: connection
                ) { try $0.decode((Int64, Int64).self) }.first ?? (0, 0)
            }
            for try await _ in try await connection.execute(firstCall, logger: logger) {}
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO \(tasks) (id, root_id, name, kind, options, status, owner_id, created_at, updated_at)
                        SELECT 'root' || lpad(n::text, 5, '0'), 'root' || lpad(n::text, 5, '0'), 'job ' || n, 'k', '{}',
                          'running', 'o', \(t0.storedMilliseconds) + n, \(t0.storedMilliseconds) + n
                        FROM generate_series(0, 2999) AS n
                        """), logger: logger)
            let before = try await scans()
            var answer: BatchCall.Row?
            for try await row in try await connection.execute(laterCall, logger: logger) { answer = row }
            let after = try await scans()
            let written = try await store.rows(
                "SELECT id, progress FROM \(tasks) WHERE id = ANY($1::text[]) ORDER BY id",
                bindings([progressed.id, step.id]), connection: connection
            ) { try $0.decode((String, Double?).self) }
            #expect(written.map(\.0) == [progressed.id, step.id] && written.first?.1 == 0.5)
            return (answer, (after.sequential - before.sequential, after.index - before.index))
        }
        let (applied, rejected, conflicting) = try #require(answer)
        #expect(applied && rejected.isEmpty && conflicting.isEmpty)
        #expect(scans.0 == 0 && scans.1 > 0, "sequential, index scans of tasks: \(scans)")
    }
}
#endif
