import ArgumentParser
import Foundation
import Logging
import Progression
import ProgressionTestSupport
import Synchronization

/// `progression-bench fault-test`: runs jobs with nested steps and checkpoints on a store that fails writes (and
/// reads) at random — a full disk, an I/O error, a lock held past the timeout — for bounded periods, with graceful restarts of
/// the executor in between, and checks that the faults cost nothing: every job completes, none is stuck or failed by
/// the store, no step whose completion was committed runs again, and the database passes its integrity check.
///
/// ```
/// progression-bench fault-test --seed 2026
/// fault-test: faults=412 jobs=60 completed=60 stuck=0 failed_by_storage=0 steps_rerun_after_commit=0 restarts=2 integrity=ok
/// ```
struct FaultTest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "progression-bench fault-test",
        abstract: "Run jobs on a store that fails at random and check that nothing is lost, stuck or redone.")

    @Option(help: "Seed of the faults (the run is reproducible for a seed).") var seed: UInt64 = 2026
    @Option(help: "How many jobs.") var jobs = 80
    @Option(help: "Steps per job (each with a nested step and a checkpoint).") var steps = 4
    @Option(help: "Chance that a write starts an outage.") var probability = 0.1
    @Option(help: "Length of an outage, in milliseconds.") var outage = 80
    @Option(help: "Graceful restarts of the executor while the jobs run.") var restarts = 2
    @Option(help: "Give up after this many seconds.") var timeout = 240
    @Flag(help: "Print the jobs that did not complete.") var verbose = false

    /// The step input: which job, how many steps.
    struct Input: Codable, Sendable {
        var steps: Int
    }

    func run() async throws {
        // The executors' logs go to stderr (warnings only, unless --verbose): stdout is the result line.
        LoggingSystem.bootstrap { [verbose] label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = verbose ? .info : .critical
            return handler
        }
        let directory = NSTemporaryDirectory() + "progression-fault-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/faults.sqlite"
        let sqlite = try SQLiteTaskStore(path: path)
        let store = FaultInjectingStore(wrapping: sqlite)
        let ledger = StepLedger()

        var generation = 0
        var executor = try makeExecutor(store: store, ledger: ledger, generation: generation)
        try await executor.start()
        let ids = try await executor.submit("faulty", inputs: (0..<jobs).map { _ in Input(steps: steps) })
        store.plan.randomOutages(seed: seed, probability: probability, length: .milliseconds(outage))

        let deadline = ContinuousClock.now + .seconds(timeout)
        var restarted = 0
        while try await !allFinished(ids, in: sqlite) {
            guard ContinuousClock.now < deadline else { break }
            if restarted < restarts, try await finishedCount(ids, in: sqlite) >= jobs * (restarted + 1) / (restarts + 1) {
                // A graceful stop while the store fails now and then, and a new executor that takes over.
                await executor.shutdown(gracePeriod: .seconds(5))
                generation += 1
                executor = try makeExecutor(store: store, ledger: ledger, generation: generation)
                try await executor.start()
                restarted += 1
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        store.plan.heal()
        if verbose {
            for task in executor.graph().tasks where !task.isFinished {
                print("  in memory: \(task.id) \(task.status) \(task.children.map { "\($0.name)=\($0.status)" })")
            }
            print("  storage: \(executor.storageHealth)")
            print("  executor: \(executor.diagnostics)")
        }
        await executor.shutdown()

        let roots = try await sqlite.roots(TaskQuery(kind: "faulty", limit: jobs + 1))
        let completed = roots.filter { $0.status == .completed }.count
        let stuck = roots.filter { !$0.status.isFinished }.count
        let failedByStorage = roots.filter {
            $0.status == .failed && ($0.errorDescription ?? "").contains("injected")
        }.count
        let failed = roots.filter { $0.status != .completed && $0.status.isFinished }.count
        let integrity = try await sqlite.integrityCheck()
        if verbose {
            let owners = Dictionary(uniqueKeysWithValues: try await sqlite.owners().map { ($0.id, $0) })
            for root in roots where root.status != .completed {
                let owner = root.ownerID.flatMap { owners[$0] }
                print(
                    "  \(root.id) \(root.status) owner \(root.ownerID ?? "-") (host \(owner?.host ?? "-"), "
                        + "stopped \(owner?.stoppedAt != nil)) attempt \(root.attempt) \(root.errorDescription ?? "")")
            }
        }
        let rerun = ledger.rerunsAfterCommit
        print(
            "fault-test: faults=\(store.plan.injected) jobs=\(jobs) completed=\(completed) stuck=\(stuck) "
                + "failed_by_storage=\(failedByStorage) steps_rerun_after_commit=\(rerun) restarts=\(restarted) "
                + "integrity=\(integrity == ["ok"] ? "ok" : integrity.joined(separator: "; "))")
        guard completed == jobs, stuck == 0, failed == 0, rerun == 0, integrity == ["ok"] else {
            throw ExitCode.failure
        }
    }

    /// An executor that plays a process of its own: each generation names another host, so that the ones before it
    /// count as dead once their heartbeat is stale (in one process, the pid check would find them alive), as when a
    /// stopped process could not record its stop because the store was failing.
    private func makeExecutor(store: FaultInjectingStore, ledger: StepLedger, generation: Int) throws -> TaskExecutor {
        var configuration = TaskExecutor.Configuration()
        configuration.hostName = "fault-test-\(generation)"
        configuration.heartbeatInterval = .milliseconds(200)
        configuration.ownerStaleAfter = .seconds(2)
        configuration.maxConcurrentTasks = 8
        configuration.recoveryInterval = .milliseconds(100)
        configuration.shutdownGracePeriod = .seconds(5)
        configuration.completedTaskVisibility = .milliseconds(200)
        configuration.logger = Logger(label: "fault-test-\(generation)")
        let executor = try TaskExecutor(store: store, configuration: configuration)
        try executor.register("faulty", input: Input.self, options: .interactive.retryable()) { input, context in
            let job = context.taskID
            var done = try context.lastCheckpoint(as: Int.self) ?? 0
            try await context.report(.total(Double(input.steps)))
            for step in 0..<input.steps {
                try await context.push("step \(step)", weight: 1) { stepContext in
                    ledger.started(job, step)
                    try await stepContext.push("inner") { inner in
                        try await inner.report(.progress(0.5))
                        try await Task.sleep(for: .milliseconds(2))
                    }
                    try await stepContext.report(.progress(1))
                }
                ledger.committed(job, step)
                done = max(done, step + 1)
                try await context.checkpoint(done)
            }
        }
        return executor
    }

    private func allFinished(_ ids: [String], in store: SQLiteTaskStore) async throws -> Bool {
        try await finishedCount(ids, in: store) == ids.count
    }

    private func finishedCount(_ ids: [String], in store: SQLiteTaskStore) async throws -> Int {
        let statuses: Set<TaskStatus> = [.completed, .failed, .cancelled]
        return try await store.countRoots(TaskQuery(statuses: statuses, kind: "faulty"))
    }
}

/// Which steps ran, and which of them had their completion committed (their push returned): a step that starts
/// again after that ran twice.
final class StepLedger: Sendable {
    private let state = Mutex<(committed: Set<String>, reruns: Int)>(([], 0))

    func started(_ job: String, _ step: Int) {
        state.withLock { state in
            if state.committed.contains("\(job)/\(step)") { state.reruns += 1 }
        }
    }

    func committed(_ job: String, _ step: Int) {
        _ = state.withLock { $0.committed.insert("\(job)/\(step)") }
    }

    var rerunsAfterCommit: Int { state.withLock { $0.reruns } }
}
