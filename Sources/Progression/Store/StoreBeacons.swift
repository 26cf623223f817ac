import Foundation
import Synchronization

/// A broadcast within this process: posters move its generation and wake every waiter; a waiter that saw an earlier
/// generation returns at once. Nothing is queued: a waiter learns that something happened since it looked, not what.
package final class Broadcast: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    package init() {}

    /// Moves with every ``post()``.
    package var generation: UInt64 { state.withLock { $0.generation } }

    /// Wakes every waiter.
    package func post() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            guard !state.waiters.isEmpty else { return [] }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the generation differs from `seen` (at once when it does already), or the task is cancelled.
    package func wait(after seen: UInt64) async {
        let id = state.withLock { state -> Int in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.generation != seen || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// Returns once the generation differs from `seen`, or after `timeout` on `clock`, whichever comes first.
    func wait(after seen: UInt64, timeout: Duration, clock: TaskClock) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(timeout) }
            group.addTask { await self.wait(after: seen) }
            await group.next()
            group.cancelAll()
        }
    }
}

/// What the stores of one database in this process tell each other, so that a job submitted here starts without
/// waiting for a worker's poll and a result is read as soon as it is committed, when the producer, the worker and the
/// waiter share a process (each with a store of its own on the same database, as the README's example has them).
/// Across processes nothing changes: workers and waiters poll as before (`controlPollInterval`, `pollInterval`).
package struct StoreBeacons: Sendable {
    /// Posted after every committed write of any store of the database in this process (on PostgreSQL also on each
    /// notification of the schema, whoever committed).
    package let commits: Broadcast
    /// Posted by producers after they committed new work (jobs, signals): the executors of the process look for
    /// something to claim at once.
    package let submissions: Broadcast

    package init() {
        commits = Broadcast()
        submissions = Broadcast()
    }

    private final class Entry {
        weak var commits: Broadcast?
        weak var submissions: Broadcast?
    }

    private static let shared = Mutex<[String: Entry]>([:])

    /// The beacons of the database `key` names (a SQLite file's path, a PostgreSQL schema's address): every store of
    /// it in this process gets the same ones while one of them lives.
    package static func forDatabase(_ key: String) -> StoreBeacons {
        shared.withLock { entries in
            if let entry = entries[key], let commits = entry.commits, let submissions = entry.submissions {
                return StoreBeacons(commits: commits, submissions: submissions)
            }
            // Entries of databases no store holds any more go, so that a process opening many files keeps none.
            entries = entries.filter { $0.value.commits != nil }
            let beacons = StoreBeacons()
            let entry = Entry()
            entry.commits = beacons.commits
            entry.submissions = beacons.submissions
            entries[key] = entry
            return beacons
        }
    }

    private init(commits: Broadcast, submissions: Broadcast) {
        self.commits = commits
        self.submissions = submissions
    }

    /// A SQLite file's key: its path made absolute and without symbolic links when it exists.
    package static func key(ofFile path: String) -> String {
        guard let resolved = realpath(path, nil) else { return "sqlite:" + path }
        defer { free(resolved) }
        return "sqlite:" + String(cString: resolved)
    }
}

/// A store that tells other stores of its database in this process about its commits (``StoreBeacons``). The
/// executor and ``JobClient`` ask for it (`as?`) and poll without it.
package protocol BroadcastingChanges: Sendable {
    var beacons: StoreBeacons { get }
}
