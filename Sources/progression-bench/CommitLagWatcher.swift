import CSQLite
import Foundation

/// Watches how far the committed state of a SQLite store trails the reports: a thread of its own (off Swift's
/// cooperative pool, so busy tasks cannot starve it) polls `max(updated_at)` of the tasks table every 2 ms through a
/// read connection of its own, and records `now − max(updated_at)`: how old the newest committed report is. It also
/// counts the polls in which that newest time moved: the commits it saw (a lower bound, two commits within one poll
/// count once).
///
/// While tasks report continuously, that is the write-behind lag of the durability contract (DESIGN.md §3: progress
/// is committed "within a short window (tens of milliseconds)").
///
/// ```swift
/// let watcher = CommitLagWatcher(path: path)
/// watcher.start()
/// // … reports …
/// let worst = watcher.stop()   // milliseconds
/// ```
final class CommitLagWatcher: Sendable {
    private let path: String
    private let stopped = Flag()
    private let done = Latch(count: 1)
    private let samples = SharedValue<[Double]>([])
    private let commitsSeen = SharedValue<Int>(0)

    init(path: String) {
        self.path = path
    }

    /// Starts polling on a new thread.
    func start() {
        let path = path
        let stopped = stopped
        let done = done
        let samples = samples
        let commitsSeen = commitsSeen
        let thread = Thread {
            defer { done.arrive() }
            var handle: OpaquePointer?
            guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
                let database = handle
            else {
                sqlite3_close_v2(handle)
                return
            }
            defer { sqlite3_close_v2(database) }
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(database, "SELECT max(updated_at) FROM tasks", -1, &statement, nil) == SQLITE_OK,
                let query = statement
            else { return }
            defer { sqlite3_finalize(query) }
            var local: [Double] = []
            var previous: Int64?
            var moves = 0
            while !stopped.isSet {
                if sqlite3_step(query) == SQLITE_ROW {
                    let newest = sqlite3_column_int64(query, 0)
                    if let previous, newest != previous { moves += 1 }
                    previous = newest
                    local.append(Date().timeIntervalSince1970 * 1000 - Double(newest))
                }
                sqlite3_reset(query)
                usleep(2_000)
            }
            samples.value = local
            commitsSeen.value = moves
        }
        thread.start()
    }

    /// Stops polling; returns the largest lag seen in milliseconds (`nan` when nothing could be read), how many
    /// samples were taken, and how many commits they saw.
    func stop() async -> (worst: Double, samples: Int, commits: Int) {
        stopped.set()
        await done.wait()
        let all = samples.value
        return (all.max() ?? .nan, all.count, commitsSeen.value)
    }
}
