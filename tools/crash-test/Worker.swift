import ArgumentParser
import Foundation
import Logging
import Progression
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// The input of a batch job: sequential steps, concurrent steps and a checkpointed loop.
struct BatchInput: Codable, Sendable {
    var steps = 3
    var iterations = 20
    var delayMilliseconds = 15
}

/// Whether the worker has seen its storage fail (set once, read by the jobs of `--iterate-until-storage-fails`).
final class StorageFailed: Sendable {
    let seen = Mutex(false)
}

/// The input of a job that ticks every 10 ms, `ticks` times (forever when `nil`), with a checkpoint per tick.
struct SleeperInput: Codable, Sendable {
    var ticks: Int?
}

extension CrashTest {
    /// Runs jobs against a database: the child process the crash test kills, and that recovery tests drive.
    struct Worker: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run a batch of jobs (the process the crash test kills).")

        @Option(help: "The SQLite database, or a postgres:// URL.") var db: String
        @Option(help: "The side-effect ledger file.") var ledger: String
        @Option(help: "Submit this many batch jobs (idempotent: batch-0, batch-1, …).") var submitBatch = 0
        @Option(help: "Iterations of each batch job's checkpointed loop.") var iterations = 20
        @Option(help: "Milliseconds of work per step and per iteration.") var delay = 15
        @Option(
            help: "Milliseconds of work per step and iteration of every job this worker runs, whatever its input says (a resumed job finishes fast)."
        ) var runDelay: Int?
        @Option(help: "Submit a job with this id that kills its own process whenever it runs.") var submitSuicide: String?
        @Option(help: "Submit a pausable job with this id that ticks every 10 ms.") var submitSleeper: String?
        @Option(help: "How many ticks the sleeper job runs (forever if not given).") var ticks: Int?
        @Option(help: "Add a closure task with this id that runs until stopped.") var closureSleeper: String?
        @Option(help: "Pause this task once it runs.") var pauseWhenRunning: String?
        @Option(help: "Roots running at once.") var concurrency = 8
        @Option(help: "Interruptions before a job fails as a crash loop.") var maxInterruptions = 3
        @Option(
            help: "Batch jobs stop at this checkpoint of their loop and wait there until the process is killed (a test kills it after a checkpoint, however slow the machine)."
        ) var holdAfterCheckpoint: Int?
        @Flag(help: "Exit 0 once every task in the database has finished.") var exitWhenIdle = false
        @Flag(help: "Run as a service: SIGTERM or SIGINT shut it down gracefully.") var service = false
        @Flag(
            help: "Batch jobs go on iterating past their iterations until this worker has seen its storage fail once (a full-disk test's jobs outlast the filling of the disk, however slow the machine)."
        ) var iterateUntilStorageFails = false

        func run() async throws {
            var configuration = TaskExecutor.Configuration()
            configuration.maxConcurrentTasks = concurrency
            configuration.maxInterruptions = maxInterruptions
            configuration.shutdownGracePeriod = .seconds(5)
            let executor = try await CrashDatabase.executor(db: db, configuration: configuration)
            let ledger = Ledger(path: ledger)
            let storageFailed = StorageFailed()
            let holdsJobs = iterateUntilStorageFails
            try Self.register(on: executor, ledger: ledger, runDelay: runDelay, holdAfterCheckpoint: holdAfterCheckpoint) {
                holdsJobs && !storageFailed.seen.withLock { $0 }
            }
            try await executor.start()
            ledger.append("worker \(ProcessInfo.processInfo.processIdentifier) started")
            // The store's health, as the executor sees it, in the ledger (which may live on another file system).
            let health = Task {
                var failing = false
                while !Task.isCancelled {
                    let now = !executor.storageHealth.isHealthy
                    if now != failing {
                        failing = now
                        if now { storageFailed.seen.withLock { $0 = true } }
                        ledger.append(now ? "storage failing" : "storage healthy")
                    }
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            defer { health.cancel() }

            for index in 0..<submitBatch {
                try await executor.submit(
                    "batch", input: BatchInput(steps: 3, iterations: iterations, delayMilliseconds: delay),
                    options: JobOptions(
                        name: "batch \(index)", idempotencyKey: "batch-\(index)",
                        options: TaskOptions.interactive.retryable()))
            }
            if let submitSuicide {
                try await executor.submit(
                    "suicide", input: SleeperInput(), options: JobOptions(id: submitSuicide, idempotencyKey: submitSuicide))
            }
            if let submitSleeper {
                try await executor.submit(
                    "sleeper", input: SleeperInput(ticks: ticks),
                    options: JobOptions(id: submitSleeper, idempotencyKey: submitSleeper, options: .interactive))
            }
            if let closureSleeper {
                try await executor.addTask(name: "closure sleeper", id: closureSleeper) { context in
                    ledger.append("closure \(context.taskID) running")
                    while true {
                        try await context.report(.named("sleeping"))
                        try await Task.sleep(for: .milliseconds(10))
                    }
                }
            }
            if let pauseWhenRunning {
                while executor.snapshot(of: pauseWhenRunning)?.status != .running {
                    try await Task.sleep(for: .milliseconds(5))
                }
                try await executor.pause(taskID: pauseWhenRunning)
                ledger.append("paused \(pauseWhenRunning)")
            }

            if service {
                let logger = Logger(label: "progression-crash-test")
                let group = ServiceGroup(
                    services: [executor], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
                try await group.run()
                ledger.append("worker stopped gracefully")
                return
            }
            if exitWhenIdle {
                while try await !Self.allFinished(executor.store) {
                    try await Task.sleep(for: .milliseconds(50))
                }
                await executor.shutdown()
                ledger.append("worker idle")
                return
            }
            // Run until killed.
            while true { try await Task.sleep(for: .seconds(3600)) }
        }

        static func allFinished(_ store: any TaskStore) async throws -> Bool {
            let unfinished = try await store.roots(TaskQuery(statuses: [.pending, .running, .paused], limit: 1))
            return unfinished.isEmpty
        }

        /// - Parameters:
        ///   - holdAfterCheckpoint: a batch job's loop waits, once this checkpoint is stored, until it is cancelled or
        ///     its process killed.
        ///   - goesOn: whether a batch job's loop goes on past its iterations.
        static func register(
            on executor: TaskExecutor, ledger: Ledger, runDelay: Int? = nil, holdAfterCheckpoint: Int? = nil,
            goesOn: @escaping @Sendable () -> Bool = { false }
        ) throws {
            try executor.register("batch", input: BatchInput.self) { input, context in
                let job = context.taskID
                let delay = Duration.milliseconds(runDelay ?? input.delayMilliseconds)
                var sum = 0
                for step in 0..<input.steps {
                    sum += try await context.push("step \(step)") { stepContext in
                        ledger.append("begin \(job) step-\(step)")
                        try await Task.sleep(for: delay)
                        try await stepContext.report(.progress(1))
                        return step * 10
                    }
                    ledger.append("committed \(job) step-\(step)")
                }
                // Concurrent steps, found again by name after a crash.
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for name in ["left", "right"] {
                        group.addTask {
                            let value = try await context.push("parallel \(name)") { _ in
                                ledger.append("begin \(job) parallel-\(name)")
                                try await Task.sleep(for: delay)
                                return name.count
                            }
                            ledger.append("committed \(job) parallel-\(name)")
                            return value
                        }
                    }
                    for try await value in group { sum += value }
                }
                // A checkpointed loop.
                let start = (try context.lastCheckpoint(as: Int.self) ?? 0) + 1
                if start > 1 { ledger.append("resume \(job) \(start)") }
                var iteration = start
                while iteration <= input.iterations || goesOn() {
                    ledger.append("iter \(job) \(iteration)")
                    try await Task.sleep(for: delay)
                    try await context.report(.step(min(iteration, input.iterations), of: input.iterations))
                    try await context.checkpoint(iteration)
                    ledger.append("ckpt \(job) \(iteration)")
                    if iteration == holdAfterCheckpoint {
                        ledger.append("holding \(job) \(iteration)")
                        // Code that runs until it is stopped: the test kills the process now.
                        try await Task.sleep(for: .seconds(3_600))
                    }
                    iteration += 1
                }
                ledger.append("done \(job) \(sum)")
            }
            try executor.register("suicide", input: SleeperInput.self) { _, context in
                ledger.append("suicide \(context.taskID)")
                kill(getpid(), SIGKILL)
            }
            try executor.register("sleeper", input: SleeperInput.self, options: .interactive) { input, context in
                var tick = try context.lastCheckpoint(as: Int.self) ?? 0
                ledger.append("sleeper \(context.taskID) running from \(tick)")
                while input.ticks.map({ tick < $0 }) ?? true {
                    tick += 1
                    try await context.report(.named("tick \(tick)"))
                    try await Task.sleep(for: .milliseconds(10))
                    if tick.isMultiple(of: 10) { try await context.checkpoint(tick) }
                }
                ledger.append("sleeper \(context.taskID) done")
            }
        }
    }
}
