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
    /// Told by executors of the process which roots' ends they committed: a ``JobClient`` waiting for one of them reads
    /// it at once, without the spacing it keeps between reads that any commit causes.
    package let ends: RootEnds

    package init() {
        commits = Broadcast()
        submissions = Broadcast()
        ends = RootEnds()
    }

    private final class Entry {
        weak var commits: Broadcast?
        weak var submissions: Broadcast?
        weak var ends: RootEnds?
    }

    private static let shared = Mutex<[String: Entry]>([:])

    /// The beacons of the database `key` names (a SQLite file's path, a PostgreSQL schema's address): every store of
    /// it in this process gets the same ones while one of them lives.
    package static func forDatabase(_ key: String) -> StoreBeacons {
        shared.withLock { entries in
            if let entry = entries[key], let commits = entry.commits, let submissions = entry.submissions,
                let ends = entry.ends
            {
                return StoreBeacons(commits: commits, submissions: submissions, ends: ends)
            }
            // Entries of databases no store holds any more go, so that a process opening many files keeps none.
            entries = entries.filter { $0.value.commits != nil }
            let beacons = StoreBeacons()
            let entry = Entry()
            entry.commits = beacons.commits
            entry.submissions = beacons.submissions
            entry.ends = beacons.ends
            entries[key] = entry
            return beacons
        }
    }

    private init(commits: Broadcast, submissions: Broadcast, ends: RootEnds) {
        self.commits = commits
        self.submissions = submissions
        self.ends = ends
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

/// The ends of roots, told by id to whoever watches one (``StoreBeacons/ends``). A watcher registers before it reads the
/// root, so that an end committed between its read and its wait is not missed; nothing is kept for ids nobody watches.
package final class RootEnds: Sendable {
    private struct Watch {
        var ended = false
        var continuation: CheckedContinuation<Void, Never>?
    }

    private struct State {
        var nextToken = 0
        var watches: [String: [Int: Watch]] = [:]
    }

    private let state = Mutex(State())

    package init() {}

    /// Whether anyone watches a root now (a writer with nobody to tell looks at none of its batch's ends).
    package var isWatched: Bool { state.withLock { !$0.watches.isEmpty } }

    /// Starts watching `id`; returns the watch's token.
    package func watch(_ id: String) -> Int {
        state.withLock { state in
            state.nextToken &+= 1
            state.watches[id, default: [:]][state.nextToken] = Watch()
            return state.nextToken
        }
    }

    /// Ends a watch (resuming its waiter, if any).
    package func unwatch(_ id: String, token: Int) {
        let watch = state.withLock { state -> Watch? in
            let watch = state.watches[id]?.removeValue(forKey: token)
            if state.watches[id]?.isEmpty == true { state.watches[id] = nil }
            return watch
        }
        watch?.continuation?.resume()
    }

    /// Tells the watchers of `ids` that those roots' ends were committed.
    package func post(_ ids: [String]) {
        guard !ids.isEmpty else { return }
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            var waiters: [CheckedContinuation<Void, Never>] = []
            for id in ids {
                guard var watches = state.watches[id] else { continue }
                for token in watches.keys {
                    watches[token]?.ended = true
                    if let continuation = watches[token]?.continuation {
                        waiters.append(continuation)
                        watches[token]?.continuation = nil
                    }
                }
                state.watches[id] = watches
            }
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Whether an end of the root was told to this watch since the last call (which it clears).
    package func takeEnd(_ id: String, token: Int) -> Bool {
        state.withLock { state in
            guard state.watches[id]?[token]?.ended == true else { return false }
            state.watches[id]?[token]?.ended = false
            return true
        }
    }

    /// Returns once an end is told to this watch (at once when one was, and not taken yet), or the task is cancelled.
    package func wait(_ id: String, token: Int) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    guard let watch = state.watches[id]?[token], !watch.ended, !Task.isCancelled else { return true }
                    state.watches[id]?[token]?.continuation = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                let waiter = state.watches[id]?[token]?.continuation
                state.watches[id]?[token]?.continuation = nil
                return waiter
            }
            waiter?.resume()
        }
    }
}
