import Foundation
import Synchronization

// Child jobs and durable waits on the graph: placing and creating children, awaiting them, signals.

/// What awaiting child jobs does: return how they ended, or stop the root to wait.
enum ChildWaitDecision {
    case done([ChildJobOutcome])
    case wait(Cancellation)
}

/// What starting child jobs did: their references, the sequence that commits them, and the failed or cancelled
/// children found again (their parent runs again) to run again.
struct ChildJobsStarted {
    var references: [ChildJobReference]
    var sequence: Int64
    var restarts: [String]
}

extension GraphState {
    /// Where a child job goes under its starting node: the occurrence of its name it takes, and the link found there
    /// again (a parent that runs again), if any.
    struct ChildSlot: Equatable {
        var occurrence: Int
        var existing: NodeHandle?
    }

    /// Places child jobs of these names under the node: each takes the next occurrence of its name there.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)``; ``ProgressionError/notResumable(taskID:reason:)`` in a
    ///   closure task.
    mutating func placeChildJobs(under handle: NodeHandle, names: [String]) throws(ProgressionError) -> [ChildSlot] {
        guard let node = nodes[handle], !node.removed else { throw .notFound(taskID: "#\(handle)") }
        try Self.checkJob(node.root, doing: "start child jobs")
        return names.map { name in
            let occurrence = node.nameCounts[name, default: 0]
            node.nameCounts[name] = occurrence + 1
            let existing = node.childIndex[name]?[occurrence]
            return ChildSlot(occurrence: occurrence, existing: existing?.isLink == true ? existing?.handle : nil)
        }
    }

    /// The child jobs of links found again by ``placeChildJobs(under:names:)`` that an earlier attempt of their root
    /// started.
    func childrenOfEarlierAttempts(_ slots: [ChildSlot]) -> [String] {
        slots.compactMap { slot in
            guard let link = slot.existing.flatMap({ nodes[$0] }), link.record.attempt < link.root.record.attempt
            else { return nil }
            return link.record.childJobID
        }
    }

    /// Throws unless `root` is a job's, whose code any worker can run again.
    static func checkJob(_ root: TaskNode, doing what: String) throws(ProgressionError) {
        guard root.record.kind != nil, root.body != nil else {
            throw .notResumable(
                taskID: root.record.id,
                reason: "it is a closure task, whose code no other process has; only a job (a registered kind) can "
                    + "\(what), since any worker may have to run its code again")
        }
    }

    /// Creates the children placed by ``placeChildJobs(under:names:)`` (`nil` slots, with ids from `identifiers`) and
    /// counts every one in the node's progress. A child found again that failed or was cancelled is run again (a
    /// retried parent redoes only those): its link starts over here, and its id is returned to be retried in the store.
    mutating func createChildJobs(
        under handle: NodeHandle, _ requests: [ChildJobRequest], slots: [ChildSlot], identifiers: Range<Int64>,
        kindOptions: [String: TaskOptions], earlierChildren: [String: TaskRecord], now: Date
    ) throws(ProgressionError) -> ChildJobsStarted {
        guard let node = nodes[handle], !node.removed else { throw .notFound(taskID: "#\(handle)") }
        let root = node.root
        var references: [ChildJobReference] = []
        var restarts: [String] = []
        var next = identifiers.lowerBound
        for (request, slot) in zip(requests, slots) {
            if let existing = slot.existing, let link = nodes[existing], let childID = link.record.childJobID {
                references.append(ChildJobReference(id: childID, name: link.record.name))
                let status = earlierChildren[childID]?.status ?? link.record.status
                // A child that failed or was cancelled in an earlier attempt of the parent runs again in this one.
                if status == .failed || status == .cancelled, link.record.attempt < root.record.attempt {
                    restarts.append(childID)
                    link.childAttemptFloor = (earlierChildren[childID]?.attempt ?? link.childAttemptFloor) + 1
                    let before = link.record
                    link.record.attempt = root.record.attempt
                    link.record.status = .pending
                    link.record.finishedAt = nil
                    link.record.errorType = nil
                    link.record.errorDescription = nil
                    link.record.result = nil
                    link.record.rate = nil
                    link.record.updatedAt = now
                    markDirty(link, TaskColumns.changed(from: before, to: link.record))
                    link.committed = CommittedState(link.record, sequence: changeSequence)
                }
                join(link, parent: node, weight: request.weight, contribution: Self.value(of: link), now: now)
                if link.record.status == .completed { bank(link, completed: true, now: now) }
                continue
            }
            let childID = TaskIdentifier.root(next)
            next += 1
            root.childCount += 1
            var options = node.record.options
            options.timeout = nil
            options.retryPolicy = nil
            let link = TaskRecord(
                id: TaskIdentifier.child(of: root.record.id, number: root.childCount), parentID: node.record.id,
                rootID: root.record.id, name: request.name, occurrence: slot.occurrence, options: options,
                status: .pending, weight: request.weight, attempt: root.record.attempt, priority: node.record.priority,
                createdAt: now, childJobID: childID)
            var childOptions = request.options ?? kindOptions[request.kind] ?? TaskOptions.default
            if request.options == nil, kindOptions[request.kind] == nil {
                // A kind this executor does not know: the worker that runs it fills in its registered options.
                childOptions.givenFields = []
            }
            if let priority = request.priority { childOptions.priority = priority }
            let child = TaskRecord(
                id: childID, name: request.name, kind: request.kind, input: request.input, options: childOptions,
                status: .pending, priority: request.priority ?? node.record.priority, createdAt: now,
                parentJobID: root.record.id)
            let linkNode = addChild(link, to: node)
            markDirty(linkNode, .all)
            join(linkNode, parent: node, weight: request.weight, contribution: 0, now: now)
            newChildJobs.append(child)
            append(
                TaskEvent(taskID: childID, rootID: childID, kind: .created, at: now, attempt: 1, message: request.name))
            references.append(ChildJobReference(id: childID, name: request.name))
        }
        return ChildJobsStarted(references: references, sequence: changeSequence, restarts: restarts)
    }

    /// What a link contributes to its parent: 1 once its child completed, else the child's progress.
    static func value(of link: TaskNode) -> Double {
        link.record.status == .completed ? 1 : min(1, link.record.progress ?? 0)
    }

    /// Checks that each id is a child job of the root of `handle`.
    ///
    /// - Throws: ``ProgressionError/notAChildJob(taskID:jobID:)`` for an id that is not a child of this job.
    func checkChildren(_ ids: [String], under handle: NodeHandle) throws(ProgressionError) {
        guard let node = nodes[handle], !node.removed else { throw .notFound(taskID: "#\(handle)") }
        let root = node.root
        for id in ids where root.links[id].flatMap({ nodes[$0] }) == nil {
            throw .notAChildJob(taskID: root.record.id, jobID: id)
        }
    }

    /// Takes the state of child jobs from their rows into their links here (as the tree keeper does in the store),
    /// and carries their progress and ends into their parents.
    mutating func applyChildRows(_ rows: [TaskRecord], now: Date) {
        for row in rows {
            guard let rootID = row.parentJobID, let root = node(id: rootID), root.isRoot,
                let link = root.links[row.id].flatMap({ nodes[$0] }), !link.removed
            else { continue }
            // A row of the child's attempt before the one this executor started it again for (read before the retry).
            guard row.attempt >= link.childAttemptFloor else { continue }
            let before = link.record
            link.record.follow(child: row)
            link.record.updatedAt = max(link.record.updatedAt, row.updatedAt)
            guard link.record != before else { continue }
            link.committed = CommittedState(link.record, sequence: link.committed.sequence)
            link.progress.floor = row.progress
            touch(link)
            guard let parent = link.parent else { continue }
            if link.record.status.isFinished {
                if !before.status.isFinished || link.progress.link != .none {
                    bank(link, completed: link.record.status == .completed, now: now)
                }
                continue
            }
            guard Self.moveContribution(of: link, to: Self.value(of: link), in: parent) else { continue }
            recompute(parent, now: now)
        }
    }

    /// The child jobs of running roots here that have not finished as far as their links know (at most `limit`).
    func unfinishedChildIDs(limit: Int) -> [String] {
        var ids: [String] = []
        for root in roots where root.phase == .running && !root.links.isEmpty {
            for (childID, handle) in root.links {
                guard let link = nodes[handle], !link.record.status.isFinished else { continue }
                ids.append(childID)
                if ids.count >= limit { return ids }
            }
        }
        return ids
    }

    /// Decides an await of child jobs: how they ended when enough have finished, else the root's stop to wait for
    /// them, with what it waits for marked on their links and each unfinished link's share of the root's progress.
    mutating func awaitChildren(
        _ ids: [String], under handle: NodeHandle, all: Bool, now: Date
    ) throws(ProgressionError) -> ChildWaitDecision {
        guard let node = nodes[handle], !node.removed else { throw .notFound(taskID: "#\(handle)") }
        let root = node.root
        var finished: [ChildJobOutcome] = []
        var waiting: [TaskNode] = []
        for id in ids {
            guard let link = root.links[id].flatMap({ nodes[$0] }) else {
                throw .notAChildJob(taskID: root.record.id, jobID: id)
            }
            let record = link.record
            if record.status.isFinished {
                finished.append(
                    ChildJobOutcome(
                        id: id, name: record.name, status: record.status, result: record.result,
                        errorDescription: record.errorDescription, finishedAt: record.finishedAt))
            } else {
                waiting.append(link)
            }
        }
        if all ? waiting.isEmpty : !finished.isEmpty { return .done(finished) }
        try Self.checkJob(root, doing: "wait for its child jobs")
        // Written even where memory says so already: the tree keeper clears the flag of a child that finishes, and
        // one that finished since this executor last read its link must be seen as awaited (and finished) by the
        // recount that this wait queues, or nothing would release it.
        for link in waiting {
            link.record.awaited = true
            markDirty(link, .link)
        }
        // A child awaited before (and finished since) is not awaited now: one left marked would release this wait at once.
        let awaitedNow = Set(waiting.map(\.handle))
        for handle in root.links.values where !awaitedNow.contains(handle) {
            guard let link = nodes[handle], link.record.awaited else { continue }
            link.record.awaited = false
            markDirty(link, .link)
        }
        shareRootProgress(root)
        let count = Set(ids).count
        let description = all ? (count == 1 ? "1 child job" : "\(count) child jobs") : "the first of \(count) child jobs"
        let reason = StopReason.awaiting(
            .children(all: all), description: description, until: JobWait.untilReleased,
            progress: root.progress.computed)
        return .wait(ExecutionEngine.stop(root, reason))
    }

    /// Gives each unfinished link of the root's tree its share of the root's progress: what one unit of its child's
    /// progress adds to the root, through the progress rule of each node between them (a declared total's
    /// weight / total, a step group's span × weight / its weight), so that the tree keeper moves the root's progress
    /// while it waits, without its executor.
    mutating func shareRootProgress(_ root: TaskNode) {
        for handle in root.links.values {
            guard let link = nodes[handle], !link.record.status.isFinished else { continue }
            var share = 1.0
            var current = link
            while let parent = current.parent, share > 0 {
                switch current.progress.link {
                case .units:
                    share *= parent.progress.total.map { current.record.weight / $0 } ?? 0
                case .segment(let segment) where segment == parent.progress.segment && parent.progress.segmentWeight > 0:
                    share *= parent.progress.span * current.record.weight / parent.progress.segmentWeight
                default:
                    share = 0
                }
                if parent.record.status.isFinished { share = 0 }
                current = parent
            }
            let value: Double? = share > 0 && share.isFinite ? share : nil
            if link.record.share != value {
                link.record.share = value
                markDirty(link, .link)
            }
        }
    }

    /// The step of a signal wait: how it ended in an earlier run, or what to look for now.
    enum SignalStep {
        struct Look {
            var step: NodeHandle
            var stepID: String
            var rootID: String
            /// The sequence that commits a new step (taken only once it is stored).
            var sequence: Int64?
        }

        case received(Data?)
        case timedOut
        case look(Look)
    }

    /// Finds (or creates) the step of a signal wait of `name` under the node.
    mutating func signalStep(
        under handle: NodeHandle, name: String, deadline: Date?, now: Date
    ) throws(ProgressionError) -> SignalStep {
        guard let node = nodes[handle], !node.removed else { throw .notFound(taskID: "#\(handle)") }
        let root = node.root
        try Self.checkJob(root, doing: "wait for a signal")
        let stepName = "signal " + name
        let occurrence = node.nameCounts[stepName, default: 0]
        node.nameCounts[stepName] = occurrence + 1
        if let existing = node.childIndex[stepName]?[occurrence] {
            if existing.record.status == .completed { return .received(existing.record.result) }
            if existing.record.status.isFinished, existing.record.nextAttemptAt != deadline {
                // It timed out or was cancelled in an earlier run, and the job runs again (a retry): it waits anew.
                existing.record.nextAttemptAt = deadline
                markDirty(existing, .nextAttemptAt)
                return .look(
                    .init(step: existing.handle, stepID: existing.record.id, rootID: root.record.id, sequence: changeSequence))
            }
            return .look(.init(step: existing.handle, stepID: existing.record.id, rootID: root.record.id))
        }
        root.childCount += 1
        let record = TaskRecord(
            id: TaskIdentifier.child(of: root.record.id, number: root.childCount), parentID: node.record.id,
            rootID: root.record.id, name: stepName, occurrence: occurrence, options: node.record.options,
            status: .pending, step: "waiting for the signal '\(name)'", priority: node.record.priority,
            createdAt: now, nextAttemptAt: deadline)
        let step = addChild(record, to: node)
        markDirty(step, .all)
        return .look(.init(step: step.handle, stepID: record.id, rootID: root.record.id, sequence: changeSequence))
    }

    /// How a signal step ended now.
    enum SignalStepEnd {
        case received(Int64, Data?)
        case timedOut(Int64)
        case wait(Cancellation)
    }

    /// Ends a signal step: it received `taken`, or its deadline passed (it fails), or its root stops to wait.
    mutating func endSignalStep(
        _ handle: NodeHandle, name: String, taken: JobSignalRecord?, now: Date
    ) throws(ProgressionError) -> SignalStepEnd {
        guard let step = nodes[handle], !step.removed else { throw .notFound(taskID: "#\(handle)") }
        func run() throws(ProgressionError) {
            guard step.record.status != .running else { return }
            let fresh = step.record.status == .pending && step.record.startedAt == nil
            try transition(step, fresh ? .start : .rerun, by: .system, now: now)
        }
        if let taken {
            try run()
            step.record.nextAttemptAt = nil
            markDirty(step, .nextAttemptAt)
            return .received(try transition(step, .complete(result: taken.payload), by: .system, now: now), taken.payload)
        }
        if let deadline = step.record.nextAttemptAt, deadline <= now {
            try run()
            let error = SignalTimeoutError(
                name: name, timeout: .milliseconds(deadline.storedMilliseconds - step.record.createdAt.storedMilliseconds))
            return .timedOut(try transition(step, .fail(TaskFailure(error)), by: .system, now: now))
        }
        let root = step.root
        let reason = StopReason.awaiting(
            .signal(name), description: "the signal '\(name)'",
            until: step.record.nextAttemptAt ?? JobWait.untilReleased, progress: root.progress.computed)
        return .wait(ExecutionEngine.stop(root, reason))
    }
}
