import ArgumentParser
import Foundation
import Progression
import ProgressionTestSupport
#if PostgreSQL
import ProgressionPostgres
import ProgressionPostgresTestSupport
#endif

#if canImport(Glibc)
import Glibc
#endif

extension ChaosTest {
    /// Workers on one server that is restarted at random (`pg_ctl restart -m fast|immediate`) while backends are
    /// killed at random (`pg_terminate_backend`); then checks the outcome and stops the workers with SIGTERM.
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Restart PostgreSQL under running workers (the default).")

        @Option(help: "Worker processes.") var workers = 3
        @Option(help: "Jobs (each: 3 steps of 2 substeps).") var jobs = 500
        @Option(help: "Server restarts.") var restarts = 10
        @Option(help: "Roots each worker runs at once.") var concurrency = 4
        @Option(help: "Milliseconds of work per substep.") var milliseconds = 100
        @Option(help: "Seed of the random disturbances.") var seed: UInt64 = 2026
        @Option(help: "The workers' grace period on SIGTERM, in seconds.") var grace = 5.0
        @Option(help: "Keep the ledger and the workers' output in this directory (default: a temporary one, removed).")
        var directory: String?

        func run() async throws {
            #if PostgreSQL
            let directory = directory ?? (NSTemporaryDirectory() + "progression-chaos-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            var keep = self.directory != nil
            defer { if !keep { try? FileManager.default.removeItem(atPath: directory) } }
            let server = try LocalPostgresServer(durable: false)
            defer { server.stop() }
            let schema = "chaos"
            let ledger = Ledger(path: directory + "/ledger.txt")
            let ids = try await ChaosJobs.submit(jobs, configuration: server.configuration(schema: schema), milliseconds: milliseconds)

            var running: [ChildProcess] = []
            for index in 0..<workers {
                running.append(
                    try ChaosJobs.worker(
                        ["--db", server.url(schema: schema), "--ledger", ledger.path, "--concurrency", "\(concurrency)",
                         "--grace", "\(grace)"], name: "worker-\(index)", directory: directory))
            }
            defer { for worker in running { worker.signal(SIGKILL) } }
            try await ChaosJobs.waitFor("\(workers) workers to start", timeout: .seconds(60)) {
                ledger.owners().count == workers
            }

            var generator = SplitMix64(seed: seed)
            var modes: [LocalPostgresServer.StopMode: Int] = [:]
            var killedBackends = 0
            var lastRestart = Date()
            for _ in 0..<restarts {
                // Until the next restart, backends are killed at random moments.
                let until = ContinuousClock.now + .milliseconds(Int.random(in: 1_000...4_000, using: &generator))
                while ContinuousClock.now < until {
                    try await Task.sleep(for: .milliseconds(Int.random(in: 150...600, using: &generator)))
                    if Bool.random(using: &generator) {
                        killedBackends += (try? await server.terminateBackends(fraction: 0.5)) ?? 0
                    }
                }
                let mode: LocalPostgresServer.StopMode = Bool.random(using: &generator) ? .fast : .immediate
                try await server.restart(mode)
                modes[mode, default: 0] += 1
                lastRestart = Date()
            }

            let store = try await PostgresTaskStore.started(configuration: server.configuration(schema: schema))
            defer { Task { await store.close() } }
            // Jobs the disturbances ran across: those not completed when the last restart was done.
            let completedBeforeLastRestart = try await store.countRoots(TaskQuery(statuses: [.completed], kind: "chaos"))
            var violations: [String] = []
            do {
                try await ChaosJobs.waitFor("\(jobs) jobs to complete", timeout: .seconds(300)) {
                    (try? await store.countRoots(TaskQuery(statuses: [.completed], kind: "chaos"))) == jobs
                }
            } catch {
                violations.append("\(error)")
            }
            // No worker froze: each writes (its heartbeat) after the last restart.
            let owners = ledger.owners()
            var frozen: [String] = []
            do {
                try await ChaosJobs.waitFor("every worker to write after the last restart", timeout: .seconds(60)) {
                    let stored = (try? await store.owners()) ?? []
                    frozen = owners.values.filter { id in !stored.contains { $0.id == id && $0.heartbeatAt > lastRestart } }
                    return frozen.isEmpty
                }
            } catch {
                violations.append("no write after the last restart from owner(s) \(frozen.sorted())")
            }
            // A graceful stop of each, within its grace period (a little more for the process to exit).
            var slowest = Duration.zero
            var stoppedCleanly = 0
            for (index, worker) in running.enumerated() {
                let asked = ContinuousClock.now
                worker.signal(SIGTERM)
                do {
                    let status = try await worker.waitForExit(timeout: .milliseconds(Int64(grace * 1000)) + .seconds(3))
                    slowest = max(slowest, ContinuousClock.now - asked)
                    if status == 0 { stoppedCleanly += 1 } else { violations.append("worker-\(index) exited with \(status)") }
                } catch {
                    violations.append("worker-\(index) did not exit within \(grace) s of SIGTERM")
                }
            }

            let outcome = try await ChaosJobs.check(ids: ids, store: store, ledger: ledger)
            violations += outcome.violations
            // Every worker stays alive on this host: none may lose a job to another (a commit whose answer was lost
            // and that was taken for a conflict would).
            let fenced = running.filter { $0.stdout.contains("lost tasks to another owner") }.count
            if fenced > 0 { violations.append("\(fenced) worker(s) lost jobs to another owner, though every worker was alive") }
            let perWorker = owners.values.sorted().map { owner in outcome.completedBy[owner] ?? 0 }
            if perWorker.contains(0) { violations.append("a worker completed no job: \(perWorker)") }
            print(
                "chaos-test: workers=\(workers) jobs=\(jobs) completed=\(outcome.completed) "
                    + "completed_per_worker=\(perWorker.map(String.init).joined(separator: "/")) "
                    + "completed_before_last_restart=\(completedBeforeLastRestart) restarts=\(restarts) "
                    + "(fast=\(modes[.fast] ?? 0) immediate=\(modes[.immediate] ?? 0)) backends_killed=\(killedBackends) "
                    + "steps_rerun_after_commit=\(outcome.rerunAfterCommit) steps_rerun_uncommitted=\(outcome.rerunUncommitted) "
                    + "interruptions=\(outcome.interruptions) frozen=\(frozen.count) workers_fenced=\(fenced) "
                    + "sigterm_exit0=\(stoppedCleanly)/\(workers) slowest_stop_s=\(String(format: "%.2f", Double(slowest.components.seconds) + Double(slowest.components.attoseconds) / 1e18))")
            if !violations.isEmpty {
                keep = true
                for violation in violations.prefix(20) { report("chaos-test: \(violation)") }
                report("chaos-test: ledger and worker output kept in \(directory)")
                throw ExitCode(1)
            }
            #else
            throw ChaosFailure("the chaos test needs a build with the PostgreSQL trait (swift build --traits PostgreSQL)")
            #endif
        }
    }
}

#if PostgreSQL
/// What the runs share: submitting jobs, starting workers, waiting, checking.
enum ChaosJobs {
    /// Creates the schema and submits `count` chaos jobs as a client would (unowned: the workers claim them).
    static func submit(
        _ count: Int, configuration: PostgresTaskStore.Configuration, milliseconds: Int, prefix: String = "chaos"
    ) async throws -> [String] {
        try await PostgresTaskStore.withStore(configuration: configuration) { store in
            let input = try JSONEncoder().encode(ChaosInput(milliseconds: milliseconds))
            let now = Date()
            let records = (0..<count).map { index in
                TaskRecord(
                    id: "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())-\(index)", name: "\(prefix) \(index)",
                    kind: "chaos", input: input, options: TaskOptions.interactive.retryable(),
                    createdAt: now.addingTimeInterval(Double(index) / 1000))
            }
            for chunk in stride(from: 0, to: records.count, by: 1_000) {
                try await store.insert(Array(records[chunk..<min(records.count, chunk + 1_000)]), events: [])
            }
            return records.map(\.id)
        }
    }

    /// Starts a worker: this tool's `worker` subcommand, optionally through a wrapper (`ip netns exec NS`).
    static func worker(_ arguments: [String], name: String, directory: String, wrapper: [String] = []) throws -> ChildProcess {
        var program = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        if !FileManager.default.isExecutableFile(atPath: program.path), let own = Bundle.main.executableURL {
            program = own
        }
        let output = directory + "/" + name
        try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
        if wrapper.isEmpty {
            return try ChildProcess(
                program, [ChaosTestTool.command, "worker"] + arguments, output: .combined(in: output))
        }
        return try ChildProcess(
            URL(fileURLWithPath: wrapper[0]),
            Array(wrapper.dropFirst()) + [program.path, ChaosTestTool.command, "worker"] + arguments,
            output: .combined(in: output))
    }

    /// Polls `condition` every 100 ms until it holds; throws after `timeout`.
    static func waitFor(_ what: String, timeout: Duration, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw ChaosFailure("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    struct Outcome {
        var completed = 0
        /// Completed jobs by the owner that completed them.
        var completedBy: [String: Int] = [:]
        var interruptions = 0
        var rerunAfterCommit = 0
        var rerunUncommitted = 0
        var violations: [String] = []
    }

    /// Every job completed, each once (one completion in its history), no committed substep run again.
    static func check(ids: [String], store: PostgresTaskStore, ledger: Ledger) async throws -> Outcome {
        var outcome = Outcome()
        for id in ids {
            guard let root = try await store.task(id: id) else {
                outcome.violations.append("\(id) is lost")
                continue
            }
            outcome.interruptions += root.interruptions
            guard root.status == .completed else {
                outcome.violations.append("\(id) ended \(root.status) \(root.errorDescription ?? "")")
                continue
            }
            outcome.completed += 1
            if let owner = root.ownerID { outcome.completedBy[owner, default: 0] += 1 }
            let completions = try await store.events(EventQuery(taskID: id, kinds: [.completed], limit: 100))
                .filter { $0.taskID == id }
            if completions.count != 1 { outcome.violations.append("\(id) completed \(completions.count) times") }
        }
        let reruns = ledger.reruns()
        outcome.rerunAfterCommit = reruns.afterCommit.count
        outcome.rerunUncommitted = reruns.uncommitted
        for key in reruns.afterCommit.prefix(10) {
            outcome.violations.append("substep \(key) ran again after its end was committed")
        }
        return outcome
    }
}
#endif
