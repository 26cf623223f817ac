import ArgumentParser
import Foundation
import Logging
import Progression
import ProgressionTestSupport
import ServiceLifecycle
import Synchronization
import UnixSignals

extension FleetTest {
    /// A worker of the fleet: runs the test kinds, fires the schedules it declares, until SIGTERM or SIGINT.
    struct Worker: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the fleet's test job kinds (and schedules) until SIGTERM or SIGINT.")

        @Option(help: "The SQLite database, or a postgres:// URL.") var db: String
        @Option(help: "The ledger file every job writes to.") var ledger: String
        @Option(help: "This worker's name in the ledger and results.") var name: String = "w\(getpid())"
        @Option(help: "Roots running at once.") var concurrency = 4
        @Option(help: "Real seconds without a heartbeat after which a worker of another host counts as dead.")
        var ownerStaleAfter: Double = 15
        @Option(help: "Real seconds a graceful stop waits for running jobs.") var gracePeriod: Double = 5
        @Option(help: "Delete finished jobs this many real seconds after they finished, a turn a second (default: keep).")
        var retention: Double?
        @Option(
            parsing: .upToNextOption,
            help: "Declare a schedule of fleet.tick jobs: NAME=CRON (e.g. every-5=\"*/5 * * * *\").")
        var schedule: [String] = []
        @Option(help: "The time zone of the schedules.") var scheduleZone = "UTC"
        @Option(help: "What to do with missed ticks: skip, once, or each:N.") var missed = "skip"
        @Option(help: "Run on a clock this many times faster than real time (with --clock-origin and --clock-start).")
        var clockSpeed: Double?
        @Option(help: "The real time (seconds since 1970) at which the accelerated clock reads --clock-start.")
        var clockOrigin: Double?
        @Option(help: "The simulated time (seconds since 1970) at --clock-origin.") var clockStart: Double?
        @Option(help: "Log level: trace, debug, info, notice, warning, error.") var logLevel = "warning"
        @Option(help: "The version of the hang and double kinds' code (none by default).") var jobVersion: String?
        @Option(help: "Versions whose jobs that code continues, comma-separated.") var continues: String?
        @Option(help: "What it does with a job it cannot continue: leave or fail.") var otherwise = "leave"
        @Option(
            help: "The kinds this worker runs, comma-separated (double, steps, tick, fanout, leaf, gate); all by default.")
        var kinds: String?

        func run() async throws {
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = Logger.Level(rawValue: logLevel) ?? .warning
                return handler
            }
            var configuration = TaskExecutor.Configuration()
            configuration.maxConcurrentTasks = concurrency
            configuration.shutdownGracePeriod = .milliseconds(Int64(gracePeriod * 1000))
            configuration.ownerStaleAfter = .milliseconds(Int64(ownerStaleAfter * 1000))
            configuration.heartbeatInterval = .milliseconds(Int64(min(2, ownerStaleAfter / 4) * 1000))
            configuration.completedTaskVisibility = .seconds(1)
            // The tests count every job of a simulated day at its end: none is deleted under them, unless asked.
            configuration.retention = .keepEverything
            if let retention {
                let period = Duration.milliseconds(Int64(retention * 1000))
                configuration.retention = try RetentionPolicy(
                    completed: period, failed: period, cancelled: period, interval: .seconds(1))
            }
            if let clockSpeed {
                guard let clockOrigin, let clockStart else {
                    throw ValidationError("--clock-speed needs --clock-origin and --clock-start")
                }
                let clock = AcceleratedClock(
                    realOrigin: clockOrigin, simulatedOrigin: Date(timeIntervalSince1970: clockStart), speed: clockSpeed)
                configuration.clock = clock
                // The executor's intervals are on its clock: scaled, so that they stay what they are in real time.
                func scaled(_ real: Duration) -> Duration {
                    let seconds = Double(real.components.seconds) + Double(real.components.attoseconds) / 1e18
                    return .milliseconds(Int64(seconds * clockSpeed * 1000))
                }
                configuration.recoveryInterval = scaled(configuration.recoveryInterval)
                configuration.controlPollInterval = scaled(configuration.controlPollInterval)
                configuration.heartbeatInterval = scaled(configuration.heartbeatInterval)
                configuration.ownerStaleAfter = scaled(configuration.ownerStaleAfter)
                configuration.checkpointInterval = scaled(configuration.checkpointInterval)
                configuration.publishInterval = scaled(configuration.publishInterval)
                configuration.shutdownGracePeriod = scaled(configuration.shutdownGracePeriod)
                configuration.completedTaskVisibility = scaled(configuration.completedTaskVisibility)
                configuration.controlAnswerTimeout = scaled(configuration.controlAnswerTimeout)
                configuration.progressSampleInterval = scaled(configuration.progressSampleInterval)
                // A tick seen up to 4 simulated minutes late is on time (a 5-minute schedule never misses one).
                configuration.scheduleGrace = .seconds(240)
            }
            let otherwisePolicy: JobVersion.Otherwise
            do {
                otherwisePolicy = try JobVersion.Otherwise(parsing: otherwise)
            } catch {
                throw ValidationError("\(error)")
            }
            FleetVersion.current.withLock { current in
                current = jobVersion.map { name in
                    JobVersion(
                        name, continues: Set((continues ?? "").split(separator: ",").map(String.init)),
                        otherwise: otherwisePolicy)
                }
            }
            let executor = try await FleetDatabase.executor(db: db, configuration: configuration)
            let ledger = Ledger(path: ledger)
            let chosen = kinds.map { Set($0.split(separator: ",").map(String.init)) }
            func runs(_ kind: String) -> Bool { chosen?.contains(kind) ?? true }
            if runs("double") { try executor.register(DoubleJob(worker: name, ledger: ledger)) }
            if runs("steps") { try executor.register(StepsJob(worker: name, ledger: ledger)) }
            if runs("tick") { try executor.register(TickJob(worker: name, ledger: ledger)) }
            if runs("fanout") { try executor.register(FanoutJob(worker: name, ledger: ledger)) }
            if runs("leaf") { try executor.register(LeafJob(worker: name, ledger: ledger)) }
            if runs("gate") { try executor.register(GateJob(worker: name, ledger: ledger)) }
            if runs("hang") { try executor.register(HangJob(worker: name, ledger: ledger)) }
            guard let zone = TimeZone(identifier: scheduleZone) else {
                throw ValidationError("unknown time zone '\(scheduleZone)'")
            }
            let policy: MissedTicks
            switch missed {
            case "skip": policy = .skip
            case "once": policy = .runOnce
            case let text where text.hasPrefix("each:"):
                guard let bound = Int(text.dropFirst(5)), bound >= 1 else { throw ValidationError("bad --missed '\(missed)'") }
                policy = .runEach(max: bound)
            default: throw ValidationError("bad --missed '\(missed)' (skip, once, each:N)")
            }
            for declaration in schedule {
                guard let equals = declaration.firstIndex(of: "=") else {
                    throw ValidationError("--schedule wants NAME=CRON, not '\(declaration)'")
                }
                try executor.schedule(
                    String(declaration[..<equals]), TickJob.self, input: .init(),
                    cron: String(declaration[declaration.index(after: equals)...]), timeZone: zone, missedTicks: policy)
            }
            let logger = Logger(label: "fleet-worker")
            let group = ServiceGroup(services: [executor], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            ledger.append("worker \(name) \(getpid()) started")
            try await group.run()
            ledger.append("worker \(name) \(getpid()) stopped")
        }
    }
}
