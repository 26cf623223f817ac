import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// The periodic jobs workers declared: list, pause, resume, trigger, remove.
    struct Schedules: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List, pause, resume, trigger or remove the periodic jobs (cron schedules) workers declared.",
            discussion: """
                Workers declare schedules in code (TaskExecutor.schedule); each tick makes one job across every \
                worker. A paused schedule makes no job; resumed, it goes on from its next tick (the ticks it missed \
                while paused are not run). trigger makes one job now, besides the ticks. A worker that declares a \
                removed schedule stores it again when it starts.

                Examples:
                  progressctl schedules
                  progressctl schedules pause nightly-export
                  progressctl schedules trigger nightly-export
                """,
            subcommands: [ListSchedules.self, PauseSchedule.self, ResumeSchedule.self, TriggerSchedule.self, RemoveSchedule.self],
            defaultSubcommand: ListSchedules.self)
    }

    /// `schedules --json`: one object per schedule.
    struct ScheduleJSON: Encodable {
        var name: String
        var kind: String
        var cron: String
        var timeZone: String
        var missedTicks: String
        var paused: Bool
        var nextFireAt: Date
        @Null var lastFireAt: Date?
        @Null var lastJobID: String?
        @Null var declaredBy: String?

        init(_ schedule: ScheduleRecord) {
            name = schedule.name
            kind = schedule.kind
            cron = schedule.cron
            timeZone = schedule.timeZone
            missedTicks = schedule.missed.description
            paused = schedule.paused
            nextFireAt = schedule.nextFireAt
            lastFireAt = schedule.lastFireAt
            lastJobID = schedule.lastJobID
            declaredBy = schedule.declaredBy
        }
    }

    struct ListSchedules: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List the schedules: expression, zone, next and last tick, paused or not.")

        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let store = try options.openStore(readOnly: true)
            let schedules = try await store.checked { try await $0.schedules() }
            if options.json {
                try JSONOutput.print(schedules.map(ScheduleJSON.init))
                return
            }
            guard !schedules.isEmpty else {
                Terminal.output("no schedules: no worker declared one yet")
                return
            }
            let rows = schedules.map { schedule in
                [
                    schedule.name.escapedForTerminal, schedule.kind.escapedForTerminal, schedule.cron.escapedForTerminal,
                    schedule.timeZone.escapedForTerminal,
                    schedule.paused ? Terminal.paint("paused", .yellow) : Format.time(schedule.nextFireAt),
                    Format.time(schedule.lastFireAt), schedule.lastJobID?.escapedForTerminal ?? "-",
                    schedule.missed.description,
                ]
            }
            for line in Format.table(
                header: ["NAME", "KIND", "CRON", "ZONE", "NEXT", "LAST", "LAST JOB", "MISSED TICKS"], rows: rows)
            {
                Terminal.output(line)
            }
        }
    }

    /// A schedule by name, or a usage error.
    static func schedule(_ name: String, in store: OperatorStore) async throws -> ScheduleRecord {
        guard !name.isEmpty else { throw CLIError.usage("the schedule name must not be empty") }
        let schedules = try await store.checked { try await $0.schedules() }
        guard let schedule = schedules.first(where: { $0.name == name }) else {
            let names = schedules.map(\.name)
            throw CLIError(
                "no schedule named '\(name)'" + (names.isEmpty ? "" : " (schedules: \(names.joined(separator: ", ")))"))
        }
        return schedule
    }

    struct PauseSchedule: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pause", abstract: "Pause a schedule: its ticks make no job until it is resumed.")

        @OptionGroup var options: GlobalOptions
        @Argument(help: "The schedule's name.") var name: String

        func run() async throws {
            let store = try options.openStore(readOnly: false)
            let schedule = try await Progressctl.schedule(name, in: store)
            guard !schedule.paused else {
                Terminal.output("schedule '\(name.escapedForTerminal)' was paused already")
                return
            }
            _ = try await store.checked { [name] in try await $0.setSchedulePaused(name, paused: true, nextFireAt: nil, at: Date()) }
            Terminal.output("paused schedule '\(name.escapedForTerminal)'")
        }
    }

    struct ResumeSchedule: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "resume",
            abstract: "Resume a paused schedule from its next tick (the ticks it missed while paused are not run).")

        @OptionGroup var options: GlobalOptions
        @Argument(help: "The schedule's name.") var name: String

        func run() async throws {
            let store = try options.openStore(readOnly: false)
            let schedule = try await Progressctl.schedule(name, in: store)
            guard schedule.paused else {
                Terminal.output("schedule '\(name.escapedForTerminal)' was not paused")
                return
            }
            let now = Date()
            guard let expression = try? CronExpression(schedule.cron), let zone = TimeZone(identifier: schedule.timeZone)
            else {
                throw CLIError("schedule '\(name)' cannot be read: cron '\(schedule.cron)' in '\(schedule.timeZone)'")
            }
            let next = expression.nextFire(after: now, in: zone) ?? JobOptions.latestRunAt
            _ = try await store.checked { [name] in try await $0.setSchedulePaused(name, paused: false, nextFireAt: next, at: now) }
            Terminal.output("resumed schedule '\(name.escapedForTerminal)': next tick \(Format.time(next))")
        }
    }

    struct TriggerSchedule: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "trigger", abstract: "Make one job of a schedule now, besides its ticks. Prints the job's id.")

        @OptionGroup var options: GlobalOptions
        @Argument(help: "The schedule's name.") var name: String

        func run() async throws {
            let store = try options.openStore(readOnly: false)
            let schedule = try await Progressctl.schedule(name, in: store)
            let now = Date()
            let registered = try await store.checked { try await $0.registeredKinds() }
            let id = TaskIdentifier.root(try await store.checked { try await $0.reserveIdentifiers(1) }.lowerBound)
            var taskOptions = schedule.options ?? registered[schedule.kind]?.options ?? .default
            taskOptions.priority = schedule.priority
            let record = TaskRecord(
                id: id, name: schedule.jobName ?? schedule.name, kind: schedule.kind, input: schedule.input,
                idempotencyKey: "schedule:\(schedule.name):trigger:\(now.storedMilliseconds)", options: taskOptions,
                status: .pending, priority: schedule.priority, createdAt: now)
            let event = TaskEvent(
                taskID: id, rootID: id, kind: .created, at: now, attempt: 1,
                message: "\(record.name) (schedule '\(schedule.name)', triggered by progressctl)")
            try await store.checked { try await $0.insert([record], events: [event]) }
            if options.json {
                try JSONOutput.print(["id": id])
            } else {
                Terminal.output(id.escapedForTerminal)
            }
        }
    }

    struct RemoveSchedule: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove",
            abstract: "Remove a schedule (its jobs stay). A worker that still declares it stores it again when it starts.")

        @OptionGroup var options: GlobalOptions
        @Argument(help: "The schedule's name.") var name: String

        func run() async throws {
            let store = try options.openStore(readOnly: false)
            _ = try await Progressctl.schedule(name, in: store)
            _ = try await store.checked { [name] in try await $0.removeSchedule(name) }
            Terminal.output("removed schedule '\(name.escapedForTerminal)'")
        }
    }
}
