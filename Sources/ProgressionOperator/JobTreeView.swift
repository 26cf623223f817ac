import Foundation
import Progression

/// A job's tree across the fleet, as `progressctl show` and `watch` and the console's job page show it: the task's own
/// nodes, and for each link (the node that stands for a child job, ``TaskRecord/childJobID``) the child job itself —
/// a root of its own that any worker may run — with the worker that holds it. The trees of the child jobs that ran
/// and have not finished are read too (their own links in turn), at most ``expandLimit`` of them, nearest first; the
/// others stay one line each, counted in ``notExpanded``. For a job it also reads what it was submitted after, the
/// jobs submitted after it, its signals and, for a child job, the job that started it.
package struct JobTreeView: Sendable {
    /// The most child jobs whose own trees are read.
    package static let expandLimit = 20

    /// A job related to this one by ``JobOptions/after``: the dependency as stored, and the job at the other end
    /// (`nil` once it was removed).
    package struct Related: Sendable, Hashable {
        package var dependency: JobDependency
        package var job: TaskRecord?
        /// The id of the job at the other end.
        package var id: String
    }

    /// The task asked for and the nodes below it, in tree order.
    package var nodes: [TaskRecord]
    /// The child jobs that the links shown stand for, by id (a removed one is absent).
    package var childJobs: [String: TaskRecord] = [:]
    /// The trees of the child jobs that were read (each child's own root first), by the child's id.
    package var expanded: [String: [TaskRecord]] = [:]
    /// Child jobs that ran and have not finished whose trees were not read (past ``expandLimit``).
    package var notExpanded = 0
    /// The recorded executors, by id.
    package var owners: [String: OwnerRecord] = [:]
    /// For a child job: the job that started it (`nil` when it was removed, or for any other task).
    package var parentJob: TaskRecord?
    /// For a job: what it was submitted after, in the order stored; `nil` for a subtask or when not read.
    package var dependencies: [Related]?
    /// For a job: the jobs submitted after it; `nil` for a subtask or when not read.
    package var dependents: [Related]?
    /// For a job: the signals sent to it, oldest first; `nil` for a subtask or when not read.
    package var signals: [JobSignalRecord]?

    /// The task asked for.
    package var task: TaskRecord { nodes[0] }

    package init(nodes: [TaskRecord]) {
        precondition(!nodes.isEmpty, "a tree has at least its task")
        self.nodes = nodes
    }

    /// The executor that holds `job` (a root), when it is recorded.
    package func worker(of job: TaskRecord) -> OwnerRecord? {
        job.ownerID.flatMap { owners[$0] }
    }

    /// Whether a child job's own tree is worth reading: it ran (it may have steps) and has not finished.
    static func isExpandable(_ child: TaskRecord) -> Bool {
        !child.status.isFinished && child.startedAt != nil
    }
}

extension JobTreeView {
    /// One line of the tree across the fleet, in the order shown.
    package struct Entry: Sendable, Hashable {
        /// What the line is.
        package enum Role: Sendable, Hashable {
            /// A node of the task's tree, or of a child job's tree below its link.
            case node
            /// A link: the child job it stands for (`nil` once removed), and whether the child's tree follows.
            case link(child: TaskRecord?, expanded: Bool)
            /// The root of a child job whose tree follows its link (the link's line already shows it for people).
            case childRoot
        }

        package var record: TaskRecord
        /// Levels below the task asked for: a child job's root is one below its link.
        package var depth: Int
        package var role: Role
    }

    /// Every line: each node in tree order, a link followed by its child job's tree when it was read.
    package var entries: [Entry] {
        var entries: [Entry] = []
        var visited: Set<String> = []
        func emit(_ tree: [TaskRecord], base: Int, isChild: Bool) {
            let depths = TaskJSON.depths(of: tree)
            for (index, node) in tree.enumerated() {
                let depth = base + (depths[node.id] ?? 0)
                if index == 0 && isChild {
                    entries.append(Entry(record: node, depth: depth, role: .childRoot))
                    continue
                }
                guard let childID = node.childJobID else {
                    entries.append(Entry(record: node, depth: depth, role: .node))
                    continue
                }
                let subtree = visited.contains(childID) ? nil : expanded[childID]
                entries.append(
                    Entry(record: node, depth: depth, role: .link(child: childJobs[childID], expanded: subtree != nil)))
                if let subtree, !subtree.isEmpty {
                    visited.insert(childID)
                    emit(subtree, base: depth + 1, isChild: true)
                }
            }
        }
        emit(nodes, base: 0, isChild: false)
        return entries
    }

    /// The nodes as one tree, for the dashboards (``Dashboard``): each child job's tree that was read hangs below its
    /// link in place of the child's own root (whose state the link mirrors), every other node as it is.
    package var graftedNodes: [TaskRecord] {
        var nodes: [TaskRecord] = []
        var linkOfChild: [String: String] = [:]
        for entry in entries {
            switch entry.role {
            case .childRoot:
                continue
            case .link(let child, true):
                if let child { linkOfChild[child.id] = entry.record.id }
                nodes.append(entry.record)
            default:
                var record = entry.record
                if let parent = record.parentID, let link = linkOfChild[parent] { record.parentID = link }
                nodes.append(record)
            }
        }
        return nodes
    }
}

extension OperatorStore {
    /// The tree across the fleet of the task `id` (see ``JobTreeView``); `nil` when there is no such task.
    ///
    /// - Parameters:
    ///   - expandLimit: the most child jobs whose trees are read.
    ///   - relations: whether to read the dependencies, dependents, signals and parent job too (the job page and
    ///     `show` do; `watch` does not).
    package func jobTreeView(
        of id: String, expandLimit: Int = JobTreeView.expandLimit, relations: Bool = true
    ) async throws -> JobTreeView? {
        try await checked { store in
            let nodes = try await store.tree(of: id)
            guard !nodes.isEmpty else { return nil }
            var view = JobTreeView(nodes: nodes)
            var budget = expandLimit
            var level = nodes.compactMap(\.childJobID)
            var seen = Set(level)
            var ownerIDs: Set<String> = []
            // Level by level: the children of the task's tree first, then theirs.
            while !level.isEmpty {
                var found: [String: TaskRecord] = [:]
                for chunk in stride(from: 0, to: level.count, by: 500) {
                    for job in try await store.tasks(ids: Array(level[chunk..<min(level.count, chunk + 500)])) {
                        found[job.id] = job
                    }
                }
                var next: [String] = []
                for childID in level {
                    guard let child = found[childID] else { continue }
                    view.childJobs[childID] = child
                    if let owner = child.ownerID { ownerIDs.insert(owner) }
                    guard JobTreeView.isExpandable(child) else { continue }
                    guard budget > 0 else {
                        view.notExpanded += 1
                        continue
                    }
                    budget -= 1
                    let tree = try await store.tree(of: childID)
                    guard !tree.isEmpty else { continue }
                    view.expanded[childID] = tree
                    for grandchild in tree.compactMap(\.childJobID) where seen.insert(grandchild).inserted {
                        next.append(grandchild)
                    }
                }
                level = next
            }
            let task = nodes[0]
            if task.isRoot, let owner = task.ownerID { ownerIDs.insert(owner) }
            if !ownerIDs.isEmpty {
                for owner in try await store.owners() where ownerIDs.contains(owner.id) { view.owners[owner.id] = owner }
            }
            guard relations else { return view }
            if let parentID = task.parentJobID { view.parentJob = try await store.task(id: parentID) }
            guard task.isRoot else { return view }
            let dependencies = try await store.dependencies(of: task.id)
            let dependents = try await store.dependents(of: task.id)
            let related = Set(dependencies.map(\.dependsOn) + dependents.map(\.jobID))
            var jobs: [String: TaskRecord] = [:]
            if !related.isEmpty {
                for job in try await store.tasks(ids: related.sorted()) { jobs[job.id] = job }
            }
            view.dependencies = dependencies.map {
                JobTreeView.Related(dependency: $0, job: jobs[$0.dependsOn], id: $0.dependsOn)
            }
            view.dependents = dependents.map { JobTreeView.Related(dependency: $0, job: jobs[$0.jobID], id: $0.jobID) }
            view.signals = try await store.signals(of: task.id)
            return view
        }
    }

    /// The job `reference` names (as ``resolveTask(_:)`` reads it), for a command that acts on a job: a link stands
    /// for its child job.
    ///
    /// - Throws: ``CLIError`` with status 64 for an unknown or ambiguous reference, a subtask that is not a link, or a
    ///   link whose child job was removed.
    package func resolveJob(_ reference: String) async throws -> TaskRecord {
        let task: TaskRecord
        do {
            task = try await resolveTask(reference)
        } catch let error as CLIError where Self.isReferenceError(error) {
            throw CLIError.usage(error.message)
        }
        if let childID = task.childJobID {
            guard let child = try await checked({ try await $0.task(id: childID) }) else {
                throw CLIError.usage(
                    "'\(reference.escapedForTerminal)' stands for the child job '\(childID.escapedForTerminal)', which was removed")
            }
            return child
        }
        guard task.isRoot else {
            throw CLIError.usage(
                "'\(reference.escapedForTerminal)' is a subtask of job '\(task.rootID.escapedForTerminal)', not a job")
        }
        return task
    }

    /// Whether `error` of ``resolveTask(_:)`` says that the reference names no single task (rather than that the store
    /// failed).
    static func isReferenceError(_ error: CLIError) -> Bool {
        let message = error.message
        return message.hasPrefix("no task with id") || message.contains("is ambiguous")
            || message.contains("is a subtask") || message.contains("has no subtask")
            || message.contains("subtasks named")
    }
}
