import Foundation

/// A node's handle: an integer that stands for a node in memory, cheaper to look up than its id.
typealias NodeHandle = Int

/// Why a node's code is being stopped.
enum StopReason: Sendable, Equatable {
    /// Cancelled directly (through the API, progressctl, or `cancelAll`).
    case cancelled
    /// It ran longer than its timeout.
    case timedOut(Duration)
    /// Its job did not move for its stall limit; `retry`: the attempt fails with ``TaskStalledError`` (its retry
    /// policy applies), else the job is cancelled.
    case stalled(Duration, retry: Bool)
    /// The executor is shutting down: leave the task resumable.
    case shutdown
    /// Another owner holds the task now (fencing): stop without writing anything more for it.
    case leaseLost
    /// A durable sleep: the root gives its slot back until the time, when any worker continues it.
    case sleeping(until: Date)
    /// A durable wait for child jobs, other jobs or a signal: the root gives its slot back, and any worker continues it
    /// once the tree keeper released it (or at `until`, a signal's timeout). `progress`: what its tree adds up to now,
    /// which its children raise meanwhile.
    case awaiting(JobWait, description: String, until: Date, progress: Double?)
    /// Resumed while this executor had no free slot: the job is given to the fleet — unowned in the store, where any
    /// worker with a free slot of its kind continues it from its checkpoint and completed steps (its paused code's
    /// memory is given up, as after a crash).
    case handedOff

    /// Whether the root gives its slot back to be continued later by any worker (a durable sleep or wait, a job
    /// handed to the fleet).
    var suspendsRoot: Bool {
        switch self {
        case .sleeping, .awaiting, .handedOff: true
        default: false
        }
    }
}

/// The transition fields of a node as last committed: what snapshots show, since a transition is published only
/// after its commit.
struct CommittedState: Sendable {
    var status: TaskStatus
    var attempt: Int
    var interruptions: Int
    var errorType: String?
    var errorDescription: String?
    var startedAt: Date?
    var finishedAt: Date?
    var nextAttemptAt: Date?
    /// The owner the store has: `nil` for a job queued in memory that any worker may claim.
    var ownerID: String?
    var sequence: Int64

    init(_ record: TaskRecord, sequence: Int64) {
        ownerID = record.ownerID
        status = record.status
        attempt = record.attempt
        interruptions = record.interruptions
        errorType = record.errorType
        errorDescription = record.errorDescription
        startedAt = record.startedAt
        finishedAt = record.finishedAt
        nextAttemptAt = record.nextAttemptAt
        self.sequence = sequence
    }
}

/// A node's code while it runs: how to cancel it, and its active time (paused time not counted) for its timeout.
struct Execution {
    var cancel: @Sendable () -> Void
    var startedAt: Duration
    var pausedSince: Duration?
    var pausedTotal: Duration = .zero

    /// How long the code has run, paused time not counted.
    func activeTime(now: Duration) -> Duration {
        (pausedSince ?? now) - startedAt - pausedTotal
    }
}

/// Where a root is in the executor's scheduling (a root's run, as opposed to its stored status).
enum RootPhase: Equatable {
    /// Nothing to do here: finished, paused before its code started, or handed back.
    case idle
    /// Waiting in the run queue for a free slot.
    case queued
    /// Waiting for its next attempt's time.
    case delayed
    /// Holding a slot: its start is being committed, its code runs, or its end is being recorded.
    case running
    /// Paused while its code ran: the code waits at its next report, and the root holds no slot (a resume takes the
    /// next free one).
    case suspended
}

/// One task in memory. Only touched under the graph's lock.
final class TaskNode {
    let handle: NodeHandle
    var record: TaskRecord
    /// The transition state snapshots show: the last one committed.
    var committed: CommittedState
    /// The latest transition waiting for its commit; promoted to `committed` by the writer.
    var staged: CommittedState?
    weak var parent: TaskNode?
    var children: [TaskNode] = []
    /// Children by name and occurrence, to find a step again when its parent runs again.
    var childIndex: [String: [Int: TaskNode]] = [:]
    /// Occurrences of each child name pushed in the current run.
    var nameCounts: [String: Int] = [:]

    var progress = ProgressState()
    var rate = RateState()

    var execution: Execution? {
        didSet { isExecuting = execution != nil }
    }
    /// Whether its code runs (read on every report: cheaper than loading ``execution``).
    private(set) var isExecuting = false
    var stopReason: StopReason?
    /// Code suspended at a report, push or checkpoint while this node or an ancestor is paused.
    var pauseWaiters: [Int: CheckedContinuation<Void, any Error>] = [:]

    // Persistence (see ``WriteSet``).
    /// Columns changed since the writer last took the node.
    var pendingColumns: TaskColumns = []
    var isInWriteSet = false
    /// Whether the node's row exists in the store (then changes are narrow updates, not inserts).
    var stored: Bool
    /// A root whose row is not committed yet: not shown on the progress stream.
    var hidden = false
    /// Its insert found the identity taken (a duplicate id or idempotency key).
    var conflicted = false
    var removed = false
    var lastSampleAt: Date?

    // Snapshots: the last one built, and whether it (or one below it) changed since.
    var cachedSnapshot: TaskSnapshot?
    var snapshotIsStale = true

    // Roots only.
    var body: RootBody?
    var phase = RootPhase.idle
    var runTask: Task<Void, Never>?
    /// Callers of `waitForTask` waiting for the root to be idle.
    var idleWaiters: [CheckedContinuation<Void, Never>] = []
    /// Its next start begins a new attempt (an automatic retry).
    var startsNewAttempt = false
    /// A root whose start its claim committed (``ClaimStarts``): its code runs without waiting for a commit.
    var startedByClaim = false
    /// Resumed while no slot was free: its code waits (as if paused) until the run queue gives it one.
    var waitsForSlot = false
    /// Claimed in the store by this executor while its previous run was still ending here (a wait released at once):
    /// loaded afresh once that run has settled.
    var reclaimed = false
    /// The sequence of the change that gives this root to the fleet (``GraphState/handOff(_:now:)``): nothing more is
    /// written for it here; it leaves memory once that change is committed, and a user's change waits for that
    /// commit and is then made where the job is.
    var handOffSequence: Int64?
    /// Subtasks created under this root, for their ids.
    var childCount = 0
    /// The links of this root's tree (nodes standing for child jobs), by child job id.
    var links: [String: NodeHandle] = [:]
    /// Links only: the least attempt of its child job whose row this link takes. A child that its parent runs again
    /// here begins a new attempt; a row read of the attempt before (it failed or was cancelled) is stale.
    var childAttemptFloor = 0

    init(handle: NodeHandle, record: TaskRecord, sequence: Int64, stored: Bool) {
        self.handle = handle
        self.record = record
        self.stored = stored
        committed = CommittedState(record, sequence: sequence)
    }

    var isRoot: Bool { parent == nil }

    /// Whether this node stands for a child job (its state follows the child's; this executor never writes it but
    /// at its insert and its ``TaskRecord/share``/``TaskRecord/awaited`` when its root waits).
    var isLink: Bool { record.childJobID != nil }

    /// The root of the node's tree.
    var root: TaskNode {
        var node = self
        while let parent = node.parent { node = parent }
        return node
    }

    /// Whether this node or an ancestor is paused, or its root waits for a slot: its code waits at its next report.
    var isEffectivelyPaused: Bool {
        var node: TaskNode? = self
        while let current = node {
            if current.record.status == .paused || current.waitsForSlot { return true }
            node = current.parent
        }
        return false
    }

    /// The reason this node's code is being stopped: its own, else its nearest ancestor's, and whether it is its own.
    var effectiveStop: (reason: StopReason, own: Bool)? {
        if let stopReason { return (stopReason, true) }
        var node = parent
        while let current = node {
            if let reason = current.stopReason { return (reason, false) }
            node = current.parent
        }
        return nil
    }

    /// This node and every node below it, depth first.
    var subtree: [TaskNode] {
        var nodes: [TaskNode] = []
        var stack = [self]
        while let next = stack.popLast() {
            nodes.append(next)
            stack.append(contentsOf: next.children.reversed())
        }
        return nodes
    }
}
