import ArgumentParser
import Foundation
import Progression

#if canImport(Glibc)
import Glibc
#endif

extension CrashTest {
    /// Starts the worker, kills it with SIGKILL at random moments, starts it again, and checks the outcome.
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run the crash test (the default).")

        @Option(help: "How many times to kill the worker.") var kills = 20
        @Option(help: "How many batch jobs.") var jobs = 50
        @Option(help: "Iterations of each job's checkpointed loop (sizes the work so that every kill lands mid-batch).")
        var iterations = 60
        @Option(help: "Milliseconds of work per step and per iteration.") var delay = 20
        @Option(help: "Seed of the random kill times.") var seed: UInt64 = 2026
        @Option(help: "Jobs the worker runs at once.") var concurrency = 8
        @Option(help: "Shortest life of a worker before it is killed, in milliseconds.") var minLife = 150
        @Option(help: "Longest life of a worker before it is killed, in milliseconds.") var maxLife = 700
        @Option(help: "Keep the database and ledger in this directory (default: a temporary one, removed).")
        var directory: String?
        @Flag(help: "Run against a PostgreSQL server started for the test on this machine, not a SQLite file.")
        var postgres = false

        func run() async throws {
            let directory = directory ?? (NSTemporaryDirectory() + "progression-crash-\(UUID().uuidString)")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { if self.directory == nil { try? FileManager.default.removeItem(atPath: directory) } }
            let db = postgres ? try CrashDatabase.startPostgres() : directory + "/crash.sqlite"
            let ledger = Ledger(path: directory + "/ledger.txt")
            let arguments = [
                "worker", "--db", db, "--ledger", ledger.path, "--submit-batch", String(jobs), "--exit-when-idle",
                "--iterations", String(iterations), "--delay", String(delay), "--concurrency", String(concurrency),
                // These kills come from outside, not from the jobs: they are not a crash loop.
                "--max-interruptions", "1000000",
            ]
            var generator = SplitMix64(seed: seed)
            var killed = 0
            while killed < kills {
                let worker = try launchWorker(arguments)
                let life = Int.random(in: minLife...maxLife, using: &generator)
                try await Task.sleep(for: .milliseconds(life))
                guard worker.isRunning else {
                    // It finished all the work before this kill: nothing left to interrupt.
                    worker.waitUntilExit()
                    break
                }
                kill(worker.processIdentifier, SIGKILL)
                worker.waitUntilExit()
                killed += 1
            }
            // The last life: runs until the batch is done.
            let last = try launchWorker(arguments)
            let deadline = ContinuousClock.now + .seconds(300)
            while last.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            if last.isRunning {
                kill(last.processIdentifier, SIGKILL)
                throw ValidationError("crash-test: the last worker did not finish within 300 s")
            }
            guard last.terminationStatus == 0 else {
                throw ValidationError("crash-test: the last worker exited with status \(last.terminationStatus)")
            }
            let report = try await check(db: db, ledger: ledger, killed: killed)
            print(report.line)
            if !report.violations.isEmpty {
                for violation in report.violations.prefix(20) { FileHandle.standardError.write(Data("crash-test: \(violation)\n".utf8)) }
                throw ExitCode(1)
            }
        }

        private func launchWorker(_ arguments: [String]) throws -> Process {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
            if !FileManager.default.isExecutableFile(atPath: process.executableURL!.path) {
                process.executableURL = Bundle.main.executableURL
            }
            process.arguments = [CrashTestTool.command] + arguments
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            return process
        }

        struct Report {
            var line: String
            var violations: [String]
        }

        /// Reads the database and the ledger and checks every promise.
        func check(db: String, ledger: Ledger, killed: Int) async throws -> Report {
            var violations: [String] = []
            let (store, integrityCheck) = try await CrashDatabase.open(db)
            let roots = try await store.roots(TaskQuery(kind: "batch", limit: 100_000))
            let completed = roots.filter { $0.status == .completed }.count
            let lost = jobs - roots.count
            if lost > 0 { violations.append("\(lost) job(s) lost") }
            for root in roots where root.status != .completed {
                violations.append("\(root.id) ended \(root.status): \(root.errorDescription ?? "")")
            }
            let interrupted = roots.reduce(0) { $0 + $1.interruptions }
            let integrity = try await integrityCheck()
            if integrity != ["ok"] { violations.append("integrity_check: \(integrity.joined(separator: "; "))") }

            // The ledger: per step, the begins before and after its committed completion; per loop, iterations that
            // ran again at or below a committed checkpoint.
            var committedSteps: Set<String> = []
            var begins: [String: Int] = [:]
            var rerunAfterCommit = 0
            var checkpoints: [String: Int] = [:]
            var regressions = 0
            var resumes = 0
            var sums: [String: Int] = [:]
            for line in ledger.lines() {
                let parts = line.split(separator: " ").map(String.init)
                guard parts.count >= 3 else { continue }
                let (kind, job, value) = (parts[0], parts[1], parts[2])
                let key = job + "/" + value
                switch kind {
                case "begin":
                    if committedSteps.contains(key) {
                        rerunAfterCommit += 1
                        violations.append("\(key) started again after its completion was committed")
                    }
                    begins[key, default: 0] += 1
                case "committed":
                    committedSteps.insert(key)
                case "iter":
                    if let iteration = Int(value), let checkpoint = checkpoints[job], iteration <= checkpoint {
                        regressions += 1
                        violations.append("\(job) ran iteration \(iteration) again after checkpoint \(checkpoint)")
                    }
                case "ckpt":
                    if let iteration = Int(value) { checkpoints[job] = max(checkpoints[job] ?? 0, iteration) }
                case "resume":
                    resumes += 1
                case "done":
                    sums[job] = Int(value)
                default:
                    break
                }
            }
            let rerunUncommitted = begins.values.reduce(0) { $0 + max(0, $1 - 1) } - rerunAfterCommit
            for root in roots where root.status == .completed && sums[root.id] != 0 + 10 + 20 + 4 + 5 {
                violations.append("\(root.id) summed its steps to \(sums[root.id].map(String.init) ?? "nothing")")
            }
            let line =
                "crash-test: kills=\(killed) jobs=\(jobs) completed=\(completed) lost=\(max(0, lost)) "
                + "steps_rerun_after_commit=\(rerunAfterCommit) steps_rerun_uncommitted=\(rerunUncommitted) "
                + "checkpoint_regressions=\(regressions) loops_resumed=\(resumes) interruptions=\(interrupted) "
                + "integrity=\(integrity == ["ok"] ? "ok" : "FAILED")\(postgres ? " database=postgresql" : "")"
            return Report(line: line, violations: violations)
        }
    }
}
