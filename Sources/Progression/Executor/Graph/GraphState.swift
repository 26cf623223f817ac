import DequeModule
import Foundation

/// Everything the executor keeps in memory, behind the graph's one lock. Each concern lives in a file of its own as
/// an extension: the tree (`TaskTree.swift`), progress (`ProgressAggregation.swift`), pauses (`PauseGate.swift`),
/// what the writer stores next (`WriteSet.swift`) and snapshots (`Snapshots.swift`); its parts with no other state
/// of their own are values with their own tests: the commits and who waits for them (`CommitLedger.swift`), the run
/// queue with its slots and the timers (`RunQueue.swift`). The decisions are its functions, each tested on the state
/// alone: a user's pause, resume, cancel, run-now and retry (`UserChanges.swift`), roots added, a run's end and a
/// subtask's (`ExecutionEngine+Roots.swift`), the timers coming due (`TimerFiring.swift`), the writer's look for work
/// (`WriteSet.swift`), a graceful stop's first step (`TaskExecutor+Service.swift`). A change that leaves something to
/// do outside the lock returns it (``UserChangeAction``, ``RootsAdded``, ``RunEnd``, ``ChildEnd``,
/// ``GraphState/TimersFired``, ``GraphState/Writes``, ``GraphState/ShutdownBegun``, ``Dispatch``, ``GraphEffects``,
/// ``GraphState/Committed``), and the engine carries it out.
struct GraphState {
    // The tree.
    var nextHandle = 1
    var nodes: [NodeHandle: TaskNode] = [:]
    /// Roots whose insert found their id taken, by handle, until the caller that added them learns it
    /// (``newRootsCommitted(_:)``): the root's run, woken by the same commit, may remove the node first.
    var conflictedRoots: [NodeHandle: String] = [:]
    var handles: [String: NodeHandle] = [:]
    /// Roots in the order they were added.
    var roots: [TaskNode] = []

    // Commits.
    /// The sequence of the latest change: every change takes the next one.
    var changeSequence: Int64 = 0
    /// What is committed, and who waits for which change (the graph closes when its ledger does).
    var commits = CommitLedger<CheckedContinuation<Void, any Error>>()
    var committedSequence: Int64 { commits.committed }
    var closedError: (any Error)? { commits.closedError }

    // What the writer stores next.
    var dirtyNodes: [TaskNode] = []
    var events: [TaskEvent] = []
    /// Child jobs started by tasks of this executor: roots that the next batch inserts (unowned: any worker claims
    /// them), with the links that stand for them in their parents' trees.
    var newChildJobs: [TaskRecord] = []
    /// The tree keeper's work this executor's changes queue: a parent's end, pause or resume to carry to its child
    /// jobs, a job that began to wait.
    var treeChanges: [TreeChange] = []
    var stagedNodes: [TaskNode] = []
    /// When the writer last took a batch: a report yields when the writer is behind.
    var lastBatchAt = Date()
    /// Someone waits for a commit: the writer skips its batching window.
    var urgent = false
    var windowWaiter: CheckedContinuation<Void, Never>?
    var storage = StorageHealth.healthy
    /// Wakes the writer when the first change since its last batch is made (yielding takes no lock of ours).
    let writerWake: AsyncStream<Void>.Continuation

    // The run queue, and the deadlines of the timer loop.
    var runQueue: RunQueue
    var timers = TimerQueue()
    /// Job kinds paused across the fleet: their queued roots do not start.
    var pausedKinds: Set<String> = []
    /// The versions of the registered kinds that declare one (``JobVersion/name``): a job of such a kind records it
    /// with its first start.
    var kindVersions: [String: String] = [:]
    /// Roots claimed whose trees could not be read yet (the store failed): loaded by the next claim pass.
    var unloadedClaims: [ClaimedRoot] = []
    /// Claim passes under way, and who waits for none to be (a graceful stop: a pass may start jobs in its
    /// transaction, which the stop releases once they are loaded).
    var claimPassesUnderWay = 0
    var claimPassesWaiters: [CheckedContinuation<Void, Never>] = []
    /// Roots given a slot whose run task is not made yet (between a dispatch and ``ExecutionEngine/launch(_:)``), and
    /// who waits for that task (a graceful stop that found such a root).
    var unlaunched: [NodeHandle: CheckedContinuation<Task<Void, Never>?, Never>?] = [:]
    /// This executor's owner id: a root it starts becomes its own in the store.
    let ownerID: String
    /// No new work is accepted; queued roots are handed back.
    var isShutDown = false
    /// ``TaskExecutor/start()`` was called: recovery passes run.
    var schedulerEnabled = false

    // Pauses.
    var nextWaiterToken = 0

    /// Roots whose end is staged, to settle once it is committed, in the order of their sequences.
    var endedRuns: [(sequence: Int64, run: EndedRun)] = []

    /// Roots whose committed status is finished, in the order their finish was committed, with that finish's time:
    /// completed ones, and failed or cancelled ones (those only while they are swept at all). A sweep reads them from
    /// the oldest and stops at the first within its visibility, rather than looking at every root in memory (with
    /// the default visibility, a busy executor holds hundreds of thousands). An entry whose root has changed since (run
    /// again, removed) is dropped when the sweep reaches it.
    var finishedCompleted = Deque<(node: TaskNode, finishedAt: Date)>()
    var finishedOther = Deque<(node: TaskNode, finishedAt: Date)>()
    /// Failed and cancelled roots are swept (``TaskExecutor/Configuration/failedTaskVisibility`` is set).
    let sweepsFailed: Bool

    // Snapshots.
    var version: Int64 = 0
    var publishedVersion: Int64 = -1

    /// Reports wait for the writer when this many events are queued.
    let eventBacklogLimit: Int
    /// A report yields its thread when the writer has not taken a batch for this long (seconds).
    let writerLagTolerance: TimeInterval

    init(
        ownerID: String, maxConcurrentTasks: Int, writerWake: AsyncStream<Void>.Continuation, eventBacklogLimit: Int,
        writerLagTolerance: TimeInterval, sweepsFailed: Bool = true
    ) {
        self.ownerID = ownerID
        self.sweepsFailed = sweepsFailed
        runQueue = RunQueue(maxConcurrent: maxConcurrentTasks)
        self.writerWake = writerWake
        self.eventBacklogLimit = eventBacklogLimit
        self.writerLagTolerance = writerLagTolerance
    }

    /// Notes that `columns` of `node` changed: the writer stores them with its next batch, and snapshots rebuild the
    /// node's tree.
    mutating func markDirty(_ node: TaskNode, _ columns: TaskColumns) {
        node.pendingColumns.formUnion(columns)
        if dirtyNodes.isEmpty && events.isEmpty { writerWake.yield() }
        if !node.isInWriteSet {
            node.isInWriteSet = true
            dirtyNodes.append(node)
        }
        changeSequence += 1
        touch(node)
        if columns.contains(.updatedAt), node.parent != nil {
            // Movement anywhere in a job's tree is the job's movement: its last change is what the stall rule reads.
            let root = node.root
            if root.record.status == .running, root.record.updatedAt < node.record.updatedAt {
                root.record.updatedAt = node.record.updatedAt
                markDirty(root, .updatedAt)
            }
        }
    }

    /// Notes that something visible in `node` changed: its snapshot and its ancestors' are rebuilt when next needed.
    /// A node marked stale has stale ancestors already, so repeated changes of one node cost one step.
    mutating func touch(_ node: TaskNode) {
        version += 1
        if node.snapshotIsStale { return }
        var current: TaskNode? = node
        while let stale = current, !stale.snapshotIsStale {
            stale.snapshotIsStale = true
            current = stale.parent
        }
    }

    /// A root has nothing more to do here for now (finished, paused before it started, handed back). Returns who
    /// waits for it, to be resumed once the lock is released.
    mutating func setIdle(_ node: TaskNode) -> GraphEffects {
        node.phase = .idle
        defer { node.idleWaiters.removeAll() }
        return GraphEffects(idleWaiters: node.idleWaiters)
    }

    /// Queues an event of `node` for the writer, with its attempt and progress as they are now.
    mutating func appendEvent(of node: TaskNode, _ kind: TaskEvent.Kind, at now: Date, message: String?) {
        append(
            TaskEvent(
                taskID: node.record.id, rootID: node.record.rootID, kind: kind, at: now, attempt: node.record.attempt,
                progress: node.record.progress, message: message))
    }

    /// Queues an event for the writer.
    mutating func append(_ event: TaskEvent) {
        if dirtyNodes.isEmpty && events.isEmpty { writerWake.yield() }
        events.append(event)
        changeSequence += 1
    }

    /// Applies a lifecycle transition to a node: its record changes, the changed columns and the event are queued for
    /// the writer, and the new state is shown once committed. Returns the sequence to wait for.
    ///
    /// - Parameter silent: the event is implied by another one (a subtask cancelled with its parent): not stored.
    /// - Throws: the lifecycle's refusal; nothing changes then.
    @discardableResult
    mutating func transition(
        _ node: TaskNode, _ transition: TaskLifecycle.Transition, by requester: TaskChangeRequester, now: Date,
        message: String? = nil, silent: Bool = false
    ) throws(ProgressionError) -> Int64 {
        let before = node.record
        let event = try TaskLifecycle.apply(transition, to: &node.record, now: now, by: requester, message: message)
        let columns = TaskColumns.changed(from: before, to: node.record)
        if let event, !silent { append(event) }
        if node.isRoot, !node.links.isEmpty,
            let action = TreeChange.cascade(from: before.status, to: node.record.status)
        {
            treeChanges.append(TreeChange(node.record.id, action))
        }
        markDirty(node, columns.union(.updatedAt))
        stage(node)
        return changeSequence
    }

    /// Keeps a transition's state to show once it is committed.
    mutating func stage(_ node: TaskNode) {
        if node.staged == nil { stagedNodes.append(node) }
        node.staged = CommittedState(node.record, sequence: changeSequence)
    }
}
