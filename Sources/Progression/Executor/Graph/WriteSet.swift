import Foundation

/// What the writer stores next: every changed node's changed columns (or its whole row, when new) and the queued
/// events; and the commit ledger: who waits for which change to be committed.
///
/// Every change takes the next sequence number. The writer takes everything changed up to a sequence in one batch;
/// once the batch commits, who waited for a sequence up to it is resumed, and staged transitions become what snapshots
/// show. When a batch fails (a full disk, an I/O error, a lock held too long), its content goes back into the set and
/// nobody is resumed: the writer tries again with backoff, and the waiters wait until a later batch commits.
extension GraphState {
    /// A batch taken by the writer, with the sequence it covers.
    struct TakenBatch: Sendable {
        var batch: TaskBatch
        var sequence: Int64
        /// Progress-sample events, which are not queued again when the batch fails.
        var samples: Int
    }

    /// Takes what the writer has to store; progress samples for history at most every `sampleInterval` per node, the
    /// first one `sampleInterval` after the node's run started.
    /// Returns `nil` (everything is committed) when nothing changed.
    mutating func takeBatch(now: Date, sampleInterval: TimeInterval, owner: String) -> TakenBatch? {
        lastBatchAt = now
        guard !dirtyNodes.isEmpty || !events.isEmpty || !treeChanges.isEmpty || !newChildJobs.isEmpty else {
            // Nothing to write: everything changed so far is committed (who waits for it is resumed by the caller).
            return nil
        }
        var batch = TaskBatch(owner: owner, treeChanges: treeChanges)
        treeChanges.removeAll()
        var samples: [TaskEvent] = []
        for node in dirtyNodes {
            node.isInWriteSet = false
            let columns = node.pendingColumns
            node.pendingColumns = []
            guard !node.removed else { continue }
            if !node.stored {
                batch.inserts.append(node.record)
                node.stored = true
            } else if !columns.isEmpty {
                // A job queued here is unowned in the store until its start takes it: any worker may claim it, and an
                // operator change it, meanwhile (the writer then finds it changed and drops it).
                let unowned = node.isRoot && node.committed.ownerID == nil
                batch.updates.append(
                    TaskUpdate(node.record, columns: columns, unownedWithStatus: unowned ? node.committed.status : nil))
            }
            if columns.contains(.progress), let progress = node.record.progress, !node.record.status.isFinished,
                // The first sample a full interval into the run: a task shorter than that has its progress in its
                // completion event, and writes no sample.
                now.timeIntervalSince(node.lastSampleAt ?? node.record.startedAt ?? .distantPast) >= sampleInterval
            {
                node.lastSampleAt = now
                samples.append(
                    TaskEvent(
                        taskID: node.record.id, rootID: node.record.rootID, kind: .progress, at: now,
                        attempt: node.record.attempt, progress: progress, message: node.record.step))
            }
        }
        dirtyNodes.removeAll(keepingCapacity: true)
        if !newChildJobs.isEmpty {
            // After their links (the inserts of their parents' trees), so that a store sees the parent's first.
            batch.inserts += newChildJobs
            newChildJobs.removeAll()
        }
        // Transition and step events first, in the order they happened; samples after.
        batch.events = events + samples
        events.removeAll(keepingCapacity: true)
        return TakenBatch(batch: batch, sequence: changeSequence, samples: samples.count)
    }

    /// What the writer finds when it looks for work.
    enum Writes {
        /// A batch to store.
        case batch(TakenBatch)
        /// Nothing changed: everything is committed, and who waited for it is to be resumed.
        case allCommitted(Committed)
    }

    /// The writer's next batch, or (nothing changed) everything committed. A request for an urgent commit is served
    /// by this look.
    mutating func takeWrites(now: Date, sampleInterval: TimeInterval, owner: String) -> Writes {
        urgent = false
        if let taken = takeBatch(now: now, sampleInterval: sampleInterval, owner: owner) { return .batch(taken) }
        return .allCommitted(committed(upTo: changeSequence))
    }

    /// What a commit leaves to do once the lock is released.
    struct Committed {
        /// Who waited for the commit.
        var waiters: [CheckedContinuation<Void, any Error>]
        /// What settling the roots whose end it holds left to do.
        var effects: GraphEffects
    }

    /// A batch committed: staged transitions become visible, roots whose end it holds are settled, and who waited for
    /// it is returned to be resumed.
    mutating func committed(upTo sequence: Int64) -> Committed {
        let ready = commits.commit(upTo: sequence)
        let effects = settleEndedRuns(upTo: committedSequence)
        if case .failing = storage { storage = .healthy }
        if !stagedNodes.isEmpty {
            var promoted: [TaskNode] = []
            var finished: [TaskNode] = []
            stagedNodes.removeAll { node in
                guard let staged = node.staged, staged.sequence <= sequence else { return false }
                if node.isRoot, staged.status.isFinished, !node.committed.status.isFinished { finished.append(node) }
                node.committed = staged
                node.staged = nil
                if !node.conflicted { node.hidden = false }
                promoted.append(node)
                return true
            }
            for node in promoted { touch(node) }
            for root in finished { noteFinish(of: root) }
        }
        return Committed(waiters: ready, effects: effects)
    }

    /// A batch failed: its content goes back into the set (samples excepted), to be written with the next one.
    mutating func requeue(_ taken: TakenBatch, error: any Error, now: Date) {
        treeChanges = taken.batch.treeChanges + treeChanges
        for record in taken.batch.inserts {
            guard let node = node(id: record.id) else {
                // A child job started here: inserted with the next batch.
                if record.parentJobID != nil, record.isRoot { newChildJobs.append(record) }
                continue
            }
            guard !node.removed else { continue }
            node.stored = false
            markDirty(node, .all)
        }
        for update in taken.batch.updates {
            guard let node = node(id: update.record.id), !node.removed else { continue }
            markDirty(node, update.columns)
        }
        let kept = taken.batch.events.dropLast(taken.samples)
        events = kept + events
        if case .healthy = storage {
            storage = .failing(since: now, error: ProgressionError.describe(error))
        }
        version += 1
    }

    /// Writes the store refused (another owner holds the root, or a job queued here unowned was claimed by another
    /// worker or changed by an operator): the roots are stopped without writing more; one that is not running leaves
    /// memory at once (its code never ran: the store has it as the other party left it). Returns who waited for
    /// those to become idle.
    mutating func markRejected(_ ids: [String]) -> GraphEffects {
        var effects = GraphEffects()
        for id in ids {
            guard let node = node(id: id) else { continue }
            let root = node.root
            if root.stopReason == nil { root.stopReason = .leaseLost }
            if root.phase != .running, root.execution == nil {
                effects += setIdle(root)
                removeRoot(root)
            }
        }
        return effects
    }

    /// The tasks of ``stopLostRoots(_:)``: stopped because the store no longer gives their roots to this executor.
    struct LostRoots {
        /// The tasks stopped (those still in memory), in the order given, each with its root's id.
        var tasks: [(id: String, rootID: String)] = []
        var cancellation = Cancellation()
    }

    /// Stops the code of the tasks whose writes the store refused (or whose roots it no longer gives this executor):
    /// nothing more is written for them here, whatever stopped them before (a shutdown, a cancel).
    mutating func stopLostRoots(_ ids: [String]) -> LostRoots {
        var stopped = LostRoots()
        for id in ids {
            guard let node = node(id: id) else { continue }
            stopped.tasks.append((id, node.root.record.id))
            node.root.stopReason = .leaseLost
            stopped.cancellation.actions += ExecutionEngine.stop(node.root, .leaseLost).actions
        }
        return stopped
    }

    /// Inserts that found their identity taken: the nodes are marked; returns the ids of subtasks among them (a root's
    /// caller learns of it when its insert commits).
    mutating func markConflicted(_ ids: [String]) -> [String] {
        var children: [String] = []
        for id in ids {
            guard let node = node(id: id) else { continue }
            node.conflicted = true
            if node.isRoot { conflictedRoots[node.handle] = id } else { children.append(id) }
        }
        return children
    }

    /// Waits for nothing when `sequence` is committed already; else registers `continuation` for it.
    mutating func waitForCommit(
        _ sequence: Int64, _ continuation: CheckedContinuation<Void, any Error>
    ) -> Result<Void, any Error>? {
        switch commits.wait(for: sequence, continuation) {
        case .committed: return .success(())
        case .closed(let error): return .failure(error)
        case .waiting:
            urgent = true
            return nil
        }
    }

    /// As ``waitForCommit(_:_:)``, and the writer waiting out its batching window, to resume so that it writes at once
    /// (the changes waited for are in the write set or in the batch being written: the writer was woken for them).
    mutating func waitForCommitSoon(
        _ sequence: Int64, _ continuation: CheckedContinuation<Void, any Error>
    ) -> (immediate: Result<Void, any Error>?, window: CheckedContinuation<Void, Never>?) {
        guard let immediate = waitForCommit(sequence, continuation) else { return (nil, hurryWriter()) }
        return (immediate, nil)
    }

    var hasPendingWrites: Bool {
        !dirtyNodes.isEmpty || !events.isEmpty || !treeChanges.isEmpty || !newChildJobs.isEmpty || commits.hasWaiters
    }

    /// Someone waits for the next commit: a caller, or a root whose end is to be settled.
    var awaitsCommit: Bool { urgent || commits.hasWaiters || !endedRuns.isEmpty }
}

/// Who took the roots of tasks whose writes the store refused, from the store's rows read after the refusal: a row
/// this executor owns was taken by its own claim while a start written for a job still unowned was on its way (the
/// start is refused for that very reason, and the root is loaded again), which is no loss; any other holder (another
/// owner, none, a row gone or unread) is a loss, said with what the store holds.
struct LostRootAttribution {
    /// Tasks whose roots this executor's own claim holds.
    var own: [String] = []
    /// Tasks lost, with what the store holds of their roots ("held by X", "unowned", "gone", "not read").
    var lost: [String] = []
    var holders: [String: String] = [:]

    /// - Parameter rows: the owner of each root read (`.some(nil)`: unowned), `nil` for a root gone; a root missing
    ///   from `rows` was not read.
    init(_ tasks: [(id: String, rootID: String)], rows: [String: String??], me: String) {
        for (id, rootID) in tasks {
            guard let row = rows[rootID] else {
                lost.append(id)
                holders[rootID] = "not read"
                continue
            }
            switch row {
            case .some(.some(let owner)) where owner == me:
                own.append(id)
            case .some(.some(let owner)):
                lost.append(id)
                holders[rootID] = "held by \(owner)"
            case .some(.none):
                lost.append(id)
                holders[rootID] = "unowned"
            case .none:
                lost.append(id)
                holders[rootID] = "gone"
            }
        }
    }
}

extension GraphState {
    /// Stores a checkpoint of a node's code, with its event; returns the sequence to wait for, or `nil` when the node
    /// left memory.
    mutating func checkpoint(_ handle: NodeHandle, data: Data, now: Date) -> Int64? {
        guard let node = nodes[handle], !node.removed else { return nil }
        node.record.checkpoint = data
        node.record.updatedAt = now
        markDirty(node, [.checkpoint, .updatedAt])
        appendEvent(of: node, .checkpointed, at: now, message: "\(data.count) bytes")
        return changeSequence
    }

    /// The writer's batching window begins: returns `true` when it is to write at once (someone waits for a commit,
    /// or the graph is closed), else keeps `continuation` to be resumed when the window ends (``endWindow(urgent:)``).
    mutating func waitForWindow(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
        if awaitsCommit || closedError != nil { return true }
        windowWaiter = continuation
        return false
    }

    /// A commit is awaited: the writer skips its batching window, and the one it waits out now ends (its continuation
    /// is returned, to resume once the lock is released).
    mutating func hurryWriter() -> CheckedContinuation<Void, Never>? {
        endWindow(urgent: true)
    }

    /// Ends the writer's batching window (its timer, or `urgent`: someone waits for a commit, which also keeps the
    /// next window short); returns the writer's continuation to resume, if it waits.
    mutating func endWindow(urgent: Bool) -> CheckedContinuation<Void, Never>? {
        if urgent { self.urgent = true }
        defer { windowWaiter = nil }
        return windowWaiter
    }
}
