import Foundation
import Synchronization
import Logging

/// A periodic job: a job kind and input, and the cron expression (in a time zone) of its ticks. Each tick makes one
/// job across every worker of the database.
public struct Schedule: Sendable, Hashable {
    /// The schedule's name: its identity in the store and in `progressctl schedules`.
    public var name: String
    /// The job kind of its jobs.
    public var kind: String
    /// The jobs' input (JSON).
    public var input: Data
    /// When it ticks.
    public var expression: CronExpression
    /// The zone its expression is read in.
    public var timeZone: TimeZone
    /// What to do with ticks missed while no worker ran.
    public var missedTicks: MissedTicks
    /// The jobs' name; the schedule's when `nil`.
    public var jobName: String?
    /// The jobs' options; the kind's when `nil`.
    public var options: TaskOptions?
}

extension TaskExecutor {
    /// Declares a periodic job of a kind given as a type: each tick of `cron` in `timeZone` makes one job, however
    /// many workers declare the same schedule (its next tick moves on with a compare-and-set in the job's
    /// transaction, and the tick is in the job's idempotency key). Declare schedules before ``start()``, which stores
    /// them; a schedule stored with the same expression and zone keeps its next tick and its pause
    /// (`progressctl schedules pause`).
    ///
    /// ```swift
    /// try executor.schedule("nightly-export", Export.self, input: .init(), cron: "30 3 * * *",
    ///                       timeZone: TimeZone(identifier: "Europe/Berlin")!)
    /// ```
    ///
    /// - Parameters:
    ///   - name: the schedule's name, its identity in the store and in `progressctl schedules`.
    ///   - kind: the job kind of its jobs.
    ///   - input: its jobs' input.
    ///   - cron: five fields or a macro; see ``CronExpression``.
    ///   - timeZone: the zone the expression is read in (by default the process's).
    ///   - missedTicks: ticks that passed while no worker ran (later than ``Configuration/scheduleGrace``): skipped
    ///     by default.
    ///   - jobName: its jobs' name; by default the schedule's.
    ///   - options: its jobs' options; by default the kind's.
    /// - Throws: ``CronExpressionError`` for a bad expression; ``ProgressionError/invalidArgument(_:)`` for an empty
    ///   or repeated name, or `runEach` with a bound below 1; `EncodingError`; ``JobInputTooLargeError``.
    public nonisolated func schedule<Kind: JobKind>(
        _ name: String, _ kind: Kind.Type, input: Kind.Input, cron: String, timeZone: TimeZone = .current,
        missedTicks: MissedTicks = .skip, jobName: String? = nil, options: TaskOptions? = nil
    ) throws {
        try schedule(
            name, kind: Kind.name, input: input, cron: cron, timeZone: timeZone, missedTicks: missedTicks,
            jobName: jobName, options: options ?? Kind.options)
    }

    /// Declares a periodic job of a kind known by name; as ``schedule(_:_:input:cron:timeZone:missedTicks:jobName:options:)``.
    public nonisolated func schedule<Input: Encodable & Sendable>(
        _ name: String, kind: String, input: Input, cron: String, timeZone: TimeZone = .current,
        missedTicks: MissedTicks = .skip, jobName: String? = nil, options: TaskOptions? = nil
    ) throws {
        _ = try engine.capabilities.fleetOrRefusal
        let expression = try CronExpression(cron)
        guard !name.isEmpty else { throw ProgressionError.invalidArgument("a schedule needs a name") }
        if case .runEach(let max) = missedTicks, max < 1 {
            throw ProgressionError.invalidArgument("schedule '\(name)': run each missed tick needs a bound of 1 or more")
        }
        let data = try JobInputLimit.encode(input, kind: kind, limit: engine.configuration.maxInputBytes)
        let schedule = Schedule(
            name: name, kind: kind, input: data, expression: expression, timeZone: timeZone,
            missedTicks: missedTicks, jobName: jobName, options: options)
        try engine.declaredSchedules.withLock { declared throws(ProgressionError) in
            guard declared[name] == nil else {
                throw ProgressionError.invalidArgument("a schedule named '\(name)' is declared already")
            }
            declared[name] = schedule
        }
    }
}

extension ExecutionEngine {
    /// Stores the declared schedules (at start).
    func declareSchedules() async throws {
        let declared = declaredSchedules.withLock { Array($0.values) }
        guard !declared.isEmpty, let fleet = capabilities.fleet else { return }
        let now = now()
        let records = declared.map { schedule in
            ScheduleRecord(
                name: schedule.name, kind: schedule.kind, input: schedule.input, cron: schedule.expression.source,
                timeZone: schedule.timeZone.identifier, missed: schedule.missedTicks, jobName: schedule.jobName,
                options: schedule.options, priority: schedule.options?.priority ?? 0,
                nextFireAt: schedule.expression.nextFire(after: now, in: schedule.timeZone) ?? JobOptions.latestRunAt,
                declaredBy: ownerID, updatedAt: now)
        }
        try await retryingStorage("storing schedules") {
            _ = try await fleet.saveSchedules(records, at: now)
        }
        scheduleSignal.signal()
    }

    /// Fires due ticks of the schedules whose kind this worker registered, then sleeps until the next tick (or until
    /// another process changes the store: a schedule paused, resumed or added).
    func runSchedules() async {
        guard let fleet = capabilities.fleet else { return }
        var warned: Set<String> = []
        while !Task.isCancelled {
            let (enabled, shutDown) = locked { ($0.schedulerEnabled, $0.isShutDown) }
            var wait = Duration.seconds(60)
            if enabled, !shutDown {
                let kinds = registry.names
                do {
                    let due = try await fleet.dueSchedules(at: now(), limit: 1_000)
                    for schedule in due where kinds.contains(schedule.kind) {
                        await fire(schedule, in: fleet, warned: &warned)
                    }
                    if let next = try await fleet.earliestScheduleTick(after: now()) {
                        let millis = max(1, Int64(next.timeIntervalSince(now()) * 1000))
                        wait = min(wait, .milliseconds(millis))
                    }
                } catch {
                    guard !Task.isCancelled else { return }
                    Self.noteStorageFailure(error, outage: storageOutage, logger: logger, what: "firing schedules")
                    wait = .seconds(1)
                }
            }
            await scheduleSignal.wait(timeout: wait, clock: clock)
        }
    }

    /// Fires one schedule's due ticks under its policy for missed ones; another worker that fired them first wins.
    private func fire(_ schedule: ScheduleRecord, in fleet: any FleetStore, warned: inout Set<String>) async {
        guard let expression = try? CronExpression(schedule.cron), let zone = TimeZone(identifier: schedule.timeZone)
        else {
            if warned.insert(schedule.name).inserted {
                logger.warning(
                    "schedule cannot be read; it does not fire",
                    metadata: ["schedule": "\(schedule.name)", "cron": "\(schedule.cron)", "zone": "\(schedule.timeZone)"])
            }
            return
        }
        do {
            var identifiers: [String] = []
            for _ in 0..<max(1, schedule.missed.storedMaximum) { identifiers.append(try await self.identifiers.next()) }
            let now = now()
            let options = schedule.options ?? registry.kind(schedule.kind)?.options ?? .default
            var drawn = identifiers.makeIterator()
            let plan = ScheduleFire.plan(
                schedule, expression: expression, zone: zone, now: now, grace: configuration.scheduleGrace
            ) { tick in
                let record = TaskRecord(
                    id: drawn.next() ?? TaskIdentifier.random(), name: schedule.jobName ?? schedule.name,
                    kind: schedule.kind, input: schedule.input,
                    idempotencyKey: ScheduleFire.idempotencyKey(schedule: schedule.name, tick: tick), options: options,
                    status: .pending, priority: schedule.priority, createdAt: now)
                let event = TaskEvent(
                    taskID: record.id, rootID: record.id, kind: .created, at: now, attempt: 1,
                    message: "\(record.name) (schedule '\(schedule.name)', tick \(tick.formatted(.iso8601)))")
                return (record, event)
            }
            guard try await fleet.fireSchedule(plan) else { return }
            if !plan.jobs.isEmpty {
                logger.info(
                    "schedule fired",
                    metadata: [
                        "schedule": "\(schedule.name)", "jobs": "\(plan.jobs.map(\.id))",
                        "next": "\(plan.nextFireAt.formatted(.iso8601))",
                    ])
                storeChanged.store(true, ordering: .relaxed)
                claimSignal.signal()
            } else {
                logger.info(
                    "schedule skipped missed ticks",
                    metadata: ["schedule": "\(schedule.name)", "next": "\(plan.nextFireAt.formatted(.iso8601))"])
            }
        } catch {
            Self.noteStorageFailure(error, outage: storageOutage, logger: logger, what: "firing a schedule")
        }
    }
}
