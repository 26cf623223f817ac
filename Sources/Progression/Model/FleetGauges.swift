import Foundation

/// What an operator alerts on, read from the store for the whole fleet: jobs by kind and state, how long the oldest
/// job ready to run has waited (the queue's latency), live workers, slots, and how late schedules fire.
///
/// Executors publish it as swift-metrics gauges (``TaskExecutor/Configuration/gaugeInterval``; one executor of the
/// fleet at a time reads and reports it), and the console serves it in Prometheus's text format on `/metrics`.
public struct FleetGauges: Sendable, Hashable, Codable {
    /// The states a job is counted in.
    public enum State: String, Sendable, Hashable, Codable, CaseIterable {
        /// Ready to run, waiting for a worker with a free slot of its kind.
        case pending
        /// Due later: a delayed job, a durable sleep, a retry's backoff.
        case scheduled
        /// Waiting for child jobs, other jobs or a signal.
        case waiting
        case running
        case paused
        /// Failed (and still kept by the retention).
        case failed
    }

    /// The jobs of one kind (`""`: closure tasks).
    public struct Kind: Sendable, Hashable, Codable {
        /// Jobs by state (every state present, 0 when none).
        public var jobs: [String: Int]
        /// Seconds since the oldest job ready to run became ready (its due time, or the last change of its row: a
        /// release, a retry, a resume); 0 when none is, or when its kind is paused (no worker may take it).
        public var oldestReadySeconds: Double
        /// Running jobs past their stall limit (``StallRule``), counted among the running ones too.
        public var stalled: Int

        public init(jobs: [String: Int] = [:], oldestReadySeconds: Double = 0, stalled: Int = 0) {
            var all: [String: Int] = [:]
            for state in State.allCases { all[state.rawValue] = jobs[state.rawValue] ?? 0 }
            self.jobs = all
            self.oldestReadySeconds = oldestReadySeconds
            self.stalled = stalled
        }

        /// The jobs in `state`.
        public subscript(state: State) -> Int {
            get { jobs[state.rawValue] ?? 0 }
            set { jobs[state.rawValue] = newValue }
        }
    }

    /// When it was read.
    public var readAt: Date
    /// By job kind.
    public var kinds: [String: Kind]
    /// Executors whose heartbeat is fresh and that did not stop.
    public var liveWorkers: Int
    /// The live workers' slots (their `maxConcurrentTasks`), and those taken by running jobs.
    public var slots: Int
    public var usedSlots: Int
    /// Seconds the latest schedule is late (its next fire time passed and it has not fired); 0 when none is.
    public var scheduleLagSeconds: Double

    /// Free slots of live workers.
    public var freeSlots: Int { max(0, slots - usedSlots) }

    public init(
        readAt: Date, kinds: [String: Kind] = [:], liveWorkers: Int = 0, slots: Int = 0, usedSlots: Int = 0,
        scheduleLagSeconds: Double = 0
    ) {
        self.readAt = readAt
        self.kinds = kinds
        self.liveWorkers = liveWorkers
        self.slots = slots
        self.usedSlots = usedSlots
        self.scheduleLagSeconds = scheduleLagSeconds
    }
}

/// A group of unfinished roots as a store counts them for ``FleetGauges``.
package struct UnfinishedRootGroup: Sendable, Hashable {
    /// The job kind (`""`: closure tasks).
    package var kind: String
    package var status: TaskStatus
    /// Whether they wait for children, jobs or a signal.
    package var waiting: Bool
    /// Whether their next attempt time (if any) has come.
    package var due: Bool
    package var count: Int
    /// The earliest of their next attempt time, or creation when they have none.
    package var earliest: Date?

    package init(kind: String, status: TaskStatus, waiting: Bool, due: Bool, count: Int, earliest: Date?) {
        self.kind = kind
        self.status = status
        self.waiting = waiting
        self.due = due
        self.count = count
        self.earliest = earliest
    }
}

extension FleetGauges {
    /// The gauges from what a store counted, its owners and schedules, at `now`.
    package init(
        now: Date, unfinished: [UnfinishedRootGroup], failedByKind: [String: Int], owners: [OwnerRecord],
        schedules: [ScheduleRecord], pausedKinds: Set<String> = [], running: [TaskRecord] = [],
        ownerStaleAfter: Duration
    ) {
        var kinds: [String: Kind] = [:]
        for job in running where job.stalledFor(at: now) != nil {
            kinds[job.kind ?? "", default: Kind()].stalled += 1
        }
        var running = 0
        for group in unfinished {
            var kind = kinds[group.kind] ?? Kind()
            let state: State
            switch group.status {
            case .running: state = .running
            case .paused: state = .paused
            default:
                if group.waiting {
                    state = .waiting
                } else if !group.due {
                    state = .scheduled
                } else {
                    state = .pending
                    if let earliest = group.earliest, !pausedKinds.contains(group.kind) {
                        kind.oldestReadySeconds = max(kind.oldestReadySeconds, now.timeIntervalSince(earliest))
                    }
                }
            }
            kind[state] += group.count
            if state == .running { running += group.count }
            kinds[group.kind] = kind
        }
        for (name, count) in failedByKind {
            var kind = kinds[name] ?? Kind()
            kind[.failed] += count
            kinds[name] = kind
        }
        let freshSince = now.addingTimeInterval(-ownerStaleAfter.seconds)
        let live = owners.filter { $0.stoppedAt == nil && $0.heartbeatAt >= freshSince }
        var lag = 0.0
        for schedule in schedules where !schedule.paused {
            lag = max(lag, now.timeIntervalSince(schedule.nextFireAt))
        }
        self.init(
            readAt: now, kinds: kinds, liveWorkers: live.count, slots: live.compactMap(\.slots).reduce(0, +),
            usedSlots: running, scheduleLagSeconds: lag)
    }

    /// The most running jobs whose stall rules one read of the gauges looks at.
    static let runningJobsRead = 10_000

    /// Reads the gauges of the store at `now`.
    package static func read(
        from store: some TaskStoreBackend, at now: Date, ownerStaleAfter: Duration
    ) async throws -> FleetGauges {
        let counts = try await store.gaugeCounts(at: now)
        // The running jobs, for their stall rules (as many as the fleet has busy slots).
        let running = try await store.roots(TaskQuery(statuses: [.running], limit: Self.runningJobsRead))
        return FleetGauges(
            now: now, unfinished: counts.unfinished, failedByKind: counts.failedByKind, owners: try await store.owners(),
            schedules: try await store.schedules(), pausedKinds: Set(try await store.pausedKinds().keys),
            running: running, ownerStaleAfter: ownerStaleAfter)
    }

    /// The Prometheus text format (0.0.4) of the gauges: `progression_jobs{kind,state}`,
    /// `progression_oldest_ready_job_age_seconds{kind}`, `progression_jobs_stalled{kind}`, `progression_workers_live`, `progression_slots{state}` and
    /// `progression_schedule_lag_seconds`.
    public var prometheusText: String {
        func label(_ value: String) -> String {
            value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                .replacingOccurrences(of: "\n", with: "\\n")
        }
        func number(_ value: Double) -> String {
            value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
        }
        var lines: [String] = []
        lines.append("# HELP progression_jobs Jobs by kind and state (failed: kept by the retention).")
        lines.append("# TYPE progression_jobs gauge")
        for (name, kind) in kinds.sorted(by: { $0.key < $1.key }) {
            for state in State.allCases {
                lines.append("progression_jobs{kind=\"\(label(name))\",state=\"\(state.rawValue)\"} \(kind[state])")
            }
        }
        lines.append("# HELP progression_oldest_ready_job_age_seconds Seconds the oldest job ready to run has waited.")
        lines.append("# TYPE progression_oldest_ready_job_age_seconds gauge")
        for (name, kind) in kinds.sorted(by: { $0.key < $1.key }) {
            lines.append("progression_oldest_ready_job_age_seconds{kind=\"\(label(name))\"} \(number(kind.oldestReadySeconds))")
        }
        lines.append("# HELP progression_jobs_stalled Running jobs that did not move for their stall limit.")
        lines.append("# TYPE progression_jobs_stalled gauge")
        for (name, kind) in kinds.sorted(by: { $0.key < $1.key }) {
            lines.append("progression_jobs_stalled{kind=\"\(label(name))\"} \(kind.stalled)")
        }
        lines.append("# HELP progression_workers_live Executors with a fresh heartbeat.")
        lines.append("# TYPE progression_workers_live gauge")
        lines.append("progression_workers_live \(liveWorkers)")
        lines.append("# HELP progression_slots Slots of live executors, used by running jobs or free.")
        lines.append("# TYPE progression_slots gauge")
        lines.append("progression_slots{state=\"used\"} \(usedSlots)")
        lines.append("progression_slots{state=\"free\"} \(freeSlots)")
        lines.append("# HELP progression_schedule_lag_seconds Seconds the latest schedule is late to fire.")
        lines.append("# TYPE progression_schedule_lag_seconds gauge")
        lines.append("progression_schedule_lag_seconds \(number(scheduleLagSeconds))")
        return lines.joined(separator: "\n") + "\n"
    }
}
