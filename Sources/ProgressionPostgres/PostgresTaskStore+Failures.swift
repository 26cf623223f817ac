#if PostgreSQL
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Progression
import Synchronization

extension PostgresTaskStore {
    /// An error of the server, the connection or the store as a ``TaskStoreError`` whose reason says whether to try
    /// again: a server that cannot be reached, went away or did not answer in time is `.unavailable` (transient), as is
    /// a conflict of concurrent transactions (`.busy`); what the statement itself got wrong (its syntax, a missing
    /// object, a permission, a constraint, a value) is final and never retried.
    static func storeError(_ error: any Error, location: String) -> TaskStoreError {
        if let error = error as? TaskStoreError { return error }
        if error is CancellationError {
            return TaskStoreError(.cancelled, path: location, message: "cancelled before it ran")
        }
        if error is CallDeadlineExceeded {
            return TaskStoreError(.unavailable, path: location, message: "no answer from the server in time")
        }
        if let error = error as? ProgressionError {
            // Never reached through `write` (callers rethrow lifecycle refusals themselves); kept for safety.
            return TaskStoreError(.refused, path: location, message: error.description)
        }
        if let error = error as? EncodingError {
            return TaskStoreError(.refused, path: location, message: "cannot encode a value: \(error)")
        }
        if let error = error as? DecodingError {
            return TaskStoreError(.corrupt, path: location, message: "cannot decode a stored value: \(error)")
        }
        if let error = error as? PostgresDecodingError {
            return TaskStoreError(.corrupt, path: location, message: "cannot decode a stored value: \(error)")
        }
        // The pool gave up opening connections for a while (its circuit breaker): postgres-nio rethrows its pool's
        // error as it is, and that type lives in a module it does not export.
        if String(reflecting: type(of: error)).hasSuffix("ConnectionPoolError") {
            return TaskStoreError(.unavailable, path: location, message: "cannot connect: \(error)")
        }
        guard let error = error as? PSQLError else {
            if error is ChannelError || error is IOError {
                return TaskStoreError(.unavailable, path: location, message: "the connection failed: \(error)")
            }
            return TaskStoreError(.other, path: location, message: String(describing: error))
        }
        if let state = error.serverInfo?[.sqlState] {
            let message = error.serverInfo?[.message] ?? "server error \(state)"
            let detail = error.serverInfo?[.detail].map { " (\($0))" } ?? ""
            return TaskStoreError(reason(sqlState: state), path: location, message: message + detail)
        }
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .poolClosed, .uncleanShutdown,
            .messageDecodingFailure, .unexpectedBackendMessage, .listenFailed, .unlistenFailed:
            var message = "the connection failed: \(error.code)"
            if let underlying = error.underlying { message += " (\(underlying))" }
            return TaskStoreError(.unavailable, path: location, message: message)
        case .sslUnsupported, .failedToAddSSLHandler, .unsupportedAuthMechanism, .authMechanismRequiresPassword,
            .saslError:
            var message = "cannot connect: \(error.code)"
            if let underlying = error.underlying { message += " (\(underlying))" }
            return TaskStoreError(.cannotOpen, path: location, message: message)
        case .queryCancelled:
            return TaskStoreError(.cancelled, path: location, message: "the query was cancelled")
        default:
            return TaskStoreError(.other, path: location, message: String(reflecting: error))
        }
    }

    /// The reason of a server error, by its SQLSTATE (PostgreSQL's appendix A, "Error codes").
    static func reason(sqlState state: String) -> TaskStoreError.Reason {
        switch state {
        case "23505", "23P01": return .conflict
        case "25006": return .readOnly
        // Serialization failure, deadlock, lock not available, too many connections; statement_timeout.
        case "40001", "40P01", "55P03", "53300", "57014": return .busy
        // The server shuts down or restarts (admin/crash shutdown, cannot connect now), its session was terminated
        // (idle in transaction too long), or the database system is starting.
        case "57P01", "57P02", "57P03", "57P05", "25P03": return .unavailable
        case "3D000", "3F000": return .cannotOpen
        default: break
        }
        switch state.prefix(2) {
        case "08": return .unavailable  // connection exception
        case "53": return .storageFailure  // insufficient resources (disk full, out of memory); 53300 is above
        case "58": return .storageFailure  // system error (I/O)
        case "28": return .cannotOpen  // invalid authorization
        case "23", "22": return .constraint  // integrity constraint violation, data exception
        default: return .refused  // syntax, undefined objects, permissions (42), feature not supported, internal
        }
    }
}

/// The connection a call uses, so that its deadline can close it.
extension PostgresClient {
    /// Runs `body` on a connection of the pool, as `withConnection` does, and closes the connection before it goes back
    /// when `body` failed in a way that ended its session (``endsSession(_:)``). postgres-nio 1.33.2 returns a
    /// connection whose backend the server ended in the middle of a statement (`pg_terminate_backend`: the statement
    /// fails with a `FATAL` error, then the server closes the socket) to the pool as idle, and the next call handed it
    /// waits for an answer that never comes, until its deadline. Closed here, and waited for, the pool knows it closed
    /// (its close callback runs before this one's) and opens another for the next call
    /// (`aCallAfterTheServerEndedTheSessionOfTheLastIsAnswered`).
    func withPooledConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await withConnection { connection in
            do {
                return try await body(connection)
            } catch {
                if Self.endsSession(error) { try? await connection.close() }
                throw error
            }
        }
    }

    /// Whether `error` ended its connection's session: a server error of severity `FATAL` or `PANIC` (after which the
    /// server closes the connection), or the connection itself failing.
    static func endsSession(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError else { return error is ChannelError || error is IOError }
        if let severity = error.serverInfo?[.severity] ?? error.serverInfo?[.localizedSeverity] {
            return severity == "FATAL" || severity == "PANIC"
        }
        switch error.code {
        case .serverClosedConnection, .uncleanShutdown, .connectionError, .messageDecodingFailure,
            .unexpectedBackendMessage:
            return true
        default:
            return false
        }
    }
}

final class ConnectionSlot: Sendable {
    private let state = Mutex<(connection: PostgresConnection?, expired: Bool)>((nil, false))

    /// Records the call's connection; `false` (and the connection closed) when the deadline passed already.
    func attach(_ connection: PostgresConnection) -> Bool {
        let expired = state.withLock { state in
            if !state.expired { state.connection = connection }
            return state.expired
        }
        if expired { Self.close(connection) }
        return !expired
    }

    /// Closes a connection now, without waiting: its statement in flight fails at once.
    private static func close(_ connection: PostgresConnection) {
        let closing: EventLoopFuture<Void> = connection.close()
        closing.whenComplete { _ in }
    }

    func detach() {
        state.withLock { $0.connection = nil }
    }

    /// The deadline passed: closes the connection in use. Returns whether there was one.
    func expire() -> Bool {
        let connection = state.withLock { state in
            state.expired = true
            return state.connection
        }
        if let connection { Self.close(connection) }
        return connection != nil
    }
}

/// How a call ended: the first of its body's result, its deadline and its cancellation, given to its caller once.
final class CallOutcome<T: Sendable>: Sendable {
    private let state = Mutex<(result: Result<T, any Error>?, waiter: CheckedContinuation<Result<T, any Error>, Never>?)>(
        (nil, nil))

    /// Ends the call with `result`, unless it ended already. Returns whether this ended it.
    @discardableResult
    func finish(_ result: Result<T, any Error>) -> Bool {
        let (ended, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Result<T, any Error>, Never>?) in
            guard state.result == nil else { return (false, nil) }
            state.result = result
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume(returning: result)
        return ended
    }

    /// The call's end.
    func wait() async -> Result<T, any Error> {
        await withCheckedContinuation { continuation in
            let result = state.withLock { state -> Result<T, any Error>? in
                if state.result == nil { state.waiter = continuation }
                return state.result
            }
            if let result { continuation.resume(returning: result) }
        }
    }
}

/// A call got its connection after its deadline.
struct CallDeadlineExceeded: Error {}

/// Ends ``PostgresTaskStore/run()``: fired once, waited for by its run.
final class StopSignal: Sendable {
    private let state = Mutex<(fired: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func fire() {
        let waiters = state.withLock { state in
            state.fired = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                if !state.fired { state.waiters.append(continuation) }
                return state.fired
            }
            if now { continuation.resume() }
        }
    }
}

/// Writes whose `COMMIT` was sent and whose answer was lost while the server could not be asked whether they committed
/// (it was down). The next batch and the next claim ask first, so that what did commit is neither written again (an
/// insert would find its own row and be reported as a conflict, an event would be stored twice) nor forgotten (claimed
/// roots would stay held by this executor without it knowing).
///
/// What such a batch is found to have stored stays known (``stored``) until a batch that left it out commits: the
/// executor sends a failed batch again whole, as it took it, so the batch adapted to that knowledge may fail and come
/// back with the same inserts and events (seen in the chaos run: the settled entry was dropped, the adapted batch
/// failed, and its insert came back and was taken for another owner's row).
struct Ambiguous: Sendable {
    /// Rows inserted, events stored and roots taken by batches whose commit was found out later.
    struct Stored: Sendable, Equatable {
        var inserts: Set<String> = []
        var events: [TaskEvent: Int] = [:]
        /// Roots a guarded update (of a job queued here unowned) took: they are held by this store's owner now.
        var taken: Set<String> = []

        var isEmpty: Bool { inserts.isEmpty && events.isEmpty && taken.isEmpty }

        /// What `batch` stored when it committed.
        static func written(by batch: TaskBatch) -> Stored {
            var stored = Stored()
            for record in batch.inserts { stored.inserts.insert(record.id) }
            for update in batch.updates where update.unownedWithStatus != nil { stored.taken.insert(update.record.id) }
            for event in batch.events { stored.events[event, default: 0] += 1 }
            return stored
        }

        mutating func add(_ other: Stored) {
            inserts.formUnion(other.inserts)
            taken.formUnion(other.taken)
            for (event, count) in other.events { events[event, default: 0] += count }
        }

        /// A batch that left `used` out committed (and its caller knows): it is no longer sent.
        mutating func remove(_ used: Stored) {
            inserts.subtract(used.inserts)
            taken.subtract(used.taken)
            for (event, count) in used.events {
                let left = (events[event] ?? 0) - count
                events[event] = left > 0 ? left : nil
            }
        }

        /// Adapts `batch`: a row stored already is written as an update of every column, an event stored already is
        /// left out, a root taken already is written as held (its guard would refuse it: it is no longer unowned).
        /// Returns what it used.
        func adapt(_ batch: inout TaskBatch) -> Stored {
            var used = Stored()
            guard !isEmpty else { return used }
            var inserts: [TaskRecord] = []
            for record in batch.inserts {
                if self.inserts.contains(record.id) {
                    batch.updates.append(TaskUpdate(record, columns: .all))
                    used.inserts.insert(record.id)
                } else {
                    inserts.append(record)
                }
            }
            batch.inserts = inserts
            for index in batch.updates.indices
            where batch.updates[index].unownedWithStatus != nil && taken.contains(batch.updates[index].record.id) {
                batch.updates[index].unownedWithStatus = nil
                used.taken.insert(batch.updates[index].record.id)
            }
            var left = events
            batch.events.removeAll { event in
                guard let count = left[event], count > 0 else { return false }
                left[event] = count - 1
                used.events[event, default: 0] += 1
                return true
            }
            return used
        }
    }

    /// How to find out whether a write committed.
    enum Commit: Sendable, Hashable {
        /// A transaction whose `COMMIT` was sent: `txid_status`.
        case transaction(Int64)
        /// A batch call: its session's mark, once its backend is gone.
        case mark(BatchSession.Mark)
    }

    struct Batch: Sendable {
        var commit: Commit
        /// What it stored, should it have committed.
        var writes: Stored
    }

    struct Claim: Sendable {
        var xid: Int64
        var roots: [ClaimedRoot]
    }

    var batches: [Batch] = []
    var claims: [Claim] = []
    var stored = Stored()
}
#endif
