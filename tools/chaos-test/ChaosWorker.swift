import ArgumentParser
import Foundation
import Logging
import Progression
#if PostgreSQL
import ProgressionPostgres
import ServiceLifecycle
import UnixSignals
#endif

extension ChaosTest {
    /// A worker: a PostgreSQL store and an executor in a service group, stopped by SIGTERM. The driver's child process.
    struct Worker: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run chaos jobs until SIGTERM (the driver's child).")

        @Option(help: "The postgres:// URL.") var db: String
        @Option(help: "The ledger file.") var ledger: String
        @Option(help: "Roots running at once.") var concurrency = 4
        @Option(help: "The host name this worker's owner record gives (another host is judged by its heartbeat).")
        var host: String?
        @Option(help: "Seconds without a heartbeat after which another host's owner counts as dead.")
        var staleAfter = 3.0
        @Option(help: "Seconds between heartbeats.") var heartbeat = 0.5
        @Option(help: "The deadline of every database call, in seconds.") var callTimeout = 2.0
        @Option(help: "The graceful stop's grace period, in seconds.") var grace = 5.0

        func run() async throws {
            #if PostgreSQL
            var logger = Logger(label: "chaos-worker")
            logger.logLevel = .notice
            var storeConfiguration = try PostgresTaskStore.Configuration(url: db)
            storeConfiguration.callTimeout = .milliseconds(Int64(callTimeout * 1000))
            storeConfiguration.connectTimeout = .milliseconds(Int64(callTimeout * 1000))
            storeConfiguration.changePollInterval = .milliseconds(500)
            let store = try PostgresTaskStore(configuration: storeConfiguration, logger: logger)
            var configuration = TaskExecutor.Configuration()
            configuration.logger = logger
            configuration.maxConcurrentTasks = concurrency
            configuration.ownerStaleAfter = .milliseconds(Int64(staleAfter * 1000))
            configuration.heartbeatInterval = .milliseconds(Int64(heartbeat * 1000))
            configuration.recoveryInterval = .milliseconds(250)
            configuration.shutdownGracePeriod = .milliseconds(Int64(grace * 1000))
            // Restarts and killed sessions interrupt jobs; they are not a crash loop.
            configuration.maxInterruptions = 1_000_000
            if let host { configuration.hostName = host }
            let executor = TaskExecutor(store: store, configuration: configuration)
            let ledger = Ledger(path: ledger)
            try Self.register(on: executor, ledger: ledger)
            ledger.append("owner \(ProcessInfo.processInfo.processIdentifier) \(executor.ownerID)")
            // The store before the executor: a group stops its services in reverse order, so the executor's last
            // writes go out before the store closes.
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    services: [.init(service: store), .init(service: executor)], gracefulShutdownSignals: [.sigterm],
                    logger: logger))
            try await group.run()
            ledger.append("stopped \(ProcessInfo.processInfo.processIdentifier)")
            #else
            throw ChaosFailure("the chaos test needs a build with the PostgreSQL trait (swift build --traits PostgreSQL)")
            #endif
        }

        static func register(on executor: TaskExecutor, ledger: Ledger) throws {
            try executor.register("chaos", input: ChaosInput.self, options: TaskOptions.interactive.retryable()) {
                input, context in
                let job = context.taskID
                for step in 0..<input.steps {
                    _ = try await context.push("step \(step)") { stepContext in
                        for substep in 0..<input.substeps {
                            let key = "\(job)/\(step)/\(substep)"
                            _ = try await stepContext.push("substep \(substep)") { _ in
                                ledger.append("begin \(key)")
                                try await Task.sleep(for: .milliseconds(input.milliseconds))
                                return substep
                            }
                            ledger.append("committed \(key)")
                        }
                        return step
                    }
                }
            }
        }
    }
}
