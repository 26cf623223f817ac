import Foundation

/// What the tree keeper reads in its transaction. Each store answers from its own tables (SQLite and the in-memory
/// store at once; PostgreSQL from rows it fetched, see ``JobTreeReadMiss``).
package protocol JobTreeReading {
    /// The rows of these ids that exist.
    func records(_ ids: [String]) throws -> [TaskRecord]
    /// The links (``TaskRecord/childJobID``) of these child jobs.
    func links(ofChildren ids: [String]) throws -> [TaskRecord]
    /// The links of these roots' trees.
    func links(inTreesOf roots: [String]) throws -> [TaskRecord]
    /// Each of these tasks with every node below it, the task first, then in tree order (tasks that do not exist are
    /// left out).
    func subtrees(of ids: [String]) throws -> [String: [TaskRecord]]
    /// What these jobs were submitted after.
    func dependencies(ofJobs ids: [String]) throws -> [JobDependency]
    /// The jobs submitted after these.
    func dependents(of ids: [String]) throws -> [JobDependency]
    /// The links of `root` whose child it waits for now (``TaskRecord/awaited``): their ids, and whether each has
    /// finished.
    func awaitedLinks(of root: String) throws -> [(id: String, finished: Bool)]
    /// At most `limit` ids of the links of `root` whose child it waits for now and that have not finished: while a
    /// parent waits, the keeper clears the flag of each child that finishes, so these are found without reading the
    /// links that finished (a wait for 10,000 children costs one short read per pass, not 10,000 rows).
    func unfinishedAwaitedLinks(of root: String, limit: Int) throws -> [String]
    /// Whether a signal of this name waits to be taken by the job.
    func hasSignalToTake(job: String, name: String) throws -> Bool
}

/// A read the PostgreSQL store had not fetched yet: it fetches it and plans again (planning is a pure function of
/// what it reads, so each run asks for the same reads in the same order until it has them all).
package struct JobTreeReadMiss: Error, Hashable {
    package enum Read: Hashable, Sendable {
        case records([String])
        case linksOfChildren([String])
        case linksInTrees([String])
        case subtrees([String])
        case dependencies([String])
        case dependents([String])
        case awaitedLinks(String)
        case unfinishedAwaitedLinks(String, limit: Int)
        case signal(job: String, name: String)
    }

    package var read: Read

    package init(_ read: Read) {
        self.read = read
    }
}

/// What the tree keeper writes for the changes it took: rows changed (unfenced: the keeper acts for the fleet, on
/// rows other executors hold), their events, and the work its changes queue in turn.
package struct JobTreePlan: Sendable {
    package var updates: [TaskUpdate] = []
    package var events: [TaskEvent] = []
    /// Work queued for the next pass (children of a cancelled child, say).
    package var followUps: [TreeChange] = []
    /// For each root the plan writes or copies from, the status and owner it read: a store whose reads do not lock
    /// (PostgreSQL) checks them under lock before it writes, and plans again when one moved.
    package var assumed: [String: BatchFence.Holder] = [:]

    /// As a batch with no owner (the keeper's writes are not fenced), roots first in id order, then the other rows.
    package var batch: TaskBatch {
        let ordered = updates.sorted { left, right in
            if left.record.isRoot != right.record.isRoot { return left.record.isRoot }
            return left.record.id.utf8.lexicographicallyPrecedes(right.record.id.utf8)
        }
        return TaskBatch(updates: ordered, events: events, owner: nil, treeChanges: followUps)
    }
}

/// The tree keeper's decisions, made once for every store: what a queued change of a job tree (``TreeChange``) does.
///
/// - **mirror**: a child job changed: its link in the parent's tree takes its status, progress, step, times, rate,
///   error and (once completed) result. While the parent waits for its children, its progress rises by
///   the link's ``TaskRecord/share`` of the child's progress (never above 0.999, never back), its rate follows, and a
///   finished child it awaited may let it go on (looked at as a *recount*).
/// - **recount**: a waiting job is looked at: children (all of those it awaits finished, or one of them), jobs (each
///   dependency finished; one that failed or was cancelled cancels it unless its policy says run), a signal (one waits
///   to be taken). When what it waits for has happened it is released: its wait and time are cleared, and any worker
///   claims it.
/// - **cancel-children**, **pause-children**, **resume-children**: a parent's end, pause or resume reaches its
///   unfinished children wherever they are. A child that an executor runs is taken from it (its owner cleared): that
///   executor's next write for it is refused and it stops the code, as when another owner takes a job.
/// - **dependents**: a job finished (or was removed): each job waiting for it is recounted.
package enum JobTreeKeeper {
    /// Columns of a child job that its link follows. (A link's attempt is its parent's when it started the child: a
    /// parent's new attempt runs again the children that failed or were cancelled, not those that failed in this one.)
    package static let mirrored: TaskColumns = [.status, .progress, .step, .error, .result, .startedAt, .finishedAt, .rate]

    /// Plans the changes taken from the queue.
    ///
    /// - Throws: what the reader throws (``JobTreeReadMiss`` from PostgreSQL's).
    package static func plan(_ changes: [TreeChange], reader: some JobTreeReading, now: Date) throws -> JobTreePlan {
        var planner = Planner(reader: reader, now: now)
        try planner.run(changes)
        return planner.plan
    }

    /// The time constant of a waiting parent's rate, as ``RateState``'s.
    static let rateTimeConstant = RateState.timeConstant

    /// A rate moved by `delta` of progress over `elapsed` seconds: the continuous form of ``RateState``'s average, so
    /// that samples of any spacing give the same curve (a sample `elapsed` after the last one weighs
    /// `1 − e^(−elapsed/τ)`; with no time between them, the progress counts over τ).
    static func rate(_ rate: Double?, moved delta: Double, over elapsed: TimeInterval) -> Double {
        let previous = rate ?? 0
        guard elapsed > 0 else { return max(0, previous + delta / rateTimeConstant) }
        let decay = exp(-elapsed / rateTimeConstant)
        return max(0, previous * decay + delta * (1 - decay) / elapsed)
    }
}

extension JobTreeKeeper {
    fileprivate struct Planner<Reader: JobTreeReading> {
        let reader: Reader
        let now: Date
        var plan = JobTreePlan()
        /// Rows as this plan leaves them (read, then changed).
        var working: [String: TaskRecord] = [:]
        /// The columns this plan writes of each row, and the order rows were first written in.
        var columns: [String: TaskColumns] = [:]
        var order: [String] = []
        /// Per waiting parent: progress its children added in this plan, and awaited links that finished in it.
        var progressDelta: [String: Double] = [:]
        var finishedAwaited: [String: Set<String>] = [:]
        /// The jobs whose recount was queued (a wait that began, say), not found by a mirror of this plan.
        var queuedRecounts: Set<String> = []
        /// What jobs waiting for others were submitted after, read for many at once.
        var dependencies: [String: [JobDependency]] = [:]

        init(reader: Reader, now: Date) {
            self.reader = reader
            self.now = now
        }

        mutating func run(_ changes: [TreeChange]) throws {
            func ids(_ action: TreeChange.Action) -> [String] {
                var seen: Set<String> = []
                return changes.filter { $0.action == action && seen.insert($0.taskID).inserted }.map(\.taskID)
            }
            var recounts = ids(.recount)
            queuedRecounts = Set(recounts)
            for id in try mirror(ids(.mirror)) where !recounts.contains(id) { recounts.append(id) }
            for id in recounts { try recount(id) }
            for (action, transition) in [
                (TreeChange.Action.cancelChildren, CascadeKind.cancel), (.pauseChildren, .pause),
                (.resumeChildren, .resume),
            ] {
                for id in ids(action) { try cascade(from: id, transition, action: action) }
            }
            let finished = ids(.dependents)
            if !finished.isEmpty {
                var waiting: [String] = []
                var seen: Set<String> = []
                for dependency in try reader.dependents(of: finished) where seen.insert(dependency.jobID).inserted {
                    waiting.append(dependency.jobID)
                }
                try prefetchDependencies(of: waiting)
                for id in waiting { try recount(id) }
            }
            plan.updates = order.map { id in TaskUpdate(working[id]!, columns: columns[id]!) }
        }

        // MARK: Rows

        /// The rows of `ids` as this plan has them (read once).
        mutating func rows(_ ids: [String]) throws -> [String: TaskRecord] {
            let missing = ids.filter { working[$0] == nil }
            if !missing.isEmpty {
                for record in try reader.records(missing) where working[record.id] == nil {
                    working[record.id] = record
                }
            }
            var found: [String: TaskRecord] = [:]
            for id in ids { if let record = working[id] { found[id] = record } }
            return found
        }

        /// Writes `record`'s `changed` columns (merged with what the plan wrote of it before).
        mutating func write(_ record: TaskRecord, _ changed: TaskColumns) {
            guard !changed.isEmpty else { return }
            if columns[record.id] == nil {
                order.append(record.id)
                if record.isRoot, let read = working[record.id] {
                    plan.assumed[record.id] = BatchFence.Holder(owner: read.ownerID, status: read.status)
                }
            }
            working[record.id] = record
            columns[record.id, default: []].formUnion(changed)
        }

        // MARK: Mirrors

        /// Makes each child's link follow it. Returns the waiting parents to look at again.
        mutating func mirror(_ childIDs: [String]) throws -> [String] {
            guard !childIDs.isEmpty else { return [] }
            let children = try rows(childIDs).values.filter { $0.parentJobID != nil }
            guard !children.isEmpty else { return [] }
            let links = try reader.links(ofChildren: children.map(\.id).sorted())
            var linkOf: [String: String] = [:]
            for link in links {
                if working[link.id] == nil { working[link.id] = link }
                if let child = link.childJobID { linkOf[child] = link.id }
            }
            let parents = try rows(Array(Set(links.map(\.rootID))).sorted())
            var recount: [String] = []
            for child in children.sorted(by: { $0.id < $1.id }) {
                guard let linkID = linkOf[child.id], let before = working[linkID], let parent = parents[before.rootID]
                else { continue }
                // What the link is given must still be the child's when it is written (a parent may run the child
                // again meanwhile, and reset the link).
                plan.assumed[child.id] = BatchFence.Holder(owner: child.ownerID, status: child.status)
                var link = before
                link.follow(child: child)
                var changed = TaskColumns.changed(from: before, to: link)
                // Only while its parent waits: a parent that runs may begin to wait for it, and the recount its wait
                // queues must then find it awaited (and finished).
                if child.status.isFinished, link.awaited, Self.waitsForChildren(parent) {
                    link.awaited = false
                    changed.insert(.link)
                    finishedAwaited[parent.id, default: []].insert(link.id)
                    if !recount.contains(parent.id) { recount.append(parent.id) }
                }
                guard !changed.isEmpty else { continue }
                link.updatedAt = max(link.updatedAt, now)
                write(link, changed.union(.updatedAt))
                if Self.waitsForChildren(parent), let share = link.share, share > 0 {
                    let delta = share * ((link.progress ?? 0) - (before.progress ?? 0))
                    if delta != 0 { progressDelta[parent.id, default: 0] += delta }
                }
            }
            for (id, delta) in progressDelta.sorted(by: { $0.key < $1.key }) {
                guard var parent = working[id], let base = parent.waitingProgress else { continue }
                let before = parent
                let accumulated = min(1, max(0, base + delta))
                parent.waitingProgress = accumulated
                let shown = max(parent.progress ?? 0, min(ProgressState.unfinishedCap, accumulated))
                if shown != (parent.progress ?? 0) || parent.progress == nil {
                    let elapsed = now.timeIntervalSince(parent.updatedAt)
                    parent.rate = JobTreeKeeper.rate(parent.rate, moved: shown - (parent.progress ?? 0), over: elapsed)
                    parent.progress = shown
                    parent.updatedAt = max(parent.updatedAt, now)
                }
                write(parent, TaskColumns.changed(from: before, to: parent))
            }
            progressDelta.removeAll()
            return recount
        }

        /// Whether a root waits for its children now (its code stopped, no owner).
        static func waitsForChildren(_ record: TaskRecord) -> Bool {
            guard case .children? = record.wait else { return false }
            return record.ownerID == nil && !record.status.isFinished
        }

        // MARK: Recounts

        /// Looks at what a waiting job waits for, and releases it (or, a dependency failed, cancels it).
        mutating func recount(_ id: String) throws {
            guard let job = try rows([id])[id], let wait = job.wait, job.ownerID == nil, !job.status.isFinished
            else { return }
            switch wait {
            case .children(let all) where !queuedRecounts.contains(id):
                // Found by a mirror of this plan: some awaited child finished here. A child that finishes while its
                // parent waits is no longer awaited once mirrored, and one flagged after it had finished was looked at
                // by the recount the wait's beginning queued: only an awaited link unfinished in the store (and not
                // finished in this plan) can hold the parent, and those are read without the finished ones.
                let finishedHere = finishedAwaited[id] ?? []
                if !all {
                    if !finishedHere.isEmpty { release(job) }
                    return
                }
                let left = try reader.unfinishedAwaitedLinks(of: id, limit: finishedHere.count + 1)
                if left.allSatisfy({ finishedHere.contains($0) }) { release(job) }
            case .children(let all):
                let finishedHere = finishedAwaited[id] ?? []
                var anyFinished = !finishedHere.isEmpty
                var anyWaiting = false
                var stale: [String] = []
                for link in try reader.awaitedLinks(of: id) where !finishedHere.contains(link.id) {
                    if link.finished {
                        anyFinished = true
                        stale.append(link.id)
                    } else {
                        anyWaiting = true
                    }
                }
                // A child that had finished before its parent began to wait for it is no longer awaited.
                for linkID in stale {
                    // Its share no longer counts either: the child has finished.
                    var link = working[linkID] ?? Self.stub(linkID, root: id)
                    link.awaited = false
                    link.share = nil
                    write(link, .link)
                }
                if all ? !anyWaiting : anyFinished { release(job) }
            case .jobs:
                if self.dependencies[id] == nil { try prefetchDependencies(of: [id]) }
                let dependencies = self.dependencies[id] ?? []
                let found = try rows(dependencies.map(\.dependsOn))
                var waiting = false
                for dependency in dependencies {
                    let status = found[dependency.dependsOn]?.status
                    if let status, !status.isFinished {
                        waiting = true
                        continue
                    }
                    guard status != .completed, dependency.onFailure == .cancel else { continue }
                    let what =
                        switch status {
                        case .failed?: "failed"
                        case .cancelled?: "was cancelled"
                        default: "was removed"
                        }
                    cancel(job, message: "its dependency \(dependency.dependsOn) \(what)")
                    return
                }
                if !waiting { release(job) }
            case .signal(let name):
                if try reader.hasSignalToTake(job: id, name: name) { release(job) }
            }
        }

        /// Reads what these jobs wait for, and the rows of those jobs, in two reads.
        mutating func prefetchDependencies(of ids: [String]) throws {
            guard !ids.isEmpty else { return }
            var found: [String: [JobDependency]] = [:]
            for id in ids { found[id] = [] }
            for dependency in try reader.dependencies(ofJobs: ids) { found[dependency.jobID, default: []].append(dependency) }
            dependencies.merge(found) { _, new in new }
            _ = try rows(Array(Set(found.values.joined().map(\.dependsOn))).sorted())
        }

        /// A link row known only by its id and root, to clear its flag.
        static func stub(_ id: String, root: String) -> TaskRecord {
            TaskRecord(id: id, parentID: root, rootID: root, name: "", createdAt: .distantPast)
        }

        /// Lets a waiting job go on: any worker claims it now.
        mutating func release(_ job: TaskRecord) {
            var released = working[job.id] ?? job
            let before = released
            released.releaseWait(at: now)
            write(released, TaskColumns.changed(from: before, to: released))
        }

        /// Cancels a waiting job whose dependency failed.
        mutating func cancel(_ job: TaskRecord, message: String) {
            var cancelled = working[job.id] ?? job
            let before = cancelled
            guard let event = try? TaskLifecycle.apply(.cancel, to: &cancelled, now: now, by: .system, message: message)
            else { return }
            cancelled.wait = nil
            cancelled.waitingFor = nil
            cancelled.waitingProgress = nil
            cancelled.errorDescription = message
            cancelled.errorType = String(reflecting: JobDependencyFailedError.self)
            write(cancelled, TaskColumns.changed(from: before, to: cancelled))
            plan.events.append(event)
        }

        // MARK: Cascades

        enum CascadeKind { case cancel, pause, resume }

        /// Carries a parent's end, pause or resume to its children (and, queued, to theirs).
        mutating func cascade(from parentID: String, _ kind: CascadeKind, action: TreeChange.Action) throws {
            // The parent as it is now, not as it was when the change was queued: a parent retried, resumed or paused
            // again since then asks nothing of its children (a retried parent's children run again; an end queued
            // twice must not cancel them a second time). A removed parent's children are cancelled.
            let parent = try rows([parentID])[parentID]
            switch kind {
            case .cancel: if let parent, !parent.status.isFinished { return }
            case .pause: guard parent?.status == .paused else { return }
            case .resume: guard let parent, parent.status != .paused, !parent.status.isFinished else { return }
            }
            let links = try reader.links(inTreesOf: [parentID])
            guard !links.isEmpty else { return }
            let children = try rows(links.compactMap(\.childJobID).sorted())
            let affected = children.values.filter { child in
                switch kind {
                case .cancel: !child.status.isFinished
                case .pause: child.status == .pending || child.status == .running
                case .resume: child.status == .paused
                }
            }.map(\.id).sorted()
            guard !affected.isEmpty else { return }
            if let parent, plan.assumed[parentID] == nil {
                // What the cascade was decided on must still hold when it is written.
                plan.assumed[parentID] = BatchFence.Holder(owner: parent.ownerID, status: parent.status)
            }
            let trees = try reader.subtrees(of: affected)
            for childID in affected {
                guard let child = children[childID] else { continue }
                let transition: TaskLifecycle.Transition
                let message: String
                switch kind {
                case .cancel:
                    guard !child.status.isFinished else { continue }
                    transition = .cancel
                    message = "its parent job \(parentID) ended"
                case .pause:
                    guard child.status == .pending || child.status == .running else { continue }
                    transition = .pause
                    message = "its parent job \(parentID) was paused"
                case .resume:
                    guard child.status == .paused else { continue }
                    transition = .resume(codeRunning: false)
                    message = "its parent job \(parentID) was resumed"
                }
                let nodes = (trees[childID] ?? []).map { working[$0.id] ?? $0 }
                let request = TaskChangeRequest(
                    taskID: childID, transition: transition, requester: .system, message: message, at: now)
                guard case .write(let batch, _)? = try? request.plan(over: nodes, path: nil) else { continue }
                for update in batch.updates {
                    var record = update.record
                    var changed = update.columns
                    if record.id == childID, record.ownerID != nil {
                        // Taken from the executor that runs it: its next write is refused, and it stops the code.
                        record.ownerID = nil
                        changed.insert(.owner)
                    }
                    write(record, changed)
                }
                plan.events += batch.events
                plan.followUps.append(TreeChange(childID, action))
            }
        }
    }
}

/// A job submitted after another one (``JobOptions/after``) was cancelled because that one failed, was cancelled or
/// was removed (its ``DependencyFailurePolicy`` is ``DependencyFailurePolicy/cancel``).
public struct JobDependencyFailedError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    /// The dependency's id.
    public var dependency: String

    public var errorDescription: String? { description }
    public var description: String { "Its dependency \(dependency) did not complete" }
}

extension TaskBatch {
    /// Whether the batch queues work for the tree keeper that its writer knows of: a child job's change, a parent's
    /// cascade, a wait (the dependents of a finished job are found by the store).
    package var changesJobTrees: Bool {
        !treeChanges.isEmpty || updates.contains { $0.record.parentJobID != nil }
            || inserts.contains { $0.parentJobID != nil }
    }

    /// The tree keeper's work that writing this batch queues, besides its explicit ``treeChanges``: a *mirror* for
    /// each child job whose followed columns it wrote, and the roots it finished, whose dependents the store looks for
    /// (a *dependents* entry when it has any). `written`: whether the store wrote a row.
    package func impliedTreeChanges(written: (String) -> Bool) -> (changes: [TreeChange], finishedRoots: [String]) {
        var changes = treeChanges.filter { written($0.taskID) }
        var finished: [String] = []
        for update in updates where written(update.record.id) {
            let record = update.record
            if record.parentJobID != nil, !update.columns.isDisjoint(with: JobTreeKeeper.mirrored) {
                changes.append(TreeChange(record.id, .mirror))
            }
            if record.isRoot, update.columns.contains(.status), record.status.isFinished {
                finished.append(record.id)
            }
        }
        return (changes, finished)
    }
}
