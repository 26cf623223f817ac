import Foundation
import MetricsTestKit
import Progression
import ProgressionTestSupport
import Testing

/// The fleet's gauges (issue 37): what the store counts, how it reads as gauges (alone, as a table), the Prometheus
/// text, and one executor of a fleet recording them through swift-metrics.
struct GaugeTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    // MARK: Alone

    @Test func groupsOwnersAndSchedulesReadAsGauges() {
        let groups = [
            UnfinishedRootGroup(kind: "a", status: .pending, waiting: false, due: true, count: 3, earliest: now - 40),
            UnfinishedRootGroup(kind: "a", status: .pending, waiting: false, due: false, count: 2, earliest: now + 60),
            UnfinishedRootGroup(kind: "a", status: .pending, waiting: true, due: false, count: 1, earliest: now),
            UnfinishedRootGroup(kind: "a", status: .running, waiting: false, due: true, count: 4, earliest: now - 5),
            UnfinishedRootGroup(kind: "b", status: .paused, waiting: false, due: true, count: 1, earliest: now - 500),
            UnfinishedRootGroup(kind: "b", status: .running, waiting: false, due: true, count: 1, earliest: now - 9),
            UnfinishedRootGroup(kind: "held", status: .pending, waiting: false, due: true, count: 2, earliest: now - 900),
        ]
        let owners = [
            OwnerRecord(id: "live", host: "h", pid: 1, startedAt: now - 100, heartbeatAt: now - 2, slots: 8),
            OwnerRecord(id: "stale", host: "h", pid: 2, startedAt: now - 100, heartbeatAt: now - 60, slots: 8),
            OwnerRecord(
                id: "stopped", host: "h", pid: 3, startedAt: now - 100, heartbeatAt: now - 1, stoppedAt: now - 1, slots: 8),
        ]
        func schedule(_ name: String, late: Double, paused: Bool) -> ScheduleRecord {
            ScheduleRecord(
                name: name, kind: "a", input: nil, cron: "* * * * *", timeZone: "UTC", missed: .skip, jobName: nil,
                options: nil, priority: 0, paused: paused, nextFireAt: now - late, lastFireAt: nil, lastJobID: nil,
                declaredBy: nil, updatedAt: now)
        }
        let gauges = FleetGauges(
            now: now, unfinished: groups, failedByKind: ["b": 7, "c": 1], owners: owners,
            schedules: [schedule("late", late: 30, paused: false), schedule("paused", late: 900, paused: true)],
            pausedKinds: ["held"], ownerStaleAfter: .seconds(15))
        let a = gauges.kinds["a"] ?? .init()
        #expect(a[.pending] == 3 && a[.scheduled] == 2 && a[.waiting] == 1 && a[.running] == 4 && a[.failed] == 0)
        #expect(a.oldestReadySeconds == 40)
        let b = gauges.kinds["b"] ?? .init()
        #expect(b[.paused] == 1 && b[.running] == 1 && b[.failed] == 7 && b.oldestReadySeconds == 0)
        #expect(gauges.kinds["c"]?[.failed] == 1)
        #expect(gauges.kinds["held"]?[.pending] == 2 && gauges.kinds["held"]?.oldestReadySeconds == 0, "a paused kind")
        #expect(gauges.liveWorkers == 1 && gauges.slots == 8 && gauges.usedSlots == 5 && gauges.freeSlots == 3)
        #expect(gauges.scheduleLagSeconds == 30, "a paused schedule is not late")
    }

    @Test func thePrometheusTextHasEveryGaugeWithEscapedLabels() {
        var kind = FleetGauges.Kind(oldestReadySeconds: 12.5)
        kind[.pending] = 2
        let gauges = FleetGauges(
            readAt: now, kinds: ["say \"hi\"": kind], liveWorkers: 2, slots: 16, usedSlots: 3, scheduleLagSeconds: 0)
        let lines = gauges.prometheusText.split(separator: "\n").map(String.init)
        #expect(lines.contains(#"progression_jobs{kind="say \"hi\"",state="pending"} 2"#))
        #expect(lines.contains(#"progression_jobs{kind="say \"hi\"",state="failed"} 0"#))
        #expect(lines.contains(#"progression_oldest_ready_job_age_seconds{kind="say \"hi\""} 12.5"#))
        #expect(lines.contains("progression_workers_live 2"))
        #expect(lines.contains(#"progression_slots{state="used"} 3"#) && lines.contains(#"progression_slots{state="free"} 13"#))
        #expect(lines.contains("progression_schedule_lag_seconds 0"))
        for name in [
            "progression_jobs", "progression_oldest_ready_job_age_seconds", "progression_workers_live",
            "progression_slots", "progression_schedule_lag_seconds",
        ] {
            #expect(lines.contains("# TYPE \(name) gauge"), "\(name)")
        }
    }

    // MARK: The store's share

    @Test(arguments: StoreKind.allCases)
    func theStoreCountsJobsByKindAndState(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        var ready = makeRecord(id: "ready", createdAt: now - 30, kind: "a")
        ready.nextAttemptAt = nil
        var later = makeRecord(id: "later", createdAt: now - 30, kind: "a")
        later.nextAttemptAt = now + 600
        var retrying = makeRecord(id: "retrying", createdAt: now - 300, kind: "a")
        retrying.nextAttemptAt = now - 10
        var waiting = makeRecord(id: "waiting", createdAt: now - 30, kind: "a")
        waiting.wait = .signal("go")
        waiting.nextAttemptAt = JobWait.untilReleased
        let running = makeRecord(id: "running", status: .running, createdAt: now - 30, owner: "w", kind: "b")
        let paused = makeRecord(id: "paused", status: .paused, createdAt: now - 30, kind: "b")
        let failed = makeRecord(id: "failed", status: .failed, createdAt: now - 30, kind: "b")
        let done = makeRecord(id: "done", status: .completed, createdAt: now - 30, kind: "b")
        let closure = makeRecord(id: "closure", createdAt: now - 5)
        try await store.insert([ready, later, retrying, waiting, running, paused, failed, done, closure], events: [])
        try await store.saveOwner(
            OwnerRecord(id: "w", host: "h", pid: 1, startedAt: now - 60, heartbeatAt: now - 1, kinds: ["a", "b"], slots: 4))
        let gauges = try await FleetGauges.read(from: store, at: now, ownerStaleAfter: .seconds(15))
        let a = gauges.kinds["a"] ?? .init()
        #expect(a[.pending] == 2 && a[.scheduled] == 1 && a[.waiting] == 1, "\(a)")
        #expect(a.oldestReadySeconds == 30, "the oldest ready: created 30 s ago (the retry is due since 10 s)")
        let b = gauges.kinds["b"] ?? .init()
        #expect(b[.running] == 1 && b[.paused] == 1 && b[.failed] == 1 && b[.pending] == 0, "\(b)")
        #expect(gauges.kinds[""]?[.pending] == 1)
        #expect(gauges.liveWorkers == 1 && gauges.slots == 4 && gauges.usedSlots == 1)
    }

    // MARK: Executors

    @Test func oneExecutorOfTheFleetRecordsTheGaugesAndAnotherTakesOverWhenItStops() async throws {
        let clock = ManualClock()
        let database = try SharedDatabase(.sqlite)
        var recorders: [TestMetrics] = []
        var workers: [TaskExecutor] = []
        for name in ["a", "b"] {
            let metrics = TestMetrics()
            let worker = try database.worker(slots: 3, clock: clock) {
                $0.metricsFactory = metrics
                $0.gaugeInterval = .seconds(10)
            }
            try worker.register(Doubler(worker: name))
            try await worker.start()
            recorders.append(metrics)
            workers.append(worker)
        }
        let producer = try database.producer(clock: clock)
        _ = try await producer.submit(Doubler.self, input: .init(n: 1), options: JobOptions(delay: .seconds(3_600)))
        func jobs(_ metrics: TestMetrics, _ state: String) -> Double? {
            try? metrics.expectGauge("progression.jobs", [("kind", "double"), ("state", state)]).lastValue
        }
        try await poll("one executor to record the gauges") {
            clock.advance(by: .seconds(1))
            return recorders.contains { jobs($0, "scheduled") == 1 }
        }
        let reporter = try #require(recorders.firstIndex { jobs($0, "scheduled") == 1 })
        let other = 1 - reporter
        #expect(try recorders[reporter].expectGauge("progression.workers.live").lastValue == 2)
        #expect(try recorders[reporter].expectGauge("progression.slots", [("state", "free")]).lastValue == 6)
        #expect(jobs(recorders[other], "scheduled") == nil, "the other executor records none")
        await workers[reporter].shutdown()
        try await poll("the other executor to take over") {
            clock.advance(by: .seconds(1))
            return jobs(recorders[other], "scheduled") == 1
        }
        await workers[other].shutdown()
        await database.closeAll()
    }
}
