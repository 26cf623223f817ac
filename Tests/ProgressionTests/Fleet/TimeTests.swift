import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Time on a manual clock (issue 23): what a schedule does with missed ticks, delayed jobs, durable sleeps and a
/// schedule fired by three executors, all driven by advancing the clock rather than by waiting.
@Suite struct TimeTests {
    // MARK: Missed ticks

    struct MissedCase: Sendable, CustomTestStringConvertible {
        var policy: MissedTicks
        /// Minutes after the stored next tick (the schedule ticks every 5 minutes).
        var nowMinutes: Double
        /// Fired ticks, as minutes after the stored next tick.
        var fired: [Int]
        var testDescription: String { "\(policy) at +\(nowMinutes) min" }
    }

    static let missedCases: [MissedCase] = [
        // On time (the newest due tick 30 s ago, within the minute's grace): every policy fires it.
        MissedCase(policy: .skip, nowMinutes: 70.5, fired: [70]),
        MissedCase(policy: .runOnce, nowMinutes: 70.5, fired: [70]),
        // Late (2 minutes): skip fires nothing, once fires the newest, each the newest few.
        MissedCase(policy: .skip, nowMinutes: 72, fired: []),
        MissedCase(policy: .runOnce, nowMinutes: 72, fired: [70]),
        MissedCase(policy: .runEach(max: 3), nowMinutes: 72, fired: [60, 65, 70]),
        MissedCase(policy: .runEach(max: 100), nowMinutes: 72, fired: Array(stride(from: 0, through: 70, by: 5))),
        // Not due yet: nothing.
        MissedCase(policy: .runEach(max: 5), nowMinutes: -1, fired: []),
    ]

    @Test(arguments: missedCases)
    func missedTicksFollowTheSchedulesPolicy(_ missed: MissedCase) throws {
        let expression = try CronExpression("*/5 * * * *")
        let start = Date(timeIntervalSince1970: 1_795_651_200)  // 2026-11-26T00:00:00Z
        let schedule = ScheduleRecord(
            name: "s", kind: "k", input: nil, cron: expression.source, timeZone: "UTC", missed: missed.policy,
            nextFireAt: start, updatedAt: start)
        let now = start.addingTimeInterval(missed.nowMinutes * 60)
        let plan = ScheduleFire.plan(
            schedule, expression: expression, zone: TimeZone(identifier: "UTC")!, now: now, grace: .seconds(60)
        ) { tick in
            let job = TaskRecord(id: "j\(tick.timeIntervalSince(start))", name: "s", kind: "k", createdAt: now)
            return (job, TaskEvent(taskID: job.id, rootID: job.id, kind: .created, at: now, attempt: 1))
        }
        #expect(plan.jobs.map { Int(Double($0.id.dropFirst())! / 60) } == missed.fired)
        #expect(plan.expectedNextFireAt == start)
        let next = missed.nowMinutes < 0 ? 0 : (Int(missed.nowMinutes) / 5 + 1) * 5
        #expect(plan.nextFireAt == start.addingTimeInterval(Double(next) * 60))
    }

    @Test func aYearOfMissedMinutesIsNotWalkedTickByTick() throws {
        let expression = try CronExpression("* * * * *")
        let start = Date(timeIntervalSince1970: 1_795_651_200)
        let schedule = ScheduleRecord(
            name: "s", kind: "k", input: nil, cron: expression.source, timeZone: "UTC", missed: .runEach(max: 5),
            nextFireAt: start, updatedAt: start)
        let now = start.addingTimeInterval(365 * 86_400 + 30)
        let began = ContinuousClock.now
        let plan = ScheduleFire.plan(
            schedule, expression: expression, zone: TimeZone(identifier: "UTC")!, now: now, grace: .seconds(60)
        ) { tick in
            let job = TaskRecord(id: "\(Int(now.timeIntervalSince(tick)))", name: "s", kind: "k", createdAt: now)
            return (job, TaskEvent(taskID: job.id, rootID: job.id, kind: .created, at: now, attempt: 1))
        }
        #expect(plan.jobs.map(\.id) == ["270", "210", "150", "90", "30"], "the five newest missed minutes")
        #expect(ContinuousClock.now - began < .seconds(10))
    }

    // MARK: Delayed jobs

    @Test(arguments: StoreKind.allCases)
    func aDelayedJobStartsAtItsTimeNotBefore(kind: StoreKind) async throws {
        let clock = ManualClock()
        let database = try SharedDatabase(kind)
        let worker = try database.worker(slots: 2, clock: clock)
        try worker.register(Doubler(worker: "w"))
        try await worker.start()
        let producer = try database.producer(clock: clock)
        let id = try await producer.submit(Doubler.self, input: .init(n: 4), options: JobOptions(delay: .seconds(600)))
        let runAt = try #require(try await producer.job(id)?.nextAttemptAt)
        #expect(try await producer.job(id)?.displayStatus == "scheduled")
        clock.advance(by: .seconds(300))
        #expect(await eventually(timeout: .milliseconds(400)) { (try? await producer.job(id))?.status != .pending } == false)
        clock.advance(by: .seconds(300))
        // The worker's claim loop sleeps on the clock until the job is due, then claims it.
        try await poll("the job to run at its time") {
            clock.advance(by: .milliseconds(500))
            return try await producer.job(id)?.status == .completed
        }
        let done = try #require(try await producer.job(id))
        #expect(try #require(done.startedAt) >= runAt)
        #expect(try await producer.result(of: id, as: Doubler.self).doubled == 8)
        await worker.shutdown()
    }

    /// A run-at kept at the store's precision is never before the time asked for: rounded up, not to the nearest.
    @Test(arguments: [
        (0.0, 0.0), (0.0004, 0.001), (0.0005, 0.001), (0.0009, 0.001), (0.001, 0.001), (1.0001, 1.001), (-0.0004, 0.0),
        (0.000_000_5, 0.0), (0.000_002, 0.001),
    ])
    func aRunAtIsKeptAtTheFirstMillisecondNotBeforeIt(offset: Double, kept: Double) {
        let base = Date(timeIntervalSince1970: 1_800_000_000)
        let asked = base.addingTimeInterval(offset)
        let rounded = asked.roundedUpToMilliseconds
        #expect(rounded.timeIntervalSince(asked) > -1e-6, "not before the time asked (to a microsecond)")
        #expect(abs(rounded.timeIntervalSince(base) - kept) < 1e-6, "\(rounded.timeIntervalSince(base))")
    }

    /// The executor's "now" on the system's clock is the millisecond that has begun, never the next one: a job due at
    /// a millisecond is not claimed before it. Rounded to the nearest, now ran up to half a millisecond ahead, and with
    /// a run-at rounded to the nearest about half of the delayed jobs started early (`delay_p50_ms_sqlite` -0.005 ms).
    @Test func nowOnTheSystemClockIsNeverAhead() {
        var ahead = 0
        for _ in 0..<2_000 {
            let now = Date.currentMillisecond()
            // More than a microsecond: a Double of seconds since 2001 holds about a tenth of one.
            if now.timeIntervalSince(Date()) > 1e-6 { ahead += 1 }
        }
        #expect(ahead == 0)
    }

    @Test func runNowStartsAScheduledJobThroughTheExecutor() async throws {
        let clock = ManualClock()
        let database = try SharedDatabase(.sqlite)
        let worker = try database.worker(slots: 1, clock: clock)
        try worker.register(Doubler(worker: "w"))
        try await worker.start()
        let id = try await worker.submit(
            Doubler.self, input: .init(n: 1), options: JobOptions(runAt: clock.wallClockNow.addingTimeInterval(86_400)))
        #expect(try await worker.store.task(id: id)?.waitReason == .runAt)
        try await worker.runNow(taskID: id)
        try await poll("the job to run now") {
            clock.advance(by: .milliseconds(100))
            return try await worker.store.task(id: id)?.status == .completed
        }
        await #expect(throws: ProgressionError.self) { try await worker.runNow(taskID: id) }
        await worker.shutdown()
    }

    // MARK: Durable sleep

    @Test(arguments: StoreKind.allCases)
    func aDurableSleepGivesItsSlotBackAndContinuesAfterItsTime(kind: StoreKind) async throws {
        let clock = ManualClock()
        let database = try SharedDatabase(kind)
        let worker = try database.worker(slots: 1, clock: clock)
        let stepA = Counter()
        let stepB = Counter()
        try worker.register("napper", input: Int.self, options: .interactive) { _, context in
            try await context.push("A") { _ in stepA.increment() }
            try await context.sleep(for: .seconds(3600))
            try await context.push("B") { _ in stepB.increment() }
        }
        try worker.register(Doubler(worker: "w"))
        try await worker.start()
        let napper = try await worker.submit("napper", input: 1)
        // The release is committed before the job leaves memory: both are awaited.
        try await poll("the job to sleep and leave memory") {
            try await worker.store.task(id: napper)?.waitReason == .sleep && worker.snapshot(of: napper) == nil
        }
        let sleeping = try #require(try await worker.store.task(id: napper))
        #expect(sleeping.status == .pending && sleeping.ownerID == nil)
        // Its slot is free: another job runs.
        let other = try await worker.submit(Doubler.self, input: .init(n: 2))
        try await poll("another job to run in the slot") { try await worker.store.task(id: other)?.status == .completed }
        // Paused while it sleeps (in the store), and resumed: it keeps its wake time.
        try await worker.pause(taskID: napper)
        #expect(try await worker.store.task(id: napper)?.status == .paused)
        try await worker.resume(taskID: napper)
        #expect(try await worker.store.task(id: napper)?.waitReason == .sleep)
        clock.advance(by: .seconds(3600))
        try await poll("the job to wake and complete") {
            clock.advance(by: .milliseconds(500))
            return try await worker.store.task(id: napper)?.status == .completed
        }
        #expect(stepA.count == 1, "the step before the sleep ran once")
        #expect(stepB.count == 1)
        let tree = try await worker.store.tree(of: napper)
        #expect(tree.contains { $0.name == "sleep" && $0.status == .completed })
        await worker.shutdown()
    }

    @Test func aClosureTaskCannotSleepDurably() async throws {
        let executor = TaskExecutor(store: InMemoryTaskStore())
        let id = try await executor.addTask(name: "closure") { context in
            try await context.sleep(for: .seconds(1))
        }
        try await executor.runEnded(id)
        let failed = try #require(executor.snapshot(of: id))
        #expect(failed.status == .failed && failed.errorDescription?.contains("cannot wait durably") == true)
        await executor.shutdown()
    }

    // MARK: Schedules

    @Test(arguments: StoreKind.allCases)
    func threeExecutorsFireEachTickOfAScheduleOnce(kind: StoreKind) async throws {
        let clock = ManualClock(origin: Date(timeIntervalSince1970: 1_795_651_170))  // 30 s before a tick
        let database = try SharedDatabase(kind)
        let runs = Runs()
        var workers: [TaskExecutor] = []
        for index in 0..<3 {
            let worker = try database.worker(slots: 2, clock: clock)
            try worker.register(TickCounter(worker: "w\(index)", runs: runs))
            try worker.schedule(
                "every-5", TickCounter.self, input: .init(), cron: "*/5 * * * *",
                timeZone: TimeZone(identifier: "UTC")!)
            try await worker.start()
            workers.append(worker)
        }
        let store = try database.open()
        #expect(try await store.schedules().map(\.name) == ["every-5"])
        for tick in 1...12 {
            // To the tick (each on time: the first 30 s away, then every 5 minutes).
            clock.advance(by: tick == 1 ? .seconds(30) : .seconds(300) - .milliseconds(1))
            // A generous deadline: three executors' loops share a loaded machine with the rest of a parallel run (a
            // clean-clone CI run saw tick 1 take longer than 30 s).
            try await poll("tick \(tick)'s job to run", timeout: .seconds(180)) {
                clock.advance(by: .milliseconds(1))
                return runs.total >= tick
            }
        }
        // Let every executor look once more at each tick it may not have seen yet.
        #expect(await eventually(timeout: .milliseconds(500)) { runs.total > 12 } == false)
        let jobs = try await store.roots(TaskQuery(kind: TickCounter.name, limit: 100))
        #expect(jobs.count == 12)
        #expect(Set(jobs.compactMap(\.idempotencyKey)).count == 12)
        for worker in workers { await worker.shutdown() }
    }

    /// An executor on a clock of its own records its start in wall-clock time: another executor of the host compares
    /// it with the system's start time of the owner's pid (to tell a reused pid), and a simulated start before this
    /// machine's boot made the owner look dead, so that its peers took its jobs and ran them again (seen when the
    /// test above, whose clock starts on 2026-11-25, ran after a boot on 2026-11-26).
    @Test(arguments: StoreKind.allCases)
    func anExecutorOnAClockSetYearsBackIsAliveToTheOthersOfItsHost(kind: StoreKind) async throws {
        let clock = ManualClock(origin: Date(timeIntervalSince1970: 1_000_000_000))  // 2001-09-09
        let database = try SharedDatabase(kind)
        let worker = try database.worker(slots: 1, clock: clock)
        try await worker.start()
        let store = try database.open()
        let owner = try #require(try await store.owners().first)
        #expect(owner.heartbeatAt < Date(timeIntervalSince1970: 1_000_100_000), "its heartbeat is on its clock")
        #expect(abs(owner.startedAt.timeIntervalSinceNow) < 600, "its start is the wall clock's")
        #expect(owner.liveness(now: Date(timeIntervalSince1970: 1_000_000_000)) == .alive)
        await worker.shutdown()
    }

    @Test func badSchedulesAreRefused() throws {
        let executor = TaskExecutor(store: InMemoryTaskStore())
        #expect(throws: CronExpressionError.self) {
            try executor.schedule("bad", TickCounter.self, input: .init(), cron: "61 * * * *")
        }
        #expect(throws: ProgressionError.self) {
            try executor.schedule("", TickCounter.self, input: .init(), cron: "@daily")
        }
        #expect(throws: ProgressionError.self) {
            try executor.schedule("each", TickCounter.self, input: .init(), cron: "@daily", missedTicks: .runEach(max: 0))
        }
        try executor.schedule("twice", TickCounter.self, input: .init(), cron: "@daily")
        #expect(throws: ProgressionError.self) {
            try executor.schedule("twice", TickCounter.self, input: .init(), cron: "@hourly")
        }
    }
}

/// A schedule's job that counts its runs.
struct TickCounter: JobKind {
    struct Input: Codable, Sendable {}
    static let name = "tick"
    let worker: String
    let runs: Runs

    func run(_ input: Input, context: any TaskContext) async throws {
        runs.started(0, by: worker)
        runs.ended()
    }
}
