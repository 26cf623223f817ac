#if PostgreSQL
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Progression
import Synchronization

/// An executor's batch as one call of the schema's `apply_batch` procedure (migration 0003): the fencing lock of its
/// roots, its inserts, its updates (every changeable column, each written only where the update's column set has it),
/// its events, the session's mark, the notification and the commit, all on the server in one round trip. The call
/// commits inside the procedure, so its answer comes after the commit (see ``PostgresTaskStore/applyInOneCall(_:)``).
///
/// It takes a batch with an owner whose rows appear once each (an update cannot see a row inserted by the same
/// statement); any other batch goes statement by statement (``PostgresTaskStore/apply(_:connection:)``), with the same
/// outcome.
struct BatchCall: PostgresPreparedStatement {
    typealias Row = (Bool, [String], [String])

    static let name = "progression_apply_batch"

    /// The procedure's parameters, in order (its answer's three `INOUT` ones are passed as NULL): the owner, the
    /// session, the batch's number, the one it presupposes committed, the last one whose answer the writer read, the
    /// time, the channel to notify; the roots to lock, the new ones, those queued unowned and their statuses; the
    /// inserts (one array per column of `tasks`); the updates (id, root, column set as a mask, every changeable
    /// column); the events.
    static let parameterTypes: [String] =
        ["text", "text", "int8", "int8", "int8", "int8", "text", "text[]", "text[]", "text[]", "text[]"]
        + procedureColumns.map { $0.type.rawValue + "[]" }
        + ["text[]", "text[]", "int4[]"]
        + procedureUpdatable.map { $0.type.rawValue + "[]" }
        + ["text[]", "text[]", "text[]", "int8[]", "int4[]", "float8[]", "text[]", "text[]"]

    /// The columns of `tasks` the procedure's arrays carry: those of migration 0003, and the version a job began
    /// under (migration 0007). It inserts a new row's job-tree columns with their defaults, and a batch that writes
    /// them goes through the transaction path.
    static let procedureColumns = TaskTableColumn.allCases.filter {
        $0.rawValue <= TaskTableColumn.rate.rawValue || $0 == .version
    }

    /// The columns of ``procedureColumns`` an update may write, in binding order (the version last: its bit is).
    static let procedureUpdatable = TaskTableColumn.updatable.filter {
        $0.rawValue <= TaskTableColumn.rate.rawValue || $0 == .version
    }

    /// The column sets the procedure writes (each a bit of its mask).
    static let procedureWritable: TaskColumns = TaskColumns.all.subtracting([.waiting, .link])

    static let sql =
        "CALL apply_batch("
        + parameterTypes.enumerated().map { "$\($0.offset + 1)::\($0.element)" }.joined(separator: ", ")
        + ", NULL::boolean, NULL::text[], NULL::text[])"

    /// Where a batch stands in its session's chain.
    struct Numbers: Sendable, Hashable {
        /// Its own number.
        var batch: Int64
        /// The batch it presupposes committed: the session's last one when it was sent (0: none).
        var after: Int64
        /// The last batch whose answer the writer has read: its refusals need not be kept any longer.
        var acknowledged: Int64
    }

    let bindings: PostgresBindings
    let batch: TaskBatch

    func makeBindings() throws -> PostgresBindings { bindings }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }

    /// Whether `batch` goes in one call: it has an owner and names each row once.
    static func fits(_ batch: TaskBatch) -> Bool {
        guard batch.owner != nil, batch.treeChanges.isEmpty else { return false }
        // Job trees' columns and queued work beyond a child's mirror and a finished job's dependents (which the
        // procedure writes) go through the transaction path.
        for record in batch.inserts where record.parentJobID != nil || record.childJobID != nil || record.wait != nil {
            return false
        }
        for update in batch.updates where !update.columns.isSubset(of: procedureWritable) { return false }
        var seen: Set<String> = []
        for record in batch.inserts where !seen.insert(record.id).inserted { return false }
        for update in batch.updates where !seen.insert(update.record.id).inserted { return false }
        return true
    }

    /// The call of `batch` (which ``fits(_:)``), numbered `numbers` in `session`.
    init(_ batch: TaskBatch, numbers: Numbers, session: String, now: Date, store: PostgresTaskStore) throws {
        precondition(Self.fits(batch), "a batch without an owner, or naming a row twice, goes statement by statement")
        self.batch = batch
        // The fencing rule's roots and guards (``BatchFence``), which the procedure applies in SQL.
        let fence = BatchFence(batch)
        let newRoots = Set(batch.inserts.lazy.filter(\.isRoot).map(\.id))

        // In the order of `parameterTypes`.
        var bindings = PostgresBindings(capacity: Self.parameterTypes.count)
        func add<Element: PostgresArrayEncodable & PostgresNonThrowingEncodable>(_ values: [Element?]) {
            bindings.append(PostgresArray(values))
        }
        bindings.append(batch.owner!)
        bindings.append(session)
        bindings.append(numbers.batch)
        bindings.append(numbers.after)
        bindings.append(numbers.acknowledged)
        bindings.append(now.storedMilliseconds)
        bindings.append(store.names.channel)
        add(fence.rootsToRead.map(Optional.init))
        add(newRoots.sorted().map(Optional.init))
        let guarded = fence.unownedGuards.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        add(guarded.map { Optional($0.key) })
        add(guarded.map { Optional($0.value.rawValue) })
        for column in Self.procedureColumns { try store.appendArray(of: column, batch.inserts, to: &bindings) }
        let records = batch.updates.map(\.record)
        add(records.map { Optional($0.id) })
        add(records.map { Optional($0.rootID) })
        add(batch.updates.map { Optional(Int32(bitPattern: $0.columns.rawValue)) })
        for column in Self.procedureUpdatable { try store.appendArray(of: column, records, to: &bindings) }
        let events = batch.events
        add(events.map { Optional($0.taskID) })
        add(events.map { Optional($0.rootID) })
        add(events.map { Optional($0.kind.rawValue) })
        add(events.map { Optional($0.at.storedMilliseconds) })
        add(events.map { Optional(Int32(clamping: $0.attempt)) })
        add(events.map(\.progress))
        add(events.map(\.message))
        add(events.map(\.errorType))
        self.bindings = bindings
    }

    /// What the batch did not write, in the batch's order (inserts, then updates).
    func result(rejected: [String], conflicting: [String]) -> TaskBatchResult {
        TaskBatchResult(rejectedTaskIDs: rejected, conflictingTaskIDs: conflicting)
    }
}

/// The connection of a store's batches, and where its session's chain stands.
///
/// A session is one store instance: its batches are numbered 1, 2, … and each records its number as the session's mark
/// (`writer_marks`) when it commits. A batch names the one before it (``BatchCall/Numbers/after``) and writes nothing
/// unless that one is the mark: a batch sent behind one that failed cannot write over what the failed one left out.
struct BatchSession: Sendable {
    /// A backend of the server, as `pg_stat_activity` names it (a pid alone may be another's later).
    struct Backend: Sendable, Hashable {
        var pid: Int32
        /// `backend_start` in microseconds since the Unix epoch.
        var start: Int64
    }

    /// A batch whose answer was lost: its number, and the backend that ran it.
    struct Mark: Sendable, Hashable {
        var session: String
        var batch: Int64
        var backend: Backend
    }

    /// The connection batches go on (opened at the first batch, again after one failed), and its backend.
    var connection: PostgresConnection?
    var backend: Backend?
    var connections = 0
    /// The next batch's number.
    var next: Int64 = 1
    /// The batch the next one presupposes committed.
    var tail: Int64 = 0
    /// The last batch known to have committed.
    var committed: Int64 = 0
    /// The last batch whose answer (or settled outcome) the writer has read.
    var acknowledged: Int64 = 0
    /// The store closed: no connection is opened again.
    var closed = false
    /// Batches whose lost answer was settled as not committed, with what they held, until a later batch commits
    /// (which proves they did not: the mark only moves forward, and a batch commits only right after the mark it
    /// names). Should the server's mark show one of them committed after all, what it stored is known and not written
    /// twice when the executor sends it again (see ``resynchronized(mark:)``).
    var unconfirmed: [Unconfirmed] = []

    /// A batch settled as not committed: its number, and what it stored should it have committed.
    struct Unconfirmed: Sendable, Equatable {
        var batch: Int64
        var writes: Ambiguous.Stored
    }

    /// Numbers the next batch.
    mutating func number() -> BatchCall.Numbers {
        defer {
            tail = next
            next += 1
        }
        return BatchCall.Numbers(batch: next, after: tail, acknowledged: acknowledged)
    }

    /// A batch committed and its outcome was read: the batches before it settled as not committed did not.
    mutating func committed(_ batch: Int64) {
        committed = max(committed, batch)
        acknowledged = max(acknowledged, batch)
        unconfirmed.removeAll { $0.batch < batch }
    }

    /// A batch did not commit: the next one presupposes the last that did (those sent behind it write nothing).
    /// `settled`: it was sent, and found not committed after its answer was lost (kept as ``unconfirmed``).
    mutating func failed(_ batch: Int64, settled: Unconfirmed? = nil) {
        if tail >= batch { tail = committed }
        if let settled { unconfirmed.append(settled) }
    }

    /// The server's mark is `mark` while no batch of the session can still commit: the chain goes on from it.
    /// Returns the batches settled as not committed that the mark shows committed (numbered up to it).
    mutating func resynchronized(mark: Int64) -> [Unconfirmed] {
        tail = mark
        committed = mark
        let found = unconfirmed.filter { $0.batch <= mark }
        unconfirmed.removeAll { $0.batch <= mark }
        return found
    }
}

/// Serves callers one at a time, in the order they came (an async lock without cancellation: a holder's calls each
/// have a deadline, so a batch holds it for a few call timeouts at most once the store is open).
final class AsyncTurn: Sendable {
    private let state = Mutex<(busy: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func run<T>(_ body: () async throws -> T) async rethrows -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.busy {
                    state.waiters.append(continuation)
                    return false
                }
                state.busy = true
                return true
            }
            if now { continuation.resume() }
        }
        defer {
            let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if state.waiters.isEmpty {
                    state.busy = false
                    return nil
                }
                return state.waiters.removeFirst()
            }
            next?.resume()
        }
        return try await body()
    }
}

extension PostgresTaskStore {
    /// Writes `batch` (which ``BatchCall/fits(_:)``) in one call on the batch connection, within the call's deadline;
    /// called in the store's turn (``apply(_:)``), after earlier lost answers were settled.
    ///
    /// The call commits inside the procedure, before it answers: a statement in an implicit transaction answers
    /// before its commit (at Sync), and a backend terminated in between would send that answer and then abort.
    ///
    /// When the call fails without an answer that says what happened (a lost connection, the deadline, an error the
    /// server raised after the procedure's commit), the connection is closed and whether the batch committed is read
    /// from the session's mark, once its backend is gone (``batchStatus(_:)``): a batch that committed is returned
    /// as written, with the refusals its outcome kept; one that did not is an error (the executor sends it again). When
    /// the server cannot say yet, the batch is recorded as ``Ambiguous`` and the next one asks first.
    ///
    /// A batch the procedure refuses because the session's mark is not the batch before it goes on from the mark the
    /// server has: `nil` is returned, and the caller sends the batch again. The mark is behind when it was removed (a
    /// store that opens removes the marks of sessions silent for a week); it is ahead when a batch settled as not
    /// committed did commit (seen twice in chaos runs, cause not found): what that batch stored becomes known
    /// (``Ambiguous/stored``), so that the batch sent again does not insert its rows or store its events twice.
    func applyInOneCall(_ batch: TaskBatch) async throws -> TaskBatchResult? {
        try await opened()
        let numbers = batchSession.withLock { $0.number() }
        let call: BatchCall
        let connection: (PostgresConnection, BatchSession.Backend)
        do {
            call = try BatchCall(batch, numbers: numbers, session: sessionID, now: Date(), store: self)
            connection = try await batchConnection()
            try Task.checkCancellation()
        } catch {
            // Nothing was sent.
            batchSession.withLock { $0.failed(numbers.batch) }
            throw Self.storeError(error, location: location)
        }
        let answer: BatchCall.Row
        do {
            let open = connection.0
            answer = try await withBatchDeadline(closing: open) {
                var answer: BatchCall.Row?
                for try await row in try await open.execute(call, logger: self.logger) where answer == nil {
                    answer = row
                }
                guard let answer else {
                    throw TaskStoreError(.other, path: self.location, message: "the batch procedure gave no answer")
                }
                return answer
            }
        } catch {
            return try await settleLostAnswer(
                of: call, numbers: numbers, backend: connection.1, error: Self.storeError(error, location: location))
        }
        let (applied, rejected, conflicting) = answer
        if applied {
            batchSession.withLock { $0.committed(numbers.batch) }
            return call.result(rejected: rejected, conflicting: conflicting)
        }
        // Every earlier batch of the session is settled (the turn): the server's mark is where the chain stands.
        let mark = try await read { [self] connection in
            try await rows(
                "SELECT batch FROM \(names.writerMarks) WHERE session = $1", bindings(sessionID), connection: connection
            ) { try $0.decode(Int64.self) }.first
        }
        logger.notice(
            "the session's mark was not the last batch it wrote; going on from the server's",
            metadata: ["expected": "\(numbers.after)", "mark": "\(mark.map(String.init) ?? "none")"])
        let committedAfterAll = batchSession.withLock { $0.resynchronized(mark: mark ?? 0) }
        if !committedAfterAll.isEmpty {
            logger.warning(
                "batches settled as not committed had committed; what they stored is not written again",
                metadata: ["batches": "\(committedAfterAll.map(\.batch))"])
            ambiguous.withLock { state in
                for found in committedAfterAll { state.stored.add(found.writes) }
            }
        }
        return nil
    }

    /// A batch call ended without a usable answer: its connection is closed, and the session's mark says whether it
    /// committed once its backend is gone.
    private func settleLostAnswer(
        of call: BatchCall, numbers: BatchCall.Numbers, backend: BatchSession.Backend, error: TaskStoreError
    ) async throws -> TaskBatchResult {
        dropBatchConnection()
        let mark = BatchSession.Mark(session: sessionID, batch: numbers.batch, backend: backend)
        switch await batchStatus(mark) {
        case .committed(let rejected, let conflicting)?:
            batchSession.withLock { $0.committed(numbers.batch) }
            logger.notice("a batch whose answer was lost committed", metadata: ["batch": "\(numbers.batch)"])
            return call.result(rejected: rejected, conflicting: conflicting)
        case .aborted?:
            let settled = BatchSession.Unconfirmed(batch: numbers.batch, writes: .written(by: call.batch))
            batchSession.withLock { $0.failed(numbers.batch, settled: settled) }
            logger.notice(
                "a batch whose answer was lost did not commit",
                metadata: ["batch": "\(numbers.batch)", "backend": "\(backend.pid)"])
            throw error
        case nil:
            let writes = Ambiguous.Stored.written(by: call.batch)
            ambiguous.withLock { $0.batches.append(Ambiguous.Batch(commit: .mark(mark), writes: writes)) }
            throw TaskStoreError(
                .unavailable, path: location,
                message: "the connection was lost while a batch was written, and whether it committed is not known yet "
                    + "(\(error.message))")
        }
    }

    /// How a batch ended, as its session's mark says.
    enum BatchStatus: Sendable {
        /// It committed; these are the rows it did not write.
        case committed(rejected: [String], conflicting: [String])
        case aborted
    }

    /// Whether the batch of `mark` committed: its backend is ended first (`pg_terminate_backend`, then waited for
    /// until `pg_stat_activity` no longer lists it), so that nothing of it can commit after the answer; then the
    /// session's mark says, and its outcome gives what it refused. `nil`: not known (no answer from the server, or the
    /// backend did not end within the call's deadline).
    func batchStatus(_ mark: BatchSession.Mark) async -> BatchStatus? {
        // In a task of its own: a caller cancelled meanwhile (a shutdown) still ends the backend and reads the mark.
        await Task { await self.endBackendAndReadMark(mark) }.value
    }

    private func endBackendAndReadMark(_ mark: BatchSession.Mark) async -> BatchStatus? {
        guard await endBackend(mark.backend) else { return nil }
        return await markedStatus(mark)
    }

    /// Ends `backend` (`pg_terminate_backend`) and waits until `pg_stat_activity` no longer lists it, within the call's
    /// deadline: nothing sent on its connection can commit after that. `false`: no answer from the server, or the
    /// backend did not end within the deadline.
    func endBackend(_ backend: BatchSession.Backend) async -> Bool {
        let deadline = ContinuousClock.now + configuration.callTimeout
        var wait = Duration.milliseconds(5)
        var signalled = false
        while ContinuousClock.now < deadline {
            guard (try? checkNotEnded()) != nil else { return false }
            let signal = !signalled
            let alive: Bool? = try? await read { [self] connection in
                let backend = bindings(backend.pid, backend.start)
                let listed = """
                    FROM pg_stat_activity WHERE pid = $1 AND (extract(epoch FROM backend_start) * 1000000)::int8 = $2
                    """
                if signal {
                    _ = try await rows("SELECT pg_terminate_backend(pid) \(listed)", backend, connection: connection) {
                        try $0.decode(Bool.self)
                    }
                }
                return try await rows("SELECT count(*) \(listed)", backend, connection: connection) {
                    try $0.decode(Int64.self)
                }.first != 0
            }
            switch alive {
            case false?:
                return true
            case true?:
                signalled = true
            case nil:
                break
            }
            do { try await Task.sleep(for: wait) } catch { return false }
            wait = min(wait * 2, .milliseconds(200))
        }
        return false
    }

    /// The session's mark and the batch's outcome, read once the batch's backend is gone.
    private func markedStatus(_ mark: BatchSession.Mark) async -> BatchStatus? {
        let answer: (Int64, [String]?, [String]?)?? = try? await read { [self] connection in
            try await rows(
                """
                SELECT m.batch, o.rejected, o.conflicting FROM \(names.writerMarks) m
                LEFT JOIN \(names.writerOutcomes) o ON o.session = m.session AND o.batch = $2
                WHERE m.session = $1
                """, bindings(mark.session, mark.batch), connection: connection
            ) { try $0.decode((Int64, [String]?, [String]?).self) }.first
        }
        switch answer {
        case nil:
            return nil
        case .some(nil):
            return .aborted  // No batch of the session ever committed.
        case .some(let (batch, rejected, conflicting)?):
            guard batch >= mark.batch else { return .aborted }
            return .committed(rejected: rejected ?? [], conflicting: conflicting ?? [])
        }
    }

    /// The batch connection, opened when there is none: the store's startup parameters, read committed (so that the
    /// procedure's commit cannot fail on serialization), and its backend read at once (to end it when an answer is
    /// lost).
    private func batchConnection() async throws -> (PostgresConnection, BatchSession.Backend) {
        try checkNotEnded()
        if let open = batchSession.withLock({ state -> (PostgresConnection, BatchSession.Backend)? in
            guard let connection = state.connection, let backend = state.backend, !connection.isClosed else { return nil }
            return (connection, backend)
        }) {
            return open
        }
        let id = batchSession.withLock { state -> Int in
            state.connections += 1
            return state.connections
        }
        let configuration = try Self.batchConnectionConfiguration(self.configuration, names: names)
        let logger = logger
        // A connection that opens after the deadline is closed by whichever side comes last.
        let handoff = Mutex<(connection: PostgresConnection?, abandoned: Bool)>((nil, false))
        let opening = Task { () throws -> (PostgresConnection, BatchSession.Backend) in
            let connection = try await PostgresConnection.connect(
                configuration: configuration, id: -id, logger: logger)
            let abandoned = handoff.withLock { state -> Bool in
                if !state.abandoned { state.connection = connection }
                return state.abandoned
            }
            if abandoned {
                Self.close(connection)
                throw CallDeadlineExceeded()
            }
            do {
                return (connection, try await Self.ownBackend(on: connection, logger: logger, location: self.location))
            } catch {
                Self.close(connection)
                throw error
            }
        }
        let opened: (PostgresConnection, BatchSession.Backend)
        do {
            opened = try await withBatchDeadline(closing: nil) { try await opening.value }
        } catch {
            opening.cancel()
            let late = handoff.withLock { state -> PostgresConnection? in
                state.abandoned = true
                return state.connection
            }
            if let late { Self.close(late) }
            throw error
        }
        let kept = batchSession.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.connection = opened.0
            state.backend = opened.1
            return true
        }
        guard kept else {
            Self.close(opened.0)
            throw TaskStoreError(.cannotOpen, path: location, message: "the store was closed")
        }
        return opened
    }

    /// Closes the batch connection (a new one is opened for the next batch).
    func dropBatchConnection() {
        let connection = batchSession.withLock { state -> PostgresConnection? in
            defer {
                state.connection = nil
                state.backend = nil
            }
            return state.connection
        }
        if let connection { Self.close(connection) }
    }

    /// Closes the batch connection for good (the store ends).
    func closeBatchConnection() async {
        let connection = batchSession.withLock { state -> PostgresConnection? in
            state.closed = true
            defer {
                state.connection = nil
                state.backend = nil
            }
            return state.connection
        }
        let closing: EventLoopFuture<Void>? = connection?.close()
        _ = try? await closing?.get()
    }

    /// Closes a connection of the store's own (not the pool's) without waiting; the connection is kept until it is
    /// closed (postgres-nio requires a connection to be closed before it is released).
    static func close(_ connection: PostgresConnection) {
        let closing: EventLoopFuture<Void> = connection.close()
        closing.whenComplete { _ in withExtendedLifetime(connection) {} }
    }

    /// Runs `body` within the call's deadline; past it, `closing` (the batch connection) is closed, which fails its
    /// statement at once, and the call fails. The caller is resumed by the deadline itself, not by the end of `body`
    /// (see ``withCallDeadline``'s note).
    private func withBatchDeadline<T: Sendable>(
        closing connection: PostgresConnection?, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let outcome = CallOutcome<T>()
        let timeout = configuration.callTimeout
        @Sendable func close() {
            if let connection { Self.close(connection) }
        }
        // The call runs on its connection's event loop, where postgres-nio answers it (``EventLoopTaskExecutor``).
        let work = Task(executorPreference: connection.map { EventLoopTaskExecutor($0.eventLoop) }) {
            do {
                outcome.finish(.success(try await body()))
            } catch {
                outcome.finish(.failure(error))
            }
        }
        @Sendable func expire() {
            // A call that ended just before its deadline keeps its connection (the next batch's).
            guard outcome.finish(.failure(CallDeadlineExceeded())) else { return }
            close()
            work.cancel()
        }
        // A batch's deadline is a timer of its connection's event loop, not a task that sleeps for it (callgrind
        // counted 2.17 task creations and 3.16 sleeps a job at one job in flight, docs/performance.md).
        let cancelTimer: @Sendable () -> Void
        if let connection {
            let scheduled = connection.eventLoop.scheduleTask(in: .nanoseconds(Self.nanoseconds(timeout))) { expire() }
            cancelTimer = { scheduled.cancel() }
        } else {
            let sleeper = Task {
                do { try await Task.sleep(for: timeout) } catch { return }
                expire()
            }
            cancelTimer = { sleeper.cancel() }
        }
        let result = await withTaskCancellationHandler {
            await outcome.wait()
        } onCancel: {
            close()
            outcome.finish(.failure(CancellationError()))
            work.cancel()
        }
        cancelTimer()
        return try result.get()
    }

    /// `duration` in nanoseconds, saturated at `Int64.min` and `Int64.max`.
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        let (sum, overflowed) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowed ? (seconds < 0 ? .min : .max) : sum
    }

    /// The batch connection's settings: the pool's, and read committed whatever the database's default (a
    /// serializable transaction may fail at its commit, after the procedure's work).
    static func batchConnectionConfiguration(
        _ configuration: Configuration, names: PostgresNames
    ) throws -> PostgresConnection.Configuration {
        var connection: PostgresConnection.Configuration
        if let socket = configuration.unixSocketPath {
            connection = .init(
                unixSocketPath: socket, username: configuration.username, password: configuration.password,
                database: configuration.database)
        } else {
            let tls: PostgresConnection.Configuration.TLS =
                switch configuration.tls {
                case .disable: .disable
                case .prefer: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
                case .require: .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
                }
            connection = .init(
                host: configuration.host ?? "localhost", port: configuration.port, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: tls)
        }
        connection.options.connectTimeout = TimeAmount.nanoseconds(
            configuration.connectTimeout.components.seconds * 1_000_000_000
                + configuration.connectTimeout.components.attoseconds / 1_000_000_000)
        connection.options.additionalStartupParameters =
            startupParameters(configuration, names: names) + [("default_transaction_isolation", "read committed")]
        return connection
    }
}
#endif
