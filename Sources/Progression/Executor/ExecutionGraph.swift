import Foundation
import Synchronization

/// A node's handle: an integer that stands for a node in memory, cheaper to look up than its id.
typealias NodeHandle = Int

/// Why a node's code is being stopped.
enum StopReason: Sendable {
    case cancelled
    case timedOut(Duration)
    /// The executor is shutting down: leave the task resumable (`pending`).
    case shutdown
    /// Another owner holds the task now.
    case leaseLost
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
    var sequence: Int64

    init(_ record: TaskRecord, sequence: Int64) {
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

/// One task in memory. Only touched under the graph's lock.
final class Node {
    enum Dirty: Comparable { case clean, progress, full }

    let handle: NodeHandle
    var record: TaskRecord
    /// The transition state snapshots show: the last one committed.
    var committed: CommittedState
    /// The latest transition waiting for its commit; promoted to `committed` by the writer.
    var staged: CommittedState?
    weak var parent: Node?
    var children: [Node] = []
    /// Children by name and occurrence, to find a step again when its parent runs again.
    var childIndex: [String: [Int: Node]] = [:]
    /// Occurrences of each child name pushed in the current run.
    var nameCounts: [String: Int] = [:]

    // Progress aggregation (see ``ExecutionGraph`` for the rule).
    var ownFraction: Double?
    var span: Double = 1
    var segment = 0
    /// The parent's segment this node is counted in; -1: not counted.
    var parentSegment = -1
    var segmentWeight: Double = 0
    var segmentDone: Double = 0
    /// What the node contributes to its parent's segment (its displayed progress, 1 once finished).
    var contribution: Double = 0

    // Control.
    var pausedExplicitly = false
    var pausedAncestors = 0
    var pauseWaiters: [Int: CheckedContinuation<Void, any Error>] = [:]
    var isExecuting = false
    var cancelHandle: (@Sendable () -> Void)?
    var stopReason: StopReason?
    var pausedSince: ContinuousClock.Instant?
    var pausedTotal: Duration = .zero
    var runStartedAt: ContinuousClock.Instant?

    // Persistence.
    var dirty = Dirty.clean
    /// Whether the node's row exists in the store (then changes are narrow updates, not inserts).
    var stored: Bool
    /// A root whose row is not committed yet: not shown on the progress stream.
    var hidden = false
    /// Its insert found the identity taken (a duplicate id or idempotency key).
    var conflicted = false
    var lastSampleAt: Date?
    var removed = false

    init(handle: NodeHandle, record: TaskRecord, sequence: Int64, stored: Bool = true) {
        self.handle = handle
        self.record = record
        self.stored = stored
        committed = CommittedState(record, sequence: sequence)
    }

    var isPaused: Bool { pausedExplicitly || pausedAncestors > 0 }
}

/// The executor's tasks in memory: every node, its progress, its pause state, what the writer has to store, and who
/// waits for a commit.
///
/// All state sits behind one mutex, held for a few hundred nanoseconds per operation: a `report` changes its node, walks
/// up its ancestors and marks them dirty; it never waits for the disk and costs the same however many tasks run.
///
/// ## How a parent's progress is computed
///
/// A task's progress is its own reported fraction plus what its current children have done of the share reserved
/// for them:
///
///     progress = own + span × Σ(weightᵢ × progressᵢ) / Σ weightᵢ
///
/// - `own` is the task's last `.progress(x)` (or `n/m` for `.step(n, of: m)`), 0 if it reported none.
/// - `span`, the share reserved for children, is `1/m` after `.step(n, of: m)` (the step under way), else `1 − own`.
/// - The children counted are those pushed since the task's last own report; a finished child counts as 1.
/// - The result never moves backwards while the task runs: a new sibling joining a group lowers the average, so the
///   shown value holds until the work catches up. A task that completes shows 1.
///
/// Example: a task reports `.step(1, of: 4)` (0.25), then pushes children A (weight 1) and B (weight 3) at once. With
/// A at 100% and B at 50%, the task shows 0.25 + 0.25 × (1×1 + 3×0.5) / 4 = 0.40625.
final class ExecutionGraph: Sendable {
    struct State {
        var nextHandle = 1
        var nodes: [NodeHandle: Node] = [:]
        var handles: [String: NodeHandle] = [:]
        var roots: [Node] = []
        var dirtyNodes: [Node] = []
        var stagedNodes: [Node] = []
        var events: [TaskEvent] = []
        var changeSequence: Int64 = 0
        var committedSequence: Int64 = 0
        var commitWaiters: [(sequence: Int64, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextWaiterToken = 0
        var version: Int64 = 0
        var publishedVersion: Int64 = -1
        /// When the writer last took a batch (or found nothing to take): a report yields when the writer is behind.
        var lastBatchAt = Date()
        /// Someone waits for a commit: the writer skips its batching window.
        var urgent = false
        var windowWaiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())
    /// Wakes the writer.
    private let writerWake: AsyncStream<Void>.Continuation
    let writerSignals: AsyncStream<Void>
    /// Wakes the publisher when something visible changed.
    private let publisherWake: AsyncStream<Void>.Continuation
    let publisherSignals: AsyncStream<Void>
    /// Reports wait for the writer when this many events are queued.
    let eventBacklogLimit: Int
    /// A report yields its thread when the writer has not taken a batch for this long (seconds): task code that
    /// reports in a tight loop on every thread of Swift's cooperative pool would otherwise keep the writer from
    /// running.
    let writerLagTolerance: TimeInterval

    init(eventBacklogLimit: Int = 100_000, writerLagTolerance: TimeInterval = 0.05) {
        self.writerLagTolerance = writerLagTolerance
        (writerSignals, writerWake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        (publisherSignals, publisherWake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.eventBacklogLimit = eventBacklogLimit
    }

    func close() {
        writerWake.finish()
        publisherWake.finish()
        let waiters = state.withLock { state in
            defer { state.commitWaiters.removeAll() }
            return state.commitWaiters
        }
        for waiter in waiters { waiter.continuation.resume(throwing: ProgressionError.shutDown) }
    }

    // MARK: Nodes

    /// Adds a new root whose row the writer inserts with its next batch (together with other new roots and
    /// transitions: one commit for many). Returns the sequence to wait for; the root shows on the progress stream once
    /// its row is committed, and ``didConflict(_:)`` then tells whether its identity was taken.
    func addNewRoot(_ record: TaskRecord, event: TaskEvent) -> (NodeHandle, Int64) {
        let result = state.withLock { state -> (NodeHandle, Int64) in
            let node = Node(handle: state.nextHandle, record: record, sequence: state.changeSequence, stored: false)
            state.nextHandle += 1
            node.hidden = true
            state.nodes[node.handle] = node
            state.handles[record.id] = node.handle
            state.roots.append(node)
            state.events.append(event)
            Self.markDirty(node, .full, state: &state)
            Self.stage(node, state: &state)
            return (node.handle, state.changeSequence)
        }
        wakeWriter(urgent: true)
        return result
    }

    /// Whether a new root's insert found its identity taken.
    func didConflict(_ handle: NodeHandle) -> Bool {
        state.withLock { $0.nodes[handle]?.conflicted ?? false }
    }

    /// Called by the writer: these new rows were not inserted, their identity exists already. Returns the ids of the
    /// children among them (a root's caller learns of it through ``didConflict(_:)``).
    func insertsConflicted(_ ids: [String]) -> [String] {
        state.withLock { state in
            var children: [String] = []
            for id in ids {
                guard let node = state.handles[id].flatMap({ state.nodes[$0] }) else { continue }
                node.conflicted = true
                if node.parent != nil { children.append(id) }
            }
            return children
        }
    }

    /// Adds a root whose row is committed already.
    func addRoot(_ record: TaskRecord) -> NodeHandle {
        let handle = state.withLock { state in
            let node = Node(handle: state.nextHandle, record: record, sequence: state.changeSequence)
            state.nextHandle += 1
            state.nodes[node.handle] = node
            state.handles[record.id] = node.handle
            state.roots.append(node)
            state.version += 1
            return node.handle
        }
        publisherWake.yield()
        return handle
    }

    /// Adds the nodes of a stored tree below a root added with ``addRoot(_:)`` (a task rehydrated from the store).
    /// A root stored as paused comes back paused.
    func attachStoredChildren(_ records: [TaskRecord], to root: NodeHandle) {
        state.withLock { state in
            if let node = state.nodes[root], node.record.status == .paused {
                node.pausedExplicitly = true
                node.pausedSince = ContinuousClock.now
            }
            for record in records where record.parentID != nil {
                guard let parentHandle = record.parentID.flatMap({ state.handles[$0] }),
                    let parent = state.nodes[parentHandle]
                else { continue }
                let node = Node(handle: state.nextHandle, record: record, sequence: state.changeSequence)
                state.nextHandle += 1
                node.parent = parent
                node.contribution = record.status.isFinished ? 1 : (record.progress ?? 0)
                node.parentSegment = -1
                node.pausedAncestors = parent.pausedAncestors + (parent.pausedExplicitly ? 1 : 0)
                parent.children.append(node)
                parent.childIndex[record.name, default: [:]][record.occurrence] = node
                state.nodes[node.handle] = node
                state.handles[record.id] = node.handle
            }
            if let top = state.nodes[root] {
                for node in Self.collect(top) where !node.record.status.isFinished {
                    Self.resetProgress(node)
                    Self.countKnownChildren(of: node)
                }
                for node in Self.collect(top).reversed() where !node.record.status.isFinished {
                    Self.recompute(node, state: &state)
                }
            }
            state.version += 1
        }
    }

    func handle(of id: String) -> NodeHandle? {
        state.withLock { $0.handles[id] }
    }

    func record(_ handle: NodeHandle) -> TaskRecord? {
        state.withLock { $0.nodes[handle]?.record }
    }

    enum ChildStart {
        /// A new child, or one whose earlier run did not complete: run its code.
        case run(NodeHandle)
        /// A child that completed in an earlier run: return its stored result without running it.
        case completed(NodeHandle, result: Data?)
    }

    /// Creates the child `name` of `parent`, or finds it again (same name and occurrence) when the parent runs again.
    func startChild(
        of parentHandle: NodeHandle, name: String, weight: Double, options: TaskOptions?, id: () -> String, now: Date,
        canSkip: Bool
    ) throws -> ChildStart {
        let start: ChildStart = try state.withLock { state in
            guard let parent = state.nodes[parentHandle], !parent.removed else {
                throw ProgressionError.notFound(taskID: "#\(parentHandle)")
            }
            let occurrence = parent.nameCounts[name, default: 0]
            parent.nameCounts[name] = occurrence + 1
            let node: Node
            var initialContribution = 0.0
            if let existing = parent.childIndex[name]?[occurrence] {
                node = existing
                if existing.record.status == .completed, canSkip {
                    Self.join(existing, parent: parent, contribution: 1, weight: weight, state: &state)
                    return .completed(existing.handle, result: existing.record.result)
                }
                // Ran before without completing (or its result cannot be stored): run it again, same identity, its
                // own completed children counted as done from the start.
                let previous = node.contribution
                Self.prepareRerun(node)
                Self.countKnownChildren(of: node)
                node.contribution = previous
                if node.segmentWeight > 0 { node.record.progress = node.segmentDone / node.segmentWeight }
                initialContribution = node.record.progress ?? 0
            } else {
                // By default a child takes its parent's cancel, pause and retry rights; the parent's timeout already
                // covers the subtree, and automatic retries are for roots.
                var options = options ?? parent.record.options.with { $0.timeout = nil }
                options.retryPolicy = nil
                let record = TaskRecord(
                    id: id(), parentID: parent.record.id, rootID: parent.record.rootID, name: name,
                    occurrence: occurrence, options: options, status: .pending, weight: weight,
                    ownerID: parent.record.ownerID, priority: parent.record.priority, createdAt: now)
                node = Node(handle: state.nextHandle, record: record, sequence: state.changeSequence, stored: false)
                state.nextHandle += 1
                node.parent = parent
                parent.children.append(node)
                parent.childIndex[name, default: [:]][occurrence] = node
                state.nodes[node.handle] = node
                state.handles[record.id] = node.handle
            }
            node.pausedAncestors = parent.pausedAncestors + (parent.pausedExplicitly ? 1 : 0)
            Self.join(node, parent: parent, contribution: initialContribution, weight: weight, state: &state)
            Self.markDirty(node, .full, state: &state)
            state.version += 1
            return .run(node.handle)
        }
        wakeWriter(urgent: false)
        return start
    }

    /// A child whose stored result cannot be used runs again.
    func restartChild(_ handle: NodeHandle) {
        state.withLock { state in
            guard let node = state.nodes[handle], let parent = node.parent else { return }
            if node.parentSegment == parent.segment {
                parent.segmentDone -= node.record.weight * node.contribution
            }
            Self.prepareRerun(node)
            node.contribution = 0
            Self.markDirty(node, .full, state: &state)
        }
    }

    private static func prepareRerun(_ node: Node) {
        node.record.attempt += node.record.startedAt == nil ? 0 : 1
        node.record.status = .pending
        node.record.step = nil
        node.record.errorType = nil
        node.record.errorDescription = nil
        node.record.finishedAt = nil
        node.record.result = nil
        node.stopReason = nil
        node.nameCounts = [:]
        resetProgress(node)
    }

    /// Counts a child in its parent's current segment.
    /// Counts a child in its parent's current segment; a child counted already (a known child of a re-run, see
    /// ``countKnownChildren(of:)``) has its share updated instead of added again.
    private static func join(_ node: Node, parent: Node, contribution: Double, weight: Double, state: inout State) {
        if node.parentSegment == parent.segment {
            parent.segmentWeight += weight - node.record.weight
            parent.segmentDone += weight * contribution - node.record.weight * node.contribution
        } else {
            parent.segmentWeight += weight
            parent.segmentDone += weight * contribution
        }
        node.parentSegment = parent.segment
        node.contribution = contribution
        node.record.weight = weight
        recompute(parent, state: &state)
    }

    /// When a task runs again (after a crash, or on retry), its children from the earlier run are counted in its
    /// progress at once — completed ones as done, the others as not started — so that completed steps found again
    /// first do not show the task finished before the rest has even started.
    private static func countKnownChildren(of node: Node) {
        for child in node.children {
            let contribution: Double = child.record.status == .completed ? 1 : 0
            child.parentSegment = node.segment
            child.contribution = contribution
            node.segmentWeight += child.record.weight
            node.segmentDone += child.record.weight * contribution
        }
    }

    private static func resetProgress(_ node: Node) {
        node.ownFraction = nil
        node.span = 1
        node.segment += 1
        node.segmentWeight = 0
        node.segmentDone = 0
        node.contribution = 0
        node.record.progress = nil
    }

    // MARK: Reporting

    /// Applies a validated report. Returns whether the task must wait (it or an ancestor is paused) and whether the
    /// writer is far behind.
    func report(_ handle: NodeHandle, _ progress: TaskProgress, now: Date) -> (
        paused: Bool, backlogged: Bool, writerBehind: Bool
    ) {
        let outcome: (paused: Bool, backlogged: Bool, wake: Bool, writerBehind: Bool) = state.withLock { state in
            guard let node = state.nodes[handle], !node.removed else { return (false, false, false, false) }
            // The writer sleeps while nothing is dirty: wake it when this report makes the first change.
            let wasIdle = state.dirtyNodes.isEmpty && state.events.isEmpty
            if let name = progress.name, name != node.record.step {
                node.record.step = name
                state.events.append(
                    TaskEvent(
                        taskID: node.record.id, rootID: node.record.rootID, kind: .step, at: now,
                        attempt: node.record.attempt, progress: node.record.progress, message: name))
            }
            if let fraction = progress.fraction {
                node.ownFraction = fraction
                node.span = progress.stepCount.map { 1 / Double($0) } ?? (1 - fraction)
                node.segment += 1
                node.segmentWeight = 0
                node.segmentDone = 0
                Self.recompute(node, state: &state)
            }
            node.record.updatedAt = now
            Self.markDirty(node, .progress, state: &state)
            let writerBehind = now.timeIntervalSince(state.lastBatchAt) > writerLagTolerance
            return (node.isPaused, state.events.count >= eventBacklogLimit, wasIdle, writerBehind)
        }
        if outcome.wake { wakeWriter(urgent: false) }
        return (outcome.paused, outcome.backlogged, outcome.writerBehind)
    }

    /// Recomputes a node's progress from its own fraction and its segment's children, and carries the change up.
    private static func recompute(_ node: Node, state: inout State) {
        let own = node.ownFraction ?? 0
        let children = node.segmentWeight > 0 ? node.segmentDone / node.segmentWeight : 0
        let hasValue = node.ownFraction != nil || node.segmentWeight > 0
        let computed = min(1, own + (node.segmentWeight > 0 ? node.span * children : 0))
        let current = node.record.progress
        let next: Double? = hasValue ? max(current ?? 0, computed) : current
        guard next != current else { return }
        node.record.progress = next
        markDirty(node, .progress, state: &state)
        guard let parent = node.parent, node.parentSegment == parent.segment else { return }
        let contribution = next ?? 0
        parent.segmentDone += node.record.weight * (contribution - node.contribution)
        node.contribution = contribution
        recompute(parent, state: &state)
    }

    private static func markDirty(_ node: Node, _ level: Node.Dirty, state: inout State) {
        if node.dirty == .clean { state.dirtyNodes.append(node) }
        if level > node.dirty { node.dirty = level }
        state.changeSequence += 1
        state.version += 1
    }

    // MARK: Transitions

    /// Changes a node's record as a transition (written whole, with `event`), and returns the sequence to wait for.
    @discardableResult
    func transition(
        _ handle: NodeHandle, event: TaskEvent.Kind?, message: String? = nil, errorType: String? = nil, now: Date,
        _ change: (Node) -> Void
    ) -> Int64? {
        let sequence: Int64? = state.withLock { state in
            guard let node = state.nodes[handle], !node.removed else { return nil }
            change(node)
            node.record.updatedAt = now
            if node.record.status.isFinished {
                if node.record.status == .completed { Self.finishProgress(node, state: &state) }
                Self.finishContribution(node, state: &state)
            }
            if let event {
                state.events.append(
                    TaskEvent(
                        taskID: node.record.id, rootID: node.record.rootID, kind: event, at: now,
                        attempt: node.record.attempt, progress: node.record.progress, message: message,
                        errorType: errorType))
            }
            Self.markDirty(node, .full, state: &state)
            Self.stage(node, state: &state)
            return state.changeSequence
        }
        wakeWriter(urgent: true)
        return sequence
    }

    /// Keeps a transition's state to show once it is committed.
    private static func stage(_ node: Node, state: inout State) {
        if node.staged == nil { state.stagedNodes.append(node) }
        node.staged = CommittedState(node.record, sequence: state.changeSequence)
    }

    private static func finishProgress(_ node: Node, state: inout State) {
        node.ownFraction = 1
        node.span = 0
        recompute(node, state: &state)
    }

    /// A finished child counts as done in its parent's segment.
    private static func finishContribution(_ node: Node, state: inout State) {
        guard let parent = node.parent, node.parentSegment == parent.segment, node.contribution < 1 else { return }
        parent.segmentDone += node.record.weight * (1 - node.contribution)
        node.contribution = 1
        recompute(parent, state: &state)
    }

    /// Resets a root's progress for a new attempt.
    func resetForNewAttempt(_ handle: NodeHandle) {
        state.withLock { state in
            guard let node = state.nodes[handle] else { return }
            Self.resetProgress(node)
            Self.countKnownChildren(of: node)
            Self.recompute(node, state: &state)
            node.nameCounts = [:]
            node.stopReason = nil
            node.pausedTotal = .zero
            Self.markDirty(node, .progress, state: &state)
        }
    }

    /// Wakes the publisher (after a change of progress that needs no commit).
    func publishSoon() {
        publisherWake.yield()
    }

    // MARK: Pause

    /// Pauses or resumes a node and its subtree. Returns the handles whose status changed, with their new status.
    @discardableResult
    func setPaused(_ handle: NodeHandle, _ paused: Bool, now: Date) -> [(NodeHandle, TaskStatus)] {
        let (changed, toWake) = state.withLock { state -> ([(NodeHandle, TaskStatus)], [CheckedContinuation<Void, any Error>]) in
            guard let top = state.nodes[handle], top.pausedExplicitly != paused else { return ([], []) }
            let clock = ContinuousClock.now
            var changed: [(NodeHandle, TaskStatus)] = []
            var toWake: [CheckedContinuation<Void, any Error>] = []
            let wasPaused = Self.collect(top).map { ($0, $0.isPaused) }
            top.pausedExplicitly = paused
            for child in Self.collect(top).dropFirst() { child.pausedAncestors += paused ? 1 : -1 }
            for (node, before) in wasPaused where before != node.isPaused {
                if node.isPaused {
                    node.pausedSince = clock
                } else {
                    if let since = node.pausedSince { node.pausedTotal += clock - since }
                    node.pausedSince = nil
                    toWake += node.pauseWaiters.values
                    node.pauseWaiters.removeAll()
                }
                let status = node.record.status
                guard !status.isFinished else { continue }
                let next: TaskStatus = node.isPaused ? .paused : (node.isExecuting ? .running : .pending)
                guard next != status else { continue }
                node.record.status = next
                node.record.updatedAt = now
                state.events.append(
                    TaskEvent(
                        taskID: node.record.id, rootID: node.record.rootID, kind: node.isPaused ? .paused : .resumed,
                        at: now, attempt: node.record.attempt, progress: node.record.progress))
                Self.markDirty(node, .full, state: &state)
                Self.stage(node, state: &state)
                changed.append((node.handle, next))
            }
            return (changed, toWake)
        }
        for continuation in toWake { continuation.resume() }
        if !changed.isEmpty { wakeWriter(urgent: true) }
        return changed
    }

    /// Whether the node itself was paused (not only through an ancestor).
    func isPausedExplicitly(_ handle: NodeHandle) -> Bool {
        state.withLock { $0.nodes[handle]?.pausedExplicitly ?? false }
    }

    func isPaused(_ handle: NodeHandle) -> Bool {
        state.withLock { $0.nodes[handle]?.isPaused ?? false }
    }

    /// Suspends while the node or an ancestor is paused. Cancelling the waiting task wakes it with
    /// `CancellationError`.
    func waitWhilePaused(_ handle: NodeHandle) async throws {
        while isPaused(handle) {
            let token = state.withLock { state -> Int in
                state.nextWaiterToken += 1
                return state.nextWaiterToken
            }
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let immediate: Result<Void, any Error>? = state.withLock { state in
                        guard let node = state.nodes[handle], node.isPaused, !node.removed else { return .success(()) }
                        if Task.isCancelled { return .failure(CancellationError()) }
                        node.pauseWaiters[token] = continuation
                        return nil
                    }
                    if let immediate { continuation.resume(with: immediate) }
                }
            } onCancel: {
                let continuation = state.withLock { $0.nodes[handle]?.pauseWaiters.removeValue(forKey: token) }
                continuation?.resume(throwing: CancellationError())
            }
        }
    }

    /// The time a node has run, paused time not counted.
    func activeTime(_ handle: NodeHandle) -> Duration? {
        state.withLock { state in
            guard let node = state.nodes[handle], let start = node.runStartedAt else { return nil }
            let end = node.pausedSince ?? ContinuousClock.now
            return end - start - node.pausedTotal
        }
    }

    // MARK: Writer

    /// Takes what the writer has to store: whole records of nodes that went through a transition, progress of the
    /// others, and the queued events; progress samples for history at most every `sampleInterval`.
    func takeBatch(now: Date, sampleInterval: TimeInterval, owner: String?) -> (TaskBatch, Int64)? {
        state.withLock { state in
            state.lastBatchAt = now
            guard !state.dirtyNodes.isEmpty || !state.events.isEmpty else {
                state.committedSequence = max(state.committedSequence, state.changeSequence)
                return nil
            }
            var batch = TaskBatch(owner: owner)
            batch.records.reserveCapacity(state.dirtyNodes.count)
            for node in state.dirtyNodes {
                defer { node.dirty = .clean }
                guard !node.removed else { continue }
                if !node.stored {
                    batch.inserts.append(node.record)
                    node.stored = true
                } else if node.dirty == .full {
                    batch.updates.append(node.record)
                } else {
                    batch.progress.append(
                        TaskProgressRecord(
                            id: node.record.id, progress: node.record.progress, step: node.record.step,
                            updatedAt: node.record.updatedAt))
                }
                if let progress = node.record.progress, !node.record.status.isFinished,
                    now.timeIntervalSince(node.lastSampleAt ?? .distantPast) >= sampleInterval
                {
                    node.lastSampleAt = now
                    batch.events.append(
                        TaskEvent(
                            taskID: node.record.id, rootID: node.record.rootID, kind: .progress, at: now,
                            attempt: node.record.attempt, progress: progress, message: node.record.step))
                }
            }
            state.dirtyNodes.removeAll(keepingCapacity: true)
            // Transition and step events first, in the order they happened; samples after.
            batch.events = state.events + batch.events
            state.events.removeAll(keepingCapacity: true)
            return (batch, state.changeSequence)
        }
    }

    /// Called by the writer after a batch committed: wakes who waited for it.
    func committed(upTo sequence: Int64) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.committedSequence = max(state.committedSequence, sequence)
            if !state.stagedNodes.isEmpty {
                state.stagedNodes.removeAll { node in
                    guard let staged = node.staged, staged.sequence <= sequence else { return false }
                    node.committed = staged
                    node.staged = nil
                    if !node.conflicted { node.hidden = false }
                    return true
                }
                state.version += 1
            }
            var ready: [CheckedContinuation<Void, any Error>] = []
            state.commitWaiters.removeAll { waiter in
                guard waiter.sequence <= state.committedSequence else { return false }
                ready.append(waiter.continuation)
                return true
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
        publisherWake.yield()
    }

    /// Called by the writer when a batch failed: its content is queued again and the waiters learn the error.
    func failed(_ batch: TaskBatch, error: any Error) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            for record in batch.records {
                if let node = state.handles[record.id].flatMap({ state.nodes[$0] }), !node.removed {
                    if node.dirty == .clean { state.dirtyNodes.append(node) }
                    node.dirty = .full
                    node.stored = false
                }
            }
            for record in batch.inserts {
                if let node = state.handles[record.id].flatMap({ state.nodes[$0] }), !node.removed {
                    if node.dirty == .clean { state.dirtyNodes.append(node) }
                    node.dirty = .full
                    node.stored = false
                }
            }
            for record in batch.updates {
                if let node = state.handles[record.id].flatMap({ state.nodes[$0] }), !node.removed {
                    if node.dirty == .clean { state.dirtyNodes.append(node) }
                    node.dirty = .full
                }
            }
            for progress in batch.progress {
                if let node = state.handles[progress.id].flatMap({ state.nodes[$0] }), !node.removed {
                    if node.dirty == .clean { state.dirtyNodes.append(node) }
                    node.dirty = max(node.dirty, .progress)
                }
            }
            state.events = batch.events.filter { $0.kind != .progress } + state.events
            defer { state.commitWaiters.removeAll() }
            return state.commitWaiters.map(\.continuation)
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    /// Waits until everything changed so far is committed.
    func waitForCommit(_ sequence: Int64? = nil) async throws {
        let target = sequence ?? state.withLock { $0.changeSequence }
        let done = state.withLock { $0.committedSequence >= target }
        guard !done else { return }
        wakeWriter(urgent: true)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let ready = state.withLock { state -> Bool in
                if state.committedSequence >= target { return true }
                state.commitWaiters.append((target, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Wakes the writer; `urgent` (someone waits for a commit) also cuts its batching window short.
    func wakeWriter(urgent: Bool) {
        if urgent {
            let waiter = state.withLock { state in
                state.urgent = true
                defer { state.windowWaiter = nil }
                return state.windowWaiter
            }
            waiter?.resume()
        }
        writerWake.yield()
    }

    /// The writer's batching window: waits `window` for more changes to gather, unless someone waits for a commit.
    /// The timer is a dispatch timer, so the window ends on time even while task code keeps every thread of Swift's
    /// cooperative pool busy.
    func batchingWindow(_ window: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.urgent || !state.commitWaiters.isEmpty { return true }
                state.windowWaiter = continuation
                return false
            }
            if now {
                continuation.resume()
                return
            }
            let nanoseconds = window.components.seconds * 1_000_000_000 + window.components.attoseconds / 1_000_000_000
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [self] in
                let waiter = state.withLock { state in
                    defer { state.windowWaiter = nil }
                    return state.windowWaiter
                }
                waiter?.resume()
            }
        }
        state.withLock { $0.urgent = false }
    }

    var pendingWork: Bool {
        state.withLock { !$0.dirtyNodes.isEmpty || !$0.events.isEmpty || !$0.commitWaiters.isEmpty }
    }

    // MARK: Snapshots and removal

    /// The graph as published: committed transitions, live progress. `nil` when nothing changed since the last call.
    func snapshotIfChanged() -> TaskGraph? {
        state.withLock { state in
            guard state.version != state.publishedVersion else { return nil }
            state.publishedVersion = state.version
            return TaskGraph(tasks: state.roots.filter { !$0.hidden }.map(Self.snapshot))
        }
    }

    func snapshot() -> TaskGraph {
        state.withLock { TaskGraph(tasks: $0.roots.filter { !$0.hidden }.map(Self.snapshot)) }
    }

    func snapshot(of handle: NodeHandle) -> TaskSnapshot? {
        state.withLock { state in state.nodes[handle].map(Self.snapshot) }
    }

    private static func snapshot(_ node: Node) -> TaskSnapshot {
        let record = node.record
        let committed = node.committed
        return TaskSnapshot(
            id: record.id, parentID: record.parentID, name: record.name, kind: record.kind, status: committed.status,
            progress: record.progress, stepName: record.step, options: record.options, attempt: committed.attempt,
            interruptions: committed.interruptions, errorDescription: committed.errorDescription,
            errorType: committed.errorType, createdAt: record.createdAt, startedAt: committed.startedAt,
            updatedAt: record.updatedAt, finishedAt: committed.finishedAt, nextAttemptAt: committed.nextAttemptAt,
            children: node.children.map(snapshot))
    }

    /// Removes a root and its subtree from memory. Their rows stay in the store.
    @discardableResult
    func removeRoot(_ handle: NodeHandle) -> [String] {
        let ids = state.withLock { state -> [String] in
            guard let root = state.nodes[handle] else { return [] }
            let nodes = Self.collect(root)
            for node in nodes {
                node.removed = true
                state.nodes[node.handle] = nil
                state.handles[node.record.id] = nil
            }
            for node in nodes { node.children = [] }
            state.roots.removeAll { $0 === root }
            let ids = Set(nodes.map(\.record.id))
            state.events.removeAll { ids.contains($0.taskID) }
            state.version += 1
            return nodes.map(\.record.id)
        }
        publisherWake.yield()
        return ids
    }

    /// Removes from memory, in one pass, the finished roots whose committed finish is older than their visibility
    /// (`nil`: kept). Returns the handles removed. Their rows stay in the store.
    func sweepFinished(completedBefore: Date?, failedBefore: Date?) -> [NodeHandle] {
        state.withLock { state in
            var removed: [NodeHandle] = []
            var removedIDs: Set<String> = []
            state.roots.removeAll { root in
                let committed = root.committed
                guard committed.status.isFinished, let finished = committed.finishedAt, !root.isExecuting,
                    let limit = committed.status == .completed ? completedBefore : failedBefore, finished < limit
                else { return false }
                for node in Self.collect(root) {
                    node.removed = true
                    state.nodes[node.handle] = nil
                    state.handles[node.record.id] = nil
                    removedIDs.insert(node.record.id)
                    node.children = []
                }
                removed.append(root.handle)
                return true
            }
            if !removed.isEmpty {
                if !state.events.isEmpty { state.events.removeAll { removedIDs.contains($0.taskID) } }
                state.version += 1
            }
            return removed
        }
    }

    /// Roots in memory, with their status as committed.
    func roots() -> [(handle: NodeHandle, record: TaskRecord, committed: CommittedState)] {
        state.withLock { $0.roots.map { ($0.handle, $0.record, $0.committed) } }
    }

    private static func collect(_ node: Node) -> [Node] {
        var nodes: [Node] = []
        var stack = [node]
        while let next = stack.popLast() {
            nodes.append(next)
            stack.append(contentsOf: next.children.reversed())
        }
        return nodes
    }
}

// MARK: - Running state

extension ExecutionGraph {
    /// Marks a node as running its code (or not), and starts its active-time clock.
    func setExecuting(_ handle: NodeHandle, _ executing: Bool, cancel: (@Sendable () -> Void)?) {
        state.withLock { state in
            guard let node = state.nodes[handle] else { return }
            node.isExecuting = executing
            node.cancelHandle = cancel
            if executing {
                node.runStartedAt = ContinuousClock.now
                node.pausedTotal = .zero
                node.pausedSince = node.isPaused ? node.runStartedAt : nil
            }
        }
    }

    /// Asks a node's code to stop; the first reason given wins. Returns the node's cancel handle to call (outside the
    /// lock), if its code runs.
    func requestStop(_ handle: NodeHandle, _ reason: StopReason) -> (@Sendable () -> Void)? {
        state.withLock { state in
            guard let node = state.nodes[handle] else { return nil }
            if node.stopReason == nil { node.stopReason = reason }
            return node.cancelHandle
        }
    }

    /// Why the node's code was asked to stop, if it was.
    func stopReason(_ handle: NodeHandle) -> StopReason? {
        state.withLock { $0.nodes[handle]?.stopReason }
    }

    /// Clears the stop request (a new run begins).
    func clearStop(_ handle: NodeHandle) {
        state.withLock { $0.nodes[handle]?.stopReason = nil }
    }
}
