import Foundation
import HeapModule

/// What waits for a slot: a root in memory, or a root claimed from the store whose tree is loaded only when it runs
/// (recovery queues a dead owner's backlog compactly and rehydrates one root per free slot).
enum QueuedRoot {
    case node(NodeHandle)
    case claimed(ClaimedRoot)
}

/// The roots waiting for a free slot, by priority then age, and the slots in use.
///
/// At most ``maxConcurrent`` roots hold a slot at once: a root takes one when its start is staged and gives it back as
/// soon as its end is staged, without waiting for that commit (the next root's start shares it).
struct RunQueue {
    struct Entry: Comparable {
        var priority: Int
        var createdAt: Int64
        /// Ties: first queued, first run.
        var order: Int64
        var root: QueuedRoot

        /// Runs earlier: higher priority, then older, then queued first.
        static func < (left: Entry, right: Entry) -> Bool {
            if left.priority != right.priority { return left.priority > right.priority }
            if left.createdAt != right.createdAt { return left.createdAt < right.createdAt }
            return left.order < right.order
        }

        static func == (left: Entry, right: Entry) -> Bool { left.order == right.order }
    }

    var maxConcurrent: Int
    /// Slots in use.
    var running = 0
    var ready = Heap<Entry>()
    private var nextOrder: Int64 = 0
    /// Claimed roots queued without their tree (counted against the claim backlog).
    var claimedWaiting = 0

    init(maxConcurrent: Int) {
        self.maxConcurrent = max(1, maxConcurrent)
    }

    var hasFreeSlot: Bool { running < maxConcurrent }

    mutating func enqueue(_ root: QueuedRoot, priority: Int, createdAt: Date) {
        nextOrder += 1
        if case .claimed = root { claimedWaiting += 1 }
        ready.insert(Entry(priority: priority, createdAt: createdAt.storedMilliseconds, order: nextOrder, root: root))
    }

    /// The next root to run, if a slot is free (the caller takes the slot when it starts it).
    mutating func next() -> QueuedRoot? {
        guard hasFreeSlot, let entry = ready.popMin() else { return nil }
        if case .claimed = entry.root { claimedWaiting -= 1 }
        return entry.root
    }

    /// Every queued entry, emptied (a shutdown).
    mutating func drain() -> [QueuedRoot] {
        var roots: [QueuedRoot] = []
        while let entry = ready.popMin() { roots.append(entry.root) }
        claimedWaiting = 0
        return roots
    }
}

/// Deadlines the executor's timer loop waits for, on the executor's clock: timeouts, automatic retries, recovered
/// jobs whose next attempt is due later.
struct TimerQueue {
    enum Action {
        /// A node's timeout may have run out (paused time is checked when it fires).
        case timeout(NodeHandle)
        /// A root waiting for its next attempt is due.
        case retry(NodeHandle)
        /// A claimed root whose next attempt is due.
        case claimed(ClaimedRoot)
    }

    struct Entry: Comparable {
        var deadline: Duration
        var order: Int64
        var action: Action

        static func < (left: Entry, right: Entry) -> Bool {
            (left.deadline, left.order) < (right.deadline, right.order)
        }

        static func == (left: Entry, right: Entry) -> Bool { left.order == right.order }
    }

    private var entries = Heap<Entry>()
    private var nextOrder: Int64 = 0

    var earliest: Duration? { entries.min?.deadline }

    /// Adds a deadline; returns whether it is now the earliest (the timer loop must wake up).
    mutating func add(_ action: Action, at deadline: Duration) -> Bool {
        nextOrder += 1
        let earlier = earliest.map { deadline < $0 } ?? true
        entries.insert(Entry(deadline: deadline, order: nextOrder, action: action))
        return earlier
    }

    /// The actions due at `now`, removed.
    mutating func due(at now: Duration) -> [Action] {
        var due: [Action] = []
        while let first = entries.min, first.deadline <= now {
            due.append(entries.removeMin().action)
        }
        return due
    }

    mutating func removeAll() -> [Action] {
        var all: [Action] = []
        while let entry = entries.popMin() { all.append(entry.action) }
        return all
    }
}
