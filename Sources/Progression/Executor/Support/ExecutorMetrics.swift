import CoreMetrics
import Foundation
import Metrics
import Synchronization

/// The executor's metrics (swift-metrics), all labelled `progression.…`. Job kinds are a dimension (`kind`;
/// `closure` for closure tasks). Counted for roots (submitted work), not for their steps:
///
/// | label | type | dimensions | what |
/// |---|---|---|---|
/// | `progression.tasks.submitted` | counter | kind | roots added or submitted here |
/// | `progression.tasks.started` | counter | kind | attempts started (a retry starts one more) |
/// | `progression.tasks.completed` | counter | kind | roots that completed |
/// | `progression.tasks.failed` | counter | kind | roots that failed for good |
/// | `progression.tasks.retried` | counter | kind | attempts after the first (automatic or asked for) |
/// | `progression.tasks.cancelled` | counter | kind | roots cancelled |
/// | `progression.tasks.duration` | timer | kind, outcome | an attempt's run time, start to end |
/// | `progression.tasks.queue_wait` | timer | kind | creation (or the due time of a retry) to start |
/// | `progression.recovery.claimed` | counter | – | roots claimed from dead owners or nobody |
/// | `progression.writer.commit_duration` | timer | – | one batch written and committed |
/// | `progression.writer.batch_size` | recorder | – | rows and events in a batch |
/// | `progression.writer.failures` | counter | – | batches the store refused (tried again) |
/// | `progression.retention.deleted` | counter | status | finished jobs this executor deleted (``RetentionPolicy``) |
final class ExecutorMetrics: Sendable {
    /// The metrics of one job kind (a class: a job takes it three times, and a copy of the struct was nine
    /// retains).
    final class Kind: Sendable {
        let submitted, started, completed, failed, retried, cancelled: Counter
        let queueWait: Timer
        let durations: [String: Timer]

        init(_ kind: String, factory: any MetricsFactory) {
            let dimensions = [("kind", kind)]
            submitted = Counter(label: "progression.tasks.submitted", dimensions: dimensions, factory: factory)
            started = Counter(label: "progression.tasks.started", dimensions: dimensions, factory: factory)
            completed = Counter(label: "progression.tasks.completed", dimensions: dimensions, factory: factory)
            failed = Counter(label: "progression.tasks.failed", dimensions: dimensions, factory: factory)
            retried = Counter(label: "progression.tasks.retried", dimensions: dimensions, factory: factory)
            cancelled = Counter(label: "progression.tasks.cancelled", dimensions: dimensions, factory: factory)
            queueWait = Timer(label: "progression.tasks.queue_wait", dimensions: dimensions, factory: factory)
            var durations: [String: Timer] = [:]
            for outcome in ["completed", "failed", "cancelled", "released", "retrying"] {
                durations[outcome] = Timer(
                    label: "progression.tasks.duration", dimensions: dimensions + [("outcome", outcome)],
                    factory: factory)
            }
            self.durations = durations
        }
    }

    let factory: any MetricsFactory
    private let kinds = Mutex<[String: Kind]>([:])
    let claimed: Counter
    let commitDuration: Timer
    let batchSize: Recorder
    let writerFailures: Counter
    /// Jobs deleted by the retention, by the status they finished with.
    let retentionDeleted: [TaskStatus: Counter]

    init(factory: any MetricsFactory) {
        self.factory = factory
        claimed = Counter(label: "progression.recovery.claimed", factory: factory)
        commitDuration = Timer(label: "progression.writer.commit_duration", factory: factory)
        batchSize = Recorder(label: "progression.writer.batch_size", factory: factory)
        writerFailures = Counter(label: "progression.writer.failures", factory: factory)
        var deleted: [TaskStatus: Counter] = [:]
        for status in TaskStatus.allCases where status.isFinished {
            deleted[status] = Counter(
                label: "progression.retention.deleted", dimensions: [("status", status.rawValue)], factory: factory)
        }
        retentionDeleted = deleted
    }

    /// The metrics of a kind (`nil`: closure tasks), made once.
    func kind(_ name: String?) -> Kind {
        let name = name ?? "closure"
        return kinds.withLock { kinds in
            if let existing = kinds[name] { return existing }
            let made = Kind(name, factory: factory)
            kinds[name] = made
            return made
        }
    }
}

/// The fleet's gauges as swift-metrics gauges, while this executor reports them:
///
/// | label | dimensions | what |
/// |---|---|---|
/// | `progression.jobs` | kind, state | jobs by state: pending, scheduled, waiting, running, paused, failed |
/// | `progression.jobs.oldest_ready_seconds` | kind | seconds the oldest job ready to run has waited |
/// | `progression.workers.live` | – | executors with a fresh heartbeat |
/// | `progression.slots` | state | slots of live executors: used, free |
/// | `progression.schedules.lag_seconds` | – | how late the latest schedule is |
///
/// Only the executor holding the fleet's turn records them; one that loses it destroys its gauges, so that a backend
/// never shows two reporters' values.
final class FleetGaugeReporter: Sendable {
    private let factory: any MetricsFactory
    private let gauges = Mutex<[String: Gauge]>([:])
    /// The kinds recorded so far: one whose jobs are all gone reads 0, not its last value.
    private let kinds = Mutex<Set<String>>([])

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    private func gauge(_ label: String, _ dimensions: [(String, String)]) -> Gauge {
        let key = ([label] + dimensions.map { "\($0.0)=\($0.1)" }).joined(separator: "\u{1}")
        return gauges.withLock { gauges in
            if let existing = gauges[key] { return existing }
            let made = Gauge(label: label, dimensions: dimensions, factory: factory)
            gauges[key] = made
            return made
        }
    }

    func record(_ fleet: FleetGauges) {
        let known = kinds.withLock { kinds in
            kinds.formUnion(fleet.kinds.keys)
            return kinds
        }
        for kind in known {
            let counts = fleet.kinds[kind] ?? FleetGauges.Kind()
            for state in FleetGauges.State.allCases {
                gauge("progression.jobs", [("kind", kind), ("state", state.rawValue)]).record(counts[state])
            }
            gauge("progression.jobs.oldest_ready_seconds", [("kind", kind)]).record(counts.oldestReadySeconds)
            gauge("progression.jobs.stalled", [("kind", kind)]).record(counts.stalled)
        }
        gauge("progression.workers.live", []).record(fleet.liveWorkers)
        gauge("progression.slots", [("state", "used")]).record(fleet.usedSlots)
        gauge("progression.slots", [("state", "free")]).record(fleet.freeSlots)
        gauge("progression.schedules.lag_seconds", []).record(fleet.scheduleLagSeconds)
    }

    /// Destroys the gauges recorded so far (another executor reports them now).
    func stop() {
        let recorded = gauges.withLock { gauges in
            defer { gauges.removeAll() }
            return Array(gauges.values)
        }
        kinds.withLock { $0.removeAll() }
        for gauge in recorded { gauge.destroy() }
    }
}
