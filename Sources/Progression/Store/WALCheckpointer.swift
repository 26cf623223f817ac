import Dispatch
import ProgressionSQLite
import Synchronization

/// Checkpoints a database's write-ahead log on a connection and a thread of its own, so that the store's commits
/// never wait for one.
///
/// SQLite's automatic checkpoint runs inside the commit that takes the log past 1,000 frames: that commit, and every
/// caller waiting for it, waits while pages are copied and the log and the database are synced. The store turns it off
/// and asks this checkpointer instead (``request()``, from its commit hook); the checkpointer's passive checkpoint copies
/// the frames while the store goes on committing. A passive checkpoint never blocks the writer, and the writer starts
/// the log over once a checkpoint has copied everything and no reader uses old frames.
final class WALCheckpointer: Sendable {
    private let path: String
    private let queue = DispatchQueue(label: "progression.checkpoint")
    /// A request is queued and has not started: later requests join it.
    private let queued = Atomic<Bool>(false)
    /// The connection, opened on the queue when first needed and used only there; `closed` once the store closed.
    private let state = Mutex(State())

    private struct State {
        var connection: SQLiteConnection?
        var closed = false
    }

    init(path: String) {
        self.path = path
    }

    /// Asks for a passive checkpoint soon, without waiting for it; requests made before it starts make one.
    func request() {
        guard !queued.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async {
            self.queued.store(false, ordering: .releasing)
            _ = try? self.checkpoint(.passive, patience: .zero)
        }
    }

    /// Checkpoints on the checkpointer's thread, after the checkpoints asked for before, and returns how it went.
    ///
    /// A truncating checkpoint waits for readers of old frames and holds new writers back meanwhile: `patience`
    /// bounds that wait (it fails with `SQLITE_BUSY` then, and nothing is lost).
    func checkpointNow(_ mode: SQLiteConnection.CheckpointMode, patience: Duration) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            queue.async {
                continuation.resume(with: Result { try self.checkpoint(mode, patience: patience) })
            }
        }
    }

    /// Closes the connection (after any checkpoint under way); later requests do nothing.
    func close() {
        queue.sync {
            state.withLock { state in
                state.closed = true
                state.connection?.close()
                state.connection = nil
            }
        }
    }

    /// Runs on the queue.
    private func checkpoint(_ mode: SQLiteConnection.CheckpointMode, patience: Duration) throws {
        try state.withLock { state in
            guard !state.closed else { return }
            if state.connection == nil {
                var options = SQLiteConnectionOptions()
                options.create = false
                state.connection = try SQLiteConnection(path: path, options: options)
            }
            state.connection?.setBusyTimeout(patience)
            try state.connection?.checkpoint(mode)
        }
    }
}
