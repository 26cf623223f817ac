#if Console
import Foundation
import Progression
import ProgressionOperator

/// `GET /` as JSON: what the overview shows.
package struct OverviewJSON: Encodable, Sendable {
    /// As `progressctl stats --json`.
    package var stats: StatsJSON
    /// Roots completed and failed per minute over the last hour, oldest minute first; `null` for a store that
    /// cannot say.
    package var throughput: [OutcomesPerMinute.Minute]?
    /// The executors, live ones first.
    package var owners: [OwnerJSON]
    /// The job kinds executors registered (or that are paused), with their limits.
    package var kinds: [KindJSON]
    /// The schedules workers declared.
    package var schedules: [ScheduleJSON]
    /// Running roots, oldest first (at most ``ConsoleReader/overviewRunning``).
    package var running: [TaskJSON]
}

/// A job kind on the overview.
package struct KindJSON: Encodable, Sendable, Equatable {
    package var name: String
    /// How many recorded workers registered it.
    package var workers: Int
    /// At most this many of its jobs run at once across the fleet; `null`: no limit of its own.
    @Null package var maxConcurrent: Int?
    package var paused: Bool
    @Null package var pausedAt: Date?
}

/// A schedule on the overview (the fields of `progressctl schedules --json`).
package struct ScheduleJSON: Encodable, Sendable, Equatable {
    package var name: String
    package var kind: String
    package var cron: String
    package var timeZone: String
    package var missedTicks: String
    package var paused: Bool
    package var nextFireAt: Date
    @Null package var lastFireAt: Date?
    @Null package var lastJobID: String?
    @Null package var declaredBy: String?
}

/// `GET /tasks` as JSON: a page of roots, as `progressctl list --json` shows each.
package struct ListJSON: Encodable, Sendable {
    package var tasks: [TaskJSON]
    /// The `after` of the next page; `null` on the last page.
    @Null package var next: String?
    /// How many roots match, counted up to ``ConsoleReader/countBound``.
    package var total: Int
    /// Whether `total` is that bound (so that many or more match).
    package var totalIsLowerBound: Bool
}

/// `GET /tasks/{id}` as JSON: the task's tree across the fleet as `progressctl show --json` shows it (child jobs with
/// their workers, dependencies, dependents and signals on the first node), its history as `progressctl history
/// --json`, the changes the lifecycle allows for it now, and its owner.
package struct JobJSON: Encodable, Sendable {
    package var tree: [TreeNodeJSON]
    /// The last ``ConsoleReader/historyLimit`` events of the tree (progress samples left out), oldest first.
    package var history: [EventJSON]
    /// Every failure recorded in the tree's history, by attempt.
    package var errors: [EventJSON]
    /// The actions the console offers for it: `pause`, `resume`, `cancel`, `retry`, `remove`.
    package var actions: [String]
    @Null package var owner: OwnerJSON?
}

/// A task's live values, as the pages' rows show them (Server-Sent Events): numbers, and the same values as text
/// (`45%`, `2.1%/min`, `4m10s`).
package struct LiveRowJSON: Encodable, Sendable, Equatable {
    package var id: String
    package var name: String
    @Null package var kind: String?
    package var status: String
    /// The status as people read it: `scheduled`, `retrying` or `sleeping` for a job that waits for a time.
    package var label: String
    /// Failed subtasks of a root (a job that completed with failed steps).
    package var failedSteps: Int
    @Null package var progress: Double?
    package var percent: String
    package var rate: String
    package var left: String
    @Null package var step: String?
    package var attempt: Int
    package var updated: String
    /// How deep in the tree (0 for the root; the job page).
    package var depth: Int
    /// For the job page's count lines: `412 completed · 3 failed` (the row is no task then).
    @Null package var summary: String?
    /// On a link's row (the job page): the child job it stands for.
    @Null package var job: String? = nil
    /// On a link's row: the worker that holds its child job, `w1 on host-a` (`removed` for a child job removed).
    @Null package var worker: String? = nil

    /// A row of these values.
    package init(
        id: String, name: String, kind: String?, status: String, label: String? = nil, failedSteps: Int = 0,
        progress: Double?, rate: Double?, left: Double?, step: String?, attempt: Int, updated: Date, depth: Int
    ) {
        self.id = id
        self.name = name
        self.kind = kind
        self.status = status
        self.label = label ?? status
        self.failedSteps = failedSteps
        self.progress = progress
        percent = status == TaskStatus.completed.rawValue ? "100%" : Format.percent(progress)
        self.rate = Format.rate(rate)
        self.left = Format.timeLeft(left)
        self.step = step
        self.attempt = attempt
        self.updated = Format.time(updated)
        self.depth = depth
        summary = nil
    }

    /// The row of `task`, `depth` levels below the task of the page.
    package init(_ task: TaskRecord, depth: Int = 0, failedSteps: Int = 0) {
        let rates = ProgressRates()
        self.init(
            id: task.id, name: task.name, kind: task.kind, status: task.status.rawValue, label: task.displayStatus,
            failedSteps: failedSteps, progress: task.progress,
            rate: rates.rate(of: task), left: rates.timeLeft(of: task), step: task.step, attempt: task.attempt,
            updated: task.updatedAt, depth: depth)
    }

    /// The row of a task as `--json` showed it.
    package init(record task: TaskJSON, failedSteps: Int = 0) {
        self.init(
            id: task.id, name: task.name, kind: task.kind, status: task.status, failedSteps: failedSteps,
            progress: task.progress, rate: task.rate, left: task.secondsRemaining, step: task.step, attempt: task.attempt,
            updated: task.updatedAt, depth: task.depth ?? 0)
    }

    /// A count line below a parent.
    package init(summary: String, parentID: String, depth: Int) {
        self.init(
            id: parentID + "/…", name: "", kind: nil, status: "", progress: nil, rate: nil, left: nil, step: nil,
            attempt: 0, updated: Date(timeIntervalSince1970: 0), depth: depth)
        percent = ""
        rate = ""
        left = ""
        updated = ""
        self.summary = summary
    }
}

/// The list's live payload.
package struct ListLiveJSON: Encodable, Sendable, Equatable {
    package var rows: [LiveRowJSON]
    package var footer: String
}

/// The job page's live payload: its root's status (the page reloads when it changes) and the rows of its tree.
package struct JobLiveJSON: Encodable, Sendable, Equatable {
    package var status: String
    package var rows: [LiveRowJSON]
}

/// The overview's live payload.
package struct OverviewLiveJSON: Encodable, Sendable, Equatable {
    package var byStatus: [String: Int]
    package var total: Int
    @Null package var throughput: [OutcomesPerMinute.Minute]?
    package var running: [LiveRowJSON]
}
#endif
