import Foundation

/// Which rows of a ``TaskBatch`` a store writes (fencing), decided once for every store.
///
/// A store reads, in the batch's transaction, the owner and status of each root of ``rootsToRead`` (locking them where
/// it locks rows), hands them to ``decide(holders:)``, and then writes only the rows ``writes(_:)`` allows, the
/// updates of rows that exist, and ``events(of:skipping:)``. The rule:
/// - with ``TaskBatch/owner`` set, a stored root and its subtasks are written only while the root has that owner; a
///   root the batch inserts is its own, unless its insert finds the id taken (``rootInsertConflicted(_:)``);
/// - a root queued unowned in the writer's memory (``TaskUpdate/unownedWithStatus``) is written only while it is still
///   unowned with the status the writer read (another worker may have claimed it);
/// - the events of rows not written are not written either.
///
/// The in-memory store applies it as it is, SQLite with the check of a root's own row in its update
/// (``init(_:checksRootsInTheirUpdates:)``), PostgreSQL on its transaction path; its one-round-trip procedure
/// (`apply_batch`, migration 0003) carries out the same rule in SQL.
package struct BatchFence: Sendable {
    /// What a store holds for one root.
    package struct Holder: Sendable, Hashable {
        package var owner: String?
        package var status: TaskStatus?

        package init(owner: String?, status: TaskStatus?) {
            self.owner = owner
            self.status = status
        }
    }

    /// What a store checks of a row in the statement that updates it, where the holder of its root was not read
    /// before (``BatchFence/init(_:checksRootsInTheirUpdates:)``).
    package enum RowCondition: Sendable, Hashable {
        /// Nothing: the row's root was read, or the batch has no owner.
        case none
        /// The root's row has this owner.
        case heldBy(String)
        /// The root's row has no owner and this status (a job queued unowned).
        case unownedWith(TaskStatus)
    }

    package let owner: String?
    /// Roots queued unowned, with the status the writer read.
    package let unownedGuards: [String: TaskStatus]
    /// The stored roots whose holders decide what the batch writes, each once, in byte order (an order every writer
    /// locks them in, so two writers cannot deadlock).
    package let rootsToRead: [String]
    /// The roots whose rows the batch leaves alone (known once ``decide(holders:)`` ran).
    package private(set) var fencedRoots: Set<String> = []
    private let read: Set<String>
    private let inserted: Set<String>

    /// - Parameter checksRootsInTheirUpdates: whether the store checks a root's own row in the statement that updates
    ///   it (``condition(for:)``) rather than reading it first. Within a transaction that excludes every other writer
    ///   (SQLite's) the two are the same rule, and the check in the statement saves a read per root on the writer's
    ///   most frequent batch (progress of running roots); a store that locks rows reads them all.
    package init(_ batch: TaskBatch, checksRootsInTheirUpdates: Bool = false) {
        owner = batch.owner
        let inserted = Set(batch.inserts.lazy.filter(\.isRoot).map(\.id))
        self.inserted = inserted
        var guards: [String: TaskStatus] = [:]
        for update in batch.updates where !inserted.contains(update.record.rootID) {
            if let status = update.unownedWithStatus { guards[update.record.rootID] = status }
        }
        unownedGuards = guards
        var roots: Set<String> = checksRootsInTheirUpdates ? [] : Set(guards.keys)
        if batch.owner != nil {
            for record in batch.inserts where !inserted.contains(record.rootID) { roots.insert(record.rootID) }
            // A child job is inserted with its parent's tree, while the parent's root has the owner.
            for record in batch.inserts {
                if let parent = record.parentJobID, record.isRoot, !inserted.contains(parent) { roots.insert(parent) }
            }
            for update in batch.updates where !inserted.contains(update.record.rootID) {
                if checksRootsInTheirUpdates && update.record.isRoot { continue }
                roots.insert(update.record.rootID)
            }
        }
        read = roots
        rootsToRead = roots.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// Takes what the store holds for the roots of ``rootsToRead``; a root missing from `holders` is gone.
    package mutating func decide(holders: [String: Holder]) {
        fencedRoots = []
        for root in rootsToRead {
            let holder = holders[root]
            let held: Bool
            if let status = unownedGuards[root] {
                held = holder.map { $0.owner == nil && $0.status == status } ?? false
            } else {
                held = holder.map { $0.owner == owner } ?? false
            }
            if !held { fencedRoots.insert(root) }
        }
    }

    /// Records that the insert of a root of this batch found its identity taken: the stored row is not the batch's, so
    /// none of the batch's updates of that tree is written. A store calls it before it writes the updates.
    package mutating func rootInsertConflicted(_ id: String) {
        fencedRoots.insert(id)
    }

    /// What the statement that writes `update` must check of its row (``RowCondition/none`` unless the store checks
    /// roots in their updates and this root was not read).
    package func condition(for update: TaskUpdate) -> RowCondition {
        let root = update.record.rootID
        guard update.record.isRoot, !read.contains(root), !inserted.contains(root) else { return .none }
        if let status = unownedGuards[root] { return .unownedWith(status) }
        return owner.map { .heldBy($0) } ?? .none
    }

    /// Whether the batch writes this row (an insert, or an update of a row that exists).
    package func writes(_ record: TaskRecord) -> Bool {
        !fencedRoots.contains(record.rootID)
    }

    /// Whether the batch inserts this row: as ``writes(_:)``, and a child job only while its parent's root has the
    /// batch's owner (a parent another executor took does not start children here).
    package func inserts(_ record: TaskRecord) -> Bool {
        if record.isRoot, let parent = record.parentJobID, fencedRoots.contains(parent) { return false }
        return writes(record)
    }

    /// The fenced roots that were this owner's to write, not roots queued unowned that another worker took first
    /// (how a fleet shares its backlog): what a store may say it refused.
    package var lostRoots: Set<String> {
        fencedRoots.filter { unownedGuards[$0] == nil }
    }

    /// The batch's events but those of the rows it did not write.
    package static func events(of batch: TaskBatch, skipping skipped: [String]) -> [TaskEvent] {
        guard !skipped.isEmpty else { return batch.events }
        let skipped = Set(skipped)
        return batch.events.filter { !skipped.contains($0.taskID) }
    }
}
