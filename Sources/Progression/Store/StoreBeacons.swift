import Foundation
import Synchronization

/// A broadcast within this process: posters move its generation and wake every waiter; a waiter that saw an earlier
/// generation returns at once. Nothing is queued: a waiter learns that something happened since it looked, not what.
package final class Broadcast: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var listeners: [Int: @Sendable () -> Void] = [:]
    }

    private let state = Mutex(State())

    package init() {}

    /// Moves with every ``post()``.
    package var generation: UInt64 { state.withLock { $0.generation } }

    /// Wakes every waiter, and calls every listener (on the poster's thread).
    package func post() {
        typealias Woken = (waiters: [CheckedContinuation<Void, Never>], listeners: [@Sendable () -> Void])
        let (waiters, listeners) = state.withLock { state -> Woken in
            state.generation &+= 1
            let listeners = state.listeners.isEmpty ? [] : Array(state.listeners.values)
            guard !state.waiters.isEmpty else { return ([], listeners) }
            defer { state.waiters = [:] }
            return (Array(state.waiters.values), listeners)
        }
        for listener in listeners { listener() }
        for waiter in waiters { waiter.resume() }
    }

    /// Calls `action` at every ``post()`` from now on, on the poster's thread, until ``stopListening(_:)`` with the
    /// token returned: what it does must be quick and must not wait (set a flag, signal a loop). A loop that only
    /// passes a post on to another is one wake of a task less per post this way.
    package func listen(_ action: @escaping @Sendable () -> Void) -> Int {
        state.withLock { state in
            state.nextWaiter &+= 1
            state.listeners[state.nextWaiter] = action
            return state.nextWaiter
        }
    }

    /// Stops the listener of `token`.
    package func stopListening(_ token: Int) {
        _ = state.withLock { $0.listeners.removeValue(forKey: token) }
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
}

/// What the stores of one database in this process tell each other, so that a job submitted here starts without
/// waiting for a worker's poll and a result is read as soon as it is committed, when the producer, the worker and the
/// waiter share a process (each with a store of its own on the same database, as the README's example has them).
/// Across processes nothing changes: workers and waiters poll as before (`controlPollInterval`, `pollInterval`).
package struct StoreBeacons: Sendable {
    /// Posted after every committed write of any store of the database in this process that may end or remove a job
    /// (all but claims), and on PostgreSQL also on each notification of the schema, whoever committed.
    package let commits: Broadcast
    /// Posted by producers after they committed new work (jobs, signals): the executors of the process look for
    /// something to claim at once.
    package let submissions: Broadcast
    /// Told by executors of the process which roots' ends they committed, with the row as committed when nothing but
    /// the executor writes it: a ``JobClient`` waiting for one of them returns that row, or reads the job at once
    /// (without the spacing it keeps between reads that any commit causes).
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

/// The end of a root as its executor committed it (``RootEnds``).
package struct RootEnd: Sendable, Hashable {
    package var id: String
    /// The root's row as the commit wrote it, when no one but its executor writes that row (a job without child jobs,
    /// not itself a child job: the tree keeper writes the progress of a parent that waits, and cascades reach a
    /// child); `nil` otherwise, and whoever waits reads the row.
    package var record: TaskRecord?

    package init(id: String, record: TaskRecord?) {
        self.id = id
        self.record = record
    }
}

/// The ends of roots, told by id to whoever watches one (``StoreBeacons/ends``). A watcher registers before it reads the
/// root, so that an end committed between its read and its wait is not missed; nothing is kept for ids nobody watches.
package final class RootEnds: Sendable {
    private struct Watch {
        /// The end told and not taken yet.
        var ended: RootEnd?
        /// Called once at the next end told (or when the watch ends).
        var waiter: (@Sendable () -> Void)?
    }

    private struct State {
        var nextToken = 0
        var watches: [String: [Int: Watch]] = [:]
        /// The executors of this process that tell the ends they commit, by token: each says whether it will tell a
        /// root's end.
        var tellers: [Int: @Sendable (String) -> Bool] = [:]
    }

    private let state = Mutex(State())

    package init() {}

    /// Whether anyone watches a root now (a writer with nobody to tell looks at none of its batch's ends).
    package var isWatched: Bool { state.withLock { !$0.watches.isEmpty } }

    /// Whether a watcher of root `id` waits for its end now (``onEnd(_:token:_:)``).
    package func isAwaited(_ id: String) -> Bool {
        state.withLock { state in state.watches[id]?.values.contains { $0.waiter != nil } ?? false }
    }

    /// Starts watching `id`; returns the watch's token.
    package func watch(_ id: String) -> Int {
        state.withLock { state in
            state.nextToken &+= 1
            state.watches[id, default: [:]][state.nextToken] = Watch()
            return state.nextToken
        }
    }

    /// Ends a watch (calling its waiter, if any).
    package func unwatch(_ id: String, token: Int) {
        let watch = state.withLock { state -> Watch? in
            let watch = state.watches[id]?.removeValue(forKey: token)
            if state.watches[id]?.isEmpty == true { state.watches[id] = nil }
            return watch
        }
        watch?.waiter?()
    }

    /// Registers an executor of this process that tells the ends it commits: `willTell(id)` says whether it will tell
    /// the end of root `id` (it runs it now). It must be quick and must not wait. Returns a token for
    /// ``removeTeller(_:)``.
    package func addTeller(_ willTell: @escaping @Sendable (String) -> Bool) -> Int {
        state.withLock { state in
            state.nextToken &+= 1
            state.tellers[state.nextToken] = willTell
            return state.nextToken
        }
    }

    package func removeTeller(_ token: Int) {
        _ = state.withLock { $0.tellers.removeValue(forKey: token) }
    }

    /// Whether an executor of this process says it will tell the end of root `id`: a waiter of that root need not read
    /// it at the other commits of the process, only when its end is told.
    package func willBeTold(_ id: String) -> Bool {
        let tellers = state.withLock { Array($0.tellers.values) }
        return tellers.contains { $0(id) }
    }

    /// Tells the watchers of the roots of `ends` that those ends were committed.
    package func post(_ ends: [RootEnd]) {
        guard !ends.isEmpty else { return }
        let waiters = state.withLock { state -> [@Sendable () -> Void] in
            var waiters: [@Sendable () -> Void] = []
            for end in ends {
                let id = end.id
                guard var watches = state.watches[id] else { continue }
                for token in watches.keys {
                    watches[token]?.ended = end
                    if let waiter = watches[token]?.waiter {
                        waiters.append(waiter)
                        watches[token]?.waiter = nil
                    }
                }
                state.watches[id] = watches
            }
            return waiters
        }
        for waiter in waiters { waiter() }
    }

    /// The end of the root told to this watch since the last call (which clears it), or `nil`.
    package func takeEnd(_ id: String, token: Int) -> RootEnd? {
        state.withLock { state in
            guard let end = state.watches[id]?[token]?.ended else { return nil }
            state.watches[id]?[token]?.ended = nil
            return end
        }
    }

    /// Calls `action` once, at the next end told to this watch (or when it ends), on the teller's thread; it must be
    /// quick and must not wait. Returns `false`, and keeps nothing, when an end was told and not taken yet or the watch
    /// has ended: the caller acts at once then. A later call replaces the action.
    package func onEnd(_ id: String, token: Int, _ action: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            guard let watch = state.watches[id]?[token], watch.ended == nil else { return false }
            state.watches[id]?[token]?.waiter = action
            return true
        }
    }

    /// Drops the action ``onEnd(_:token:_:)`` left, not called.
    package func cancelOnEnd(_ id: String, token: Int) {
        state.withLock { state in
            if state.watches[id]?[token] != nil { state.watches[id]?[token]?.waiter = nil }
        }
    }

    /// Returns once an end is told to this watch (at once when one was, and not taken yet), or the task is cancelled.
    package func wait(_ id: String, token: Int) async {
        let wake = OneShotWake()
        if !onEnd(id, token: token, { wake.fire() }) { wake.fire() }
        await wake.wait()
        cancelOnEnd(id, token: token)
    }
}

/// A wake that fires once: ``wait()`` returns once ``fire()`` was called (before or after), or its task is cancelled.
/// Whichever of several sources fires first wakes the waiter, without a task of its own for each.
package final class OneShotWake: Sendable {
    private struct State {
        var fired = false
        var continuation: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    package init() {}

    package func fire() {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.fired = true
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume()
    }

    package func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.fired || Task.isCancelled { return true }
                    state.continuation = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            fire()
        }
    }
}
