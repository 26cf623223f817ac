#if Console
import Foundation
import Progression
import ProgressionOperator

/// Reads what the pages and the API show, from the store progressctl would read.
package struct ConsoleReader: Sendable {
    package let store: OperatorStore
    let throughput: ThroughputTracker

    /// The most roots the list's count reads (`10,000+` beyond): a count of a million roots would cost more than
    /// the page.
    package static let countBound = 10_000
    /// The most running roots the overview lists.
    package static let overviewRunning = 20
    /// The most events of a job's history a page shows.
    package static let historyLimit = 200
    /// The most nodes the job page shows when asked for the whole tree.
    package static let expandLimit = 5_000

    package init(store: OperatorStore) {
        self.store = store
        throughput = ThroughputTracker()
    }

    // MARK: Overview

    package func overview(now: Date = Date()) async throws -> OverviewJSON {
        let statistics = try await store.checked { try await $0.statistics() }
        let owners = try await store.ownerReports(now: now)
        let running = try await store.checked {
            try await $0.roots(TaskQuery(statuses: [.running], sort: .created, reverse: true, limit: Self.overviewRunning))
        }
        return OverviewJSON(
            stats: StatsJSON(statistics), throughput: try await throughput.chart(of: store, now: now), owners: owners,
            kinds: try await kinds(owners: owners), schedules: try await schedules(),
            running: running.map { TaskJSON($0) })
    }

    /// The kinds workers registered or that are paused, by name.
    package func kinds(owners: [OwnerJSON]) async throws -> [KindJSON] {
        let registered = try await store.checked { try await $0.registeredKinds() }
        let paused = try await store.checked { try await $0.pausedKinds() }
        let names = Set(registered.keys).union(paused.keys)
        return names.sorted().map { name in
            KindJSON(
                name: name, workers: owners.filter { $0.registered?.contains(name) == true }.count,
                maxConcurrent: registered[name]?.maxConcurrent, paused: paused[name] != nil, pausedAt: paused[name])
        }
    }

    /// The schedules workers declared, by name.
    package func schedules() async throws -> [ScheduleJSON] {
        try await store.checked { try await $0.schedules() }.sorted { $0.name < $1.name }.map { schedule in
            ScheduleJSON(
                name: schedule.name, kind: schedule.kind, cron: schedule.cron, timeZone: schedule.timeZone,
                missedTicks: schedule.missed.description, paused: schedule.paused, nextFireAt: schedule.nextFireAt,
                lastFireAt: schedule.lastFireAt, lastJobID: schedule.lastJobID, declaredBy: schedule.declaredBy)
        }
    }

    /// How many failed subtasks each of `roots` has (those without any left out).
    package func failedSteps(_ roots: [TaskRecord]) async throws -> [String: Int] {
        let ids = roots.filter(\.isRoot).map(\.id)
        guard !ids.isEmpty else { return [:] }
        return try await store.checked { try await $0.failedSteps(ofRoots: ids) }
    }

    package func overviewLive(now: Date = Date()) async throws -> OverviewLiveJSON {
        let statistics = try await store.checked { try await $0.statistics() }
        let running = try await store.checked {
            try await $0.roots(TaskQuery(statuses: [.running], sort: .created, reverse: true, limit: Self.overviewRunning))
        }
        let stats = StatsJSON(statistics)
        return OverviewLiveJSON(
            byStatus: stats.byStatus, total: stats.total, throughput: try await throughput.chart(of: store, now: now),
            running: try await rows(running))
    }

    // MARK: List

    /// A page of the list, and the count of all that match (up to ``countBound``).
    package func list(_ request: ListRequest, now: Date = Date()) async throws -> (page: RootPage, total: Int) {
        let query = try request.query(now: now)
        let page = try await store.checked { [query] in try await $0.page(query, after: request.after) }
        let total = try await store.checked { [query] in try await $0.countRoots(query, upTo: Self.countBound) }
        return (page, total)
    }

    package func listJSON(_ request: ListRequest) async throws -> ListJSON {
        let (page, total) = try await list(request)
        let failed = try await failedSteps(page.roots)
        return ListJSON(
            tasks: page.roots.map { TaskJSON($0, failedSteps: failed[$0.id] ?? 0) }, next: page.next?.description,
            total: total,
            totalIsLowerBound: total >= Self.countBound)
    }

    package func listLive(_ request: ListRequest) async throws -> ListLiveJSON {
        let (page, total) = try await list(request)
        return ListLiveJSON(rows: try await rows(page.roots), footer: Self.footer(shown: page.roots.count, total: total))
    }

    /// The rows of `roots`, with their failed steps.
    package func rows(_ roots: [TaskRecord]) async throws -> [LiveRowJSON] {
        let failed = try await failedSteps(roots)
        return roots.map { LiveRowJSON($0, failedSteps: failed[$0.id] ?? 0) }
    }

    /// `50 of 5,004 tasks`, `50 of 10,000+ tasks`.
    package static func footer(shown: Int, total: Int) -> String {
        "\(Format.count(shown)) of " + (total >= countBound ? "\(Format.count(total))+ tasks" : Format.tasks(total))
    }

    // MARK: A job

    /// The task `reference` names: an exact id, or what progressctl accepts (a unique prefix of a root's id,
    /// `ROOT/NAME`).
    ///
    /// - Throws: ``ConsoleError`` 404 when there is none.
    package func task(_ reference: String) async throws -> TaskRecord {
        if let exact = try await store.checked({ try await $0.task(id: reference) }) { return exact }
        do {
            return try await store.resolveTask(reference)
        } catch let error as CLIError {
            throw ConsoleError.notFound(error.message)
        }
    }

    /// Everything the job page shows of `task`.
    package struct Job: Sendable {
        package var task: TaskRecord
        package var tree: [TaskRecord]
        /// The tree across the fleet: child jobs with their workers and steps, dependencies, dependents, signals.
        package var view: JobTreeView
        package var depths: [String: Int]
        package var history: [TaskEvent]
        /// Whether the history has more than ``historyLimit`` events.
        package var historyIsCut: Bool
        package var errors: [TaskEvent]
        package var owner: OwnerJSON?
        package var root: TaskRecord
        /// Failed subtasks of the task, when it is a root.
        package var failedSteps: Int
    }

    package func job(_ task: TaskRecord, now: Date = Date()) async throws -> Job {
        guard let view = try await store.jobTreeView(of: task.id) else {
            throw ConsoleError.notFound("task '\(task.id)' was removed")
        }
        let tree = view.nodes
        let kinds = Set(TaskEvent.Kind.allCases).subtracting([.progress])
        let history = try await store.checked {
            try await $0.events(EventQuery(taskID: task.id, kinds: kinds, limit: Self.historyLimit + 1, tail: true))
        }
        let errors = try await store.checked {
            try await $0.events(EventQuery(taskID: task.id, kinds: [.failed, .interrupted], limit: Self.historyLimit, tail: true))
        }
        let root = task.isRoot ? task : try await TaskControl(store: store, wait: .zero).root(of: task)
        var owner: OwnerJSON?
        if let ownerID = root.ownerID {
            owner = try await store.ownerReports(now: now).first { $0.id == ownerID }
        }
        return Job(
            task: tree[0], tree: tree, view: view, depths: TaskJSON.depths(of: tree),
            history: Array(history.suffix(Self.historyLimit)), historyIsCut: history.count > Self.historyLimit,
            errors: errors, owner: owner, root: root, failedSteps: try await failedSteps([tree[0]])[tree[0].id] ?? 0)
    }

    package func jobJSON(_ job: Job, actions: [ControlRequest.Action], now: Date = Date()) -> JobJSON {
        let names = Dictionary(job.tree.map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
        return JobJSON(
            tree: job.view.json(now: now),
            history: job.history.map { EventJSON($0, names: names) },
            errors: job.errors.map { EventJSON($0, names: names) }, actions: actions.map(\.rawValue), owner: job.owner)
    }

    /// The rows of the job page's tree across the fleet (``JobTreeView/graftedNodes``: below each link the steps of
    /// its child job, when they were read): as `progressctl watch` shows a tree (the task, its running, paused and
    /// failed descendants, a line counting the other children of each parent), or, with `expanded`, every node (at
    /// most ``expandLimit``). A link's row names its child job and the worker that holds it.
    package static func treeRows(
        _ view: JobTreeView, expanded: Bool, failedSteps: Int = 0, now: Date = Date()
    ) -> [LiveRowJSON] {
        let nodes = view.graftedNodes
        var childOfLink: [String: String] = [:]
        for node in nodes { if let child = node.childJobID { childOfLink[node.id] = child } }
        return treeRows(nodes, expanded: expanded, failedSteps: failedSteps).map { row in
            guard row.summary == nil, let childID = childOfLink[row.id] else { return row }
            var row = row
            row.job = childID
            if let child = view.childJobs[childID], let owner = view.worker(of: child) {
                row.worker = "\(owner.id) on \(owner.host)"
            } else if view.childJobs[childID] == nil {
                row.worker = "removed"
            }
            return row
        }
    }

    /// The rows of `tree` (see ``treeRows(_:expanded:failedSteps:now:)``).
    package static func treeRows(_ tree: [TaskRecord], expanded: Bool, failedSteps: Int = 0) -> [LiveRowJSON] {
        guard !tree.isEmpty else { return [] }
        if expanded {
            let depths = TaskJSON.depths(of: tree)
            return tree.prefix(expandLimit).map {
                LiveRowJSON($0, depth: depths[$0.id] ?? 0, failedSteps: $0.id == tree[0].id ? failedSteps : 0)
            }
        }
        let rates = ProgressRates()
        let root = tree[0]
        let rows = Dashboard.candidateRows(
            of: [Dashboard.Tree(nodes: tree, rate: rates.rate(of: root), timeLeft: rates.timeLeft(of: root))])
        var parents: [Int: String] = [:]
        return rows.enumerated().map { index, row in
            switch row.content {
            case .root(let task, _, _):
                parents[index] = task.id
                return LiveRowJSON(task, depth: 0, failedSteps: failedSteps)
            case .task(let task, let depth):
                parents[index] = task.id
                return LiveRowJSON(task, depth: depth)
            case .summary(let counts, let depth):
                let order: [TaskStatus] = [.completed, .failed, .cancelled, .pending, .running, .paused]
                let text = order.compactMap { status in counts[status].map { "\(Format.count($0)) \(status)" } }
                    .joined(separator: " · ")
                return LiveRowJSON(summary: text, parentID: row.parent.flatMap { parents[$0] } ?? root.id, depth: depth)
            }
        }
    }

    package func jobLive(_ id: String, expanded: Bool) async throws -> JobLiveJSON {
        guard let view = try await store.jobTreeView(of: id, relations: false) else {
            return JobLiveJSON(status: "removed", rows: [])
        }
        let top = view.task
        let failed = try await failedSteps([top])[top.id] ?? 0
        return JobLiveJSON(status: top.displayStatus, rows: Self.treeRows(view, expanded: expanded, failedSteps: failed))
    }

    /// The actions the console offers on the page of `job`: those of its task, or, for a link, those of the child job
    /// it stands for (a change aimed at a link acts on its child job).
    package func actions(for job: Job, now: Date = Date()) async throws -> [ControlRequest.Action] {
        guard let childID = job.task.childJobID else { return actions(for: job.task, root: job.root, owner: job.owner) }
        guard let child = job.view.childJobs[childID] else { return [] }
        var owner: OwnerJSON?
        if let ownerID = child.ownerID { owner = try await store.ownerReports(now: now).first { $0.id == ownerID } }
        return actions(for: child, root: child, owner: owner)
    }

    /// The actions the console offers for `task` now: those the lifecycle allows it (as its live owner, or, without
    /// one, progressctl would apply them), `remove` only once finished (a forced removal is offered with `cancel`),
    /// `run-now` only to a job that waits for a time.
    package func actions(for task: TaskRecord, root: TaskRecord, owner: OwnerJSON?) -> [ControlRequest.Action] {
        let withOwner = owner?.alive == true
        return ControlRequest.Action.allCases.filter { action in
            if action == .remove && !task.status.isFinished { return false }
            if !withOwner && !task.isRoot { return false }
            return (try? TaskControl.check(action, task, withOwner: withOwner)) != nil
        }
    }
}

/// The overview's chart, kept up to date from the history at most every ``interval``.
package actor ThroughputTracker {
    private var counter = OutcomesPerMinute()
    private var lastRefresh: ContinuousClock.Instant?
    private var available = true
    /// The shortest time between two reads of the history.
    package static let interval: Duration = .seconds(2)

    package init() {}

    /// The chart, read again when it is older than ``interval``; `nil` for a store that cannot say.
    package func chart(of store: OperatorStore, now: Date) async throws -> [OutcomesPerMinute.Minute]? {
        let clock = ContinuousClock.now
        if available, lastRefresh.map({ clock - $0 >= Self.interval }) ?? true {
            lastRefresh = clock
            var copy = counter
            available = try await copy.refresh(from: store, now: now)
            counter = copy
        }
        return available ? counter.chart(now: now) : nil
    }
}
#endif
