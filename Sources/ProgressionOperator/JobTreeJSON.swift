import Foundation
import Progression

/// A node of `progressctl show --json` and of the console's job document: the fields of ``TaskJSON`` (with `depth`),
/// and what a job's tree across the fleet adds. Every key is present on every node: `child` on a link, the others on
/// the task asked for, `null` elsewhere (and `dependencies`, `dependents` and `signals` `null` for a subtask).
package struct TreeNodeJSON: Encodable, Sendable {
    package var task: TaskJSON
    /// On a link: the child job it stands for, with the worker that runs it.
    package var child: ChildJobJSON?
    /// On the task asked for, when it is a child job: the job that started it.
    package var parentJob: JobReferenceJSON?
    /// On the job asked for: the jobs it was submitted after, with their status.
    package var dependencies: [JobReferenceJSON]?
    /// On the job asked for: the jobs submitted after it.
    package var dependents: [JobReferenceJSON]?
    /// On the job asked for: the signals sent to it, oldest first.
    package var signals: [SignalJSON]?
    /// On the task asked for: child jobs that ran and have not finished whose trees are not among the nodes (at most
    /// ``JobTreeView/expandLimit`` are).
    package var childJobsNotExpanded: Int?

    private enum CodingKeys: String, CodingKey {
        case child, parentJob, dependencies, dependents, signals, childJobsNotExpanded
    }

    package func encode(to encoder: any Encoder) throws {
        try task.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(child, forKey: .child)
        try container.encode(parentJob, forKey: .parentJob)
        try container.encode(dependencies, forKey: .dependencies)
        try container.encode(dependents, forKey: .dependents)
        try container.encode(signals, forKey: .signals)
        try container.encode(childJobsNotExpanded, forKey: .childJobsNotExpanded)
    }
}

/// The child job a link stands for: its state, and the worker (an executor, on some host) that holds it.
package struct ChildJobJSON: Encodable, Sendable, Equatable {
    package var id: String
    /// Whether it was removed (then only `id` is known).
    package var removed: Bool
    @Null package var name: String?
    @Null package var kind: String?
    @Null package var status: String?
    @Null package var state: String?
    @Null package var progress: Double?
    @Null package var step: String?
    @Null package var ownerID: String?
    /// The executor that holds it, when it is recorded.
    @Null package var worker: WorkerJSON?
    /// Whether its own tree follows its link among the nodes.
    package var expanded: Bool
}

/// An executor as a job's tree names it: which process on which host.
package struct WorkerJSON: Encodable, Sendable, Equatable {
    package var id: String
    package var host: String
    package var pid: Int32
    package var liveness: String
    package var alive: Bool

    package init(_ owner: OwnerRecord, now: Date) {
        let liveness = owner.liveness(now: now)
        id = owner.id
        host = owner.host
        pid = owner.pid
        self.liveness = liveness.description
        alive = liveness.isAlive
    }
}

/// Another job named by a job's tree: its parent, one of its dependencies or dependents.
package struct JobReferenceJSON: Encodable, Sendable, Equatable {
    package var id: String
    /// Whether it was removed (then only `id` is known).
    package var removed: Bool
    @Null package var name: String?
    @Null package var kind: String?
    @Null package var status: String?
    @Null package var state: String?
    /// For a dependency or a dependent: what the waiting job does when the other one fails (`cancel` or `run`).
    @Null package var ifDependencyFails: String?

    package init(id: String, job: TaskRecord?, ifDependencyFails: DependencyFailurePolicy? = nil) {
        self.id = id
        removed = job == nil
        name = job?.name
        kind = job?.kind
        status = job?.status.rawValue
        state = job?.displayStatus
        self.ifDependencyFails = ifDependencyFails?.rawValue
    }
}

/// A signal sent to a job (`progressctl signal --json` prints one).
package struct SignalJSON: Encodable, Sendable, Equatable {
    package var sequence: Int64
    package var jobID: String
    package var name: String
    /// Its payload as JSON (see ``JSONValue/stored(_:)``); `null` for none.
    @Null package var payload: JSONValue?
    package var sentAt: Date
    /// Whether a wait step of the job took it.
    package var taken: Bool
    /// The wait step that took it.
    @Null package var takenBy: String?
    @Null package var takenAt: Date?

    package init(_ signal: JobSignalRecord) {
        sequence = signal.sequence
        jobID = signal.jobID
        name = signal.name
        payload = JSONValue.stored(signal.payload)
        sentAt = signal.sentAt
        taken = signal.consumedBy != nil
        takenBy = signal.consumedBy
        takenAt = signal.consumedAt
    }
}

extension JobTreeView {
    /// Failed subtasks of the task's own tree (a link whose child failed counts as one).
    package var failedSteps: Int {
        nodes.filter { !$0.isRoot && $0.status == .failed }.count
    }

    /// Every line as a node of `show --json`: a link's child job (`child`) followed by its tree when it was read,
    /// the relations on the task asked for.
    package func json(now: Date = Date()) -> [TreeNodeJSON] {
        let failed = failedSteps
        return entries.enumerated().map { index, entry in
            var node = TreeNodeJSON(
                task: TaskJSON(entry.record, depth: entry.depth, failedSteps: index == 0 && task.isRoot ? failed : 0))
            if case .link(let child, let expanded) = entry.role, let childID = entry.record.childJobID {
                node.child = childJSON(id: childID, job: child, expanded: expanded, now: now)
            }
            if index == 0 {
                if let parentID = task.parentJobID { node.parentJob = JobReferenceJSON(id: parentID, job: parentJob) }
                node.dependencies = dependencies?.map {
                    JobReferenceJSON(id: $0.id, job: $0.job, ifDependencyFails: $0.dependency.onFailure)
                }
                node.dependents = dependents?.map {
                    JobReferenceJSON(id: $0.id, job: $0.job, ifDependencyFails: $0.dependency.onFailure)
                }
                node.signals = signals?.map(SignalJSON.init)
                node.childJobsNotExpanded = notExpanded
            }
            return node
        }
    }

    /// The child job `id` of a link as JSON.
    package func childJSON(id: String, job: TaskRecord?, expanded: Bool, now: Date) -> ChildJobJSON {
        ChildJobJSON(
            id: id, removed: job == nil, name: job?.name, kind: job?.kind, status: job?.status.rawValue,
            state: job?.displayStatus, progress: job?.progress, step: job?.step, ownerID: job?.ownerID,
            worker: job.flatMap { worker(of: $0) }.map { WorkerJSON($0, now: now) }, expanded: expanded)
    }
}
