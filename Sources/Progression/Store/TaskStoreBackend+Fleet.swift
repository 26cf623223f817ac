import Foundation

/// What the store keeps of a job kind that a worker registered.
package struct StoredKind: Sendable, Hashable {
    /// The options its jobs get unless their submit gives others.
    package var options: TaskOptions
    /// At most this many of its jobs run at once across every worker on the database; `nil`: no limit of its own.
    package var maxConcurrent: Int?

    package init(options: TaskOptions, maxConcurrent: Int? = nil) {
        self.options = options
        self.maxConcurrent = maxConcurrent
    }
}

/// What a worker does with the ticks of a schedule that passed while no worker ran it (the fleet was down, or the
/// schedule was declared late).
public enum MissedTicks: Sendable, Hashable, CustomStringConvertible {
    /// Run nothing for them; the next tick runs as usual. The default: a worker that was down for a week does not
    /// start a week of jobs.
    case skip
    /// Run one job for all of them (for the newest).
    case runOnce
    /// Run one job for each of them, at most `max` (the newest).
    case runEach(max: Int)

    /// How it is stored: `skip`, `once` or `each`.
    package var storedName: String {
        switch self {
        case .skip: "skip"
        case .runOnce: "once"
        case .runEach: "each"
        }
    }

    /// The bound of `runEach`; 1 otherwise.
    package var storedMaximum: Int {
        if case .runEach(let max) = self { return max }
        return 1
    }

    /// The policy as stored.
    package init?(storedName: String, maximum: Int) {
        switch storedName {
        case "skip": self = .skip
        case "once": self = .runOnce
        case "each": self = .runEach(max: max(1, maximum))
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .skip: "skip"
        case .runOnce: "run once"
        case .runEach(let max): "run each (at most \(max))"
        }
    }
}

/// A periodic job as the store keeps it.
package struct ScheduleRecord: Sendable, Hashable {
    package var name: String
    package var kind: String
    package var input: Data?
    /// The cron expression as written.
    package var cron: String
    /// The time zone's identifier.
    package var timeZone: String
    package var missed: MissedTicks
    /// The jobs' name (`nil`: the schedule's), options (`nil`: the kind's) and priority.
    package var jobName: String?
    package var options: TaskOptions?
    package var priority: Int
    package var paused: Bool
    /// The next tick; its job is made once it has passed.
    package var nextFireAt: Date
    package var lastFireAt: Date?
    package var lastJobID: String?
    /// The owner that last declared it.
    package var declaredBy: String?
    package var updatedAt: Date

    package init(
        name: String, kind: String, input: Data?, cron: String, timeZone: String, missed: MissedTicks,
        jobName: String? = nil, options: TaskOptions? = nil, priority: Int = 0, paused: Bool = false,
        nextFireAt: Date, lastFireAt: Date? = nil, lastJobID: String? = nil, declaredBy: String? = nil, updatedAt: Date
    ) {
        self.name = name
        self.kind = kind
        self.input = input
        self.cron = cron
        self.timeZone = timeZone
        self.missed = missed
        self.jobName = jobName
        self.options = options
        self.priority = priority
        self.paused = paused
        self.nextFireAt = nextFireAt
        self.lastFireAt = lastFireAt
        self.lastJobID = lastJobID
        self.declaredBy = declaredBy
        self.updatedAt = updatedAt
    }

    /// Whether `other` declares the same ticks (the same expression in the same zone): a redeclaration keeps the
    /// stored next tick and pause then.
    package func hasSameTicks(as other: ScheduleRecord) -> Bool {
        cron == other.cron && timeZone == other.timeZone
    }
}

/// A tick of a schedule to fire: its jobs are inserted and its next tick moved on in one transaction, only while the
/// stored next tick is still `expectedNextFireAt` (another worker did not fire it first).
package struct ScheduleFire: Sendable, Hashable {
    package var name: String
    package var expectedNextFireAt: Date
    package var nextFireAt: Date
    /// The newest tick fired (`nil` when every passed tick was skipped).
    package var firedTick: Date?
    package var jobs: [TaskRecord]
    package var events: [TaskEvent]

    package init(
        name: String, expectedNextFireAt: Date, nextFireAt: Date, firedTick: Date?, jobs: [TaskRecord],
        events: [TaskEvent]
    ) {
        self.name = name
        self.expectedNextFireAt = expectedNextFireAt
        self.nextFireAt = nextFireAt
        self.firedTick = firedTick
        self.jobs = jobs
        self.events = events
    }
}

/// The fleet's and time's part of the write side: kinds with limits and pauses, waiting jobs, schedules.
package protocol FleetStore: Sendable {
    /// Records the job kinds an executor registered (replacing what was recorded for them).
    func saveKinds(_ kinds: [String: StoredKind], at date: Date) async throws

    /// The job kinds executors registered.
    func registeredKinds() async throws -> [String: StoredKind]

    /// Pauses (no new job of it starts on any worker) or resumes a kind. Returns whether that changed anything.
    func setKindPaused(_ kind: String, paused: Bool, at date: Date) async throws -> Bool

    /// The kinds paused, with when.
    func pausedKinds() async throws -> [String: Date]

    /// The earliest time after `date` at which an unfinished root waits to run (a run-at, a retry's backoff, the end
    /// of a durable sleep); `nil` when none waits.
    func nextWaitingTime(after date: Date) async throws -> Date?

    /// Records schedules a worker declared: a new one is stored as given; one stored with the same expression and zone
    /// keeps its next tick and pause (the rest is replaced); one whose ticks changed takes the given next tick.
    /// Returns them as stored.
    func saveSchedules(_ schedules: [ScheduleRecord], at date: Date) async throws -> [ScheduleRecord]

    /// Every schedule, by name.
    func schedules() async throws -> [ScheduleRecord]

    /// The schedules that run (not paused) whose next tick is at or before `date`, earliest first, at most `limit`.
    func dueSchedules(at date: Date, limit: Int) async throws -> [ScheduleRecord]

    /// The earliest next tick after `date` of the schedules that run; `nil` when none.
    func earliestScheduleTick(after date: Date) async throws -> Date?

    /// Fires a tick: see ``ScheduleFire``. Returns whether it did (`false`: another worker fired it first, and
    /// nothing was written).
    func fireSchedule(_ fire: ScheduleFire) async throws -> Bool

    /// Pauses or resumes a schedule; a resume moves its next tick to `nextFireAt` (the ticks it missed while paused are
    /// not run). Returns the schedule as stored now, `nil` when there is none of that name.
    func setSchedulePaused(_ name: String, paused: Bool, nextFireAt: Date?, at date: Date) async throws
        -> ScheduleRecord?

    /// Deletes a schedule (its jobs stay). Returns whether there was one.
    func removeSchedule(_ name: String) async throws -> Bool

    /// Deletes the owners among `ids` (dead ones) that hold no unfinished root: every claim would read them again,
    /// and a service that restarts often leaves one per run. Their finished tasks keep the id; their history stays.
    /// Returns how many were deleted.
    func forgetIdleOwners(_ ids: [String]) async throws -> Int
}

extension ScheduleFire {
    /// The ticks of `schedule` that are due at `now` and the jobs to make for them under its policy for missed ticks,
    /// with its next tick: ticks older than `grace` at `now` count as missed.
    ///
    /// - Parameter makeJob: the job (and its creation event) for a tick.
    package static func plan(
        _ schedule: ScheduleRecord, expression: CronExpression, zone: TimeZone, now: Date, grace: Duration,
        makeJob: (Date) throws -> (TaskRecord, TaskEvent)
    ) rethrows -> ScheduleFire {
        // The newest passed ticks (each policy uses at most `keep` of them), found by walking from a lookback that
        // doubles until it holds that many or reaches the stored next tick: a schedule of every minute that missed a
        // year is not walked tick by tick.
        let keep = max(1, schedule.missed.storedMaximum)
        var due: [Date] = []
        if schedule.nextFireAt <= now {
            var lookback: TimeInterval = 3_600
            while true {
                let start = max(schedule.nextFireAt, now.addingTimeInterval(-lookback))
                due = []
                var tick: Date? = start == schedule.nextFireAt ? start : expression.nextFire(after: start, in: zone)
                while let current = tick, current <= now {
                    due.append(current)
                    if due.count > keep { due.removeFirst() }
                    tick = expression.nextFire(after: current, in: zone)
                }
                if due.count >= keep || start == schedule.nextFireAt { break }
                lookback *= 4
            }
        }
        let next =
            schedule.nextFireAt > now ? schedule.nextFireAt : (expression.nextFire(after: now, in: zone) ?? .distantFuture)
        let onTime = due.last.map { now.timeIntervalSince($0) <= grace.seconds } ?? false
        let fired: [Date]
        switch schedule.missed {
        case .skip: fired = onTime ? Array(due.suffix(1)) : []
        case .runOnce: fired = Array(due.suffix(1))
        case .runEach(let max): fired = Array(due.suffix(max))
        }
        var jobs: [TaskRecord] = []
        var events: [TaskEvent] = []
        for tick in fired {
            let (job, event) = try makeJob(tick)
            jobs.append(job)
            events.append(event)
        }
        return ScheduleFire(
            name: schedule.name, expectedNextFireAt: schedule.nextFireAt, nextFireAt: next, firedTick: fired.last,
            jobs: jobs, events: events)
    }

    /// The idempotency key of a schedule's job for a tick: a second insert for the tick (by any worker) is refused by
    /// the store's unique key, so a tick makes one job even if a compare-and-set were bypassed.
    package static func idempotencyKey(schedule: String, tick: Date) -> String {
        "schedule:\(schedule):\(tick.storedMilliseconds)"
    }
}
