import Foundation
import HeapModule

/// The roots waiting for a free slot, by priority then age, and the slots: which roots hold one.
///
/// At most ``maxConcurrent`` roots hold a slot at once. A root takes one when its start is staged and gives it back as
/// soon as its end is staged, without waiting for that commit (the next root's start shares it); a root that is paused
/// gives it back while it waits, and takes one again when it is resumed (the next free one). Taking and giving back are
/// idempotent, so that a root can never hold two slots or give back one it does not hold.
struct RunQueue {
    struct Entry: Comparable {
        var priority: Int
        var createdAt: Int64
        /// Ties: first queued, first run.
        var order: Int64
        var handle: NodeHandle
        /// The root's job kind: roots of a held kind (paused across the fleet) wait in the queue.
        var kind: String?

        /// Runs earlier: higher priority, then older, then queued first.
        static func < (left: Entry, right: Entry) -> Bool {
            if left.priority != right.priority { return left.priority > right.priority }
            if left.createdAt != right.createdAt { return left.createdAt < right.createdAt }
            return left.order < right.order
        }

        static func == (left: Entry, right: Entry) -> Bool { left.order == right.order }
    }

    var maxConcurrent: Int
    /// The roots that hold a slot.
    private(set) var slots: Set<NodeHandle> = []
    private(set) var ready = Heap<Entry>()
    private var nextOrder: Int64 = 0
    /// Slots that claim passes under way have reserved for what they claim.
    private(set) var reservedForClaims = 0
    /// Slots that claims took for the jobs they start in their own transaction (``ClaimStarts``), each until its job is
    /// loaded and holds the slot itself. They are in use: no other root takes them.
    private(set) var claimStarts = 0

    init(maxConcurrent: Int) {
        self.maxConcurrent = max(1, maxConcurrent)
    }

    /// Slots in use.
    var running: Int { slots.count }
    var hasFreeSlot: Bool { slots.count + claimStarts < maxConcurrent }
    /// Slots that no root holds and no queued root will take: what a worker may claim from the store.
    var unclaimedSlots: Int { max(0, maxConcurrent - slots.count - claimStarts - ready.count) }
    var queued: Int { ready.count }

    mutating func enqueue(_ handle: NodeHandle, priority: Int, createdAt: Date, kind: String?) {
        nextOrder += 1
        ready.insert(
            Entry(priority: priority, createdAt: createdAt.storedMilliseconds, order: nextOrder, handle: handle, kind: kind))
    }

    /// The next root to run, if a slot is free: it takes the slot. Roots of a kind in `held` stay queued.
    mutating func next(holding held: Set<String> = []) -> NodeHandle? {
        guard hasFreeSlot else { return nil }
        var skipped: [Entry] = []
        defer { for entry in skipped { ready.insert(entry) } }
        while let entry = ready.popMin() {
            // A root queued twice (resumed, paused and resumed again while it waited) holds its slot already once an
            // entry gave it one: the other entry is stale, and taking it would give that slot back under it.
            if slots.contains(entry.handle) { continue }
            if let kind = entry.kind, held.contains(kind) {
                skipped.append(entry)
                continue
            }
            slots.insert(entry.handle)
            return entry.handle
        }
        return nil
    }

    /// Takes a slot for a root outside the queue (a resumed root when one is free). Returns whether it holds one now.
    mutating func take(_ handle: NodeHandle) -> Bool {
        if slots.contains(handle) { return true }
        guard hasFreeSlot else { return false }
        slots.insert(handle)
        return true
    }

    /// Gives a root's slot back. Returns whether it held one.
    @discardableResult
    mutating func release(_ handle: NodeHandle) -> Bool {
        slots.remove(handle) != nil
    }

    /// Reserves for a claim pass the unclaimed slots no other pass reserved, and returns how many: two passes at once
    /// never claim the same slots. The reservation holds until ``endClaim(reserved:)``, once what was claimed is queued.
    mutating func reserveForClaim() -> Int {
        let room = max(0, unclaimedSlots - reservedForClaims)
        reservedForClaims += room
        return room
    }

    /// A claim pass ended: its reservation is given back (what it claimed is queued or holds slots by now).
    mutating func endClaim(reserved room: Int) {
        reservedForClaims = max(0, reservedForClaims - room)
    }

    /// Takes a free slot for a job a claim starts in its transaction. Returns whether one was free.
    mutating func takeClaimStart() -> Bool {
        guard hasFreeSlot else { return false }
        claimStarts += 1
        return true
    }

    /// A job a claim started is loaded: the slot taken for it is its own now.
    mutating func holdClaimStart(_ handle: NodeHandle) {
        claimStarts = max(0, claimStarts - 1)
        slots.insert(handle)
    }

    /// Gives back `count` slots that claims took for starts that did not happen (their transaction failed) or whose
    /// jobs are not run here after all.
    mutating func giveBackClaimStarts(_ count: Int) {
        claimStarts = max(0, claimStarts - count)
    }

    /// Every queued root, emptied (a shutdown).
    mutating func drain() -> [NodeHandle] {
        var roots: [NodeHandle] = []
        while let entry = ready.popMin() { roots.append(entry.handle) }
        return roots
    }
}

/// Deadlines the executor's timer loop waits for, on the executor's clock: timeouts, automatic retries and stall
/// checks.
struct TimerQueue {
    enum Action: Equatable {
        /// A node's timeout may have run out (paused time is checked when it fires).
        case timeout(NodeHandle)
        /// A root waiting for its next attempt is due.
        case retry(NodeHandle)
        /// A running root with a stall rule may have gone still for its limit (the run it was armed for: the start of
        /// its execution on the clock, so that a timer of an earlier run is dropped).
        case stall(NodeHandle, run: Duration)
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
