import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Crash recovery, with real processes killed with SIGKILL (the crash-test worker).
@Suite(.serialized)
struct RecoveryTests {
    let directory: TemporaryDirectory
    let db: String
    let ledger: LedgerFile

    init() throws {
        directory = try TemporaryDirectory()
        db = directory.file("jobs.sqlite")
        ledger = LedgerFile(path: directory.file("ledger.txt"))
    }

    func store() throws -> SQLiteTaskStore { try SQLiteTaskStore(path: db) }

    func worker(_ arguments: [String]) throws -> WorkerProcess {
        try WorkerProcess(db: db, ledger: ledger.path, arguments)
    }

    @Test func aKilledJobResumesSkippingCompletedStepsFromItsCheckpoint() async throws {
        // The job holds at its third checkpoint: it is still running when this test, however late on a busy machine,
        // kills it (it used to run 1,000 iterations of 20 ms, and once finished before a starved test killed it).
        let first = try worker([
            "--submit-batch", "1", "--iterations", "20", "--delay", "20", "--hold-after-checkpoint", "3",
        ])
        try await waitUntil("the loop to hold at its third checkpoint") {
            ledger.lines.contains { $0.hasPrefix("holding ") }
        }
        first.kill()
        try await first.waitForExit()
        let job = try #require(try await store().roots(TaskQuery(kind: "batch")).first)
        #expect(job.status == .running)

        let second = try worker(["--exit-when-idle", "--run-delay", "0"])
        #expect(try await second.waitForExit() == 0)
        let done = try #require(try await store().task(id: job.id))
        #expect(done.status == .completed)
        #expect(done.attempt == 1, "a crash is not a new attempt")
        #expect(done.interruptions == 1)
        for step in ["step-0", "step-1", "step-2", "parallel-left", "parallel-right"] {
            #expect(ledger.count("begin \(job.id) \(step)") == 1, "\(step) ran again after its completion")
        }
        // The stored results of the skipped steps were returned: 0 + 10 + 20 + 4 + 5.
        #expect(ledger.count("done \(job.id) 39") == 1)
        let resume = try #require(ledger.lines.first { $0.hasPrefix("resume \(job.id) ") })
        let resumedAt = try #require(Int(resume.split(separator: " ")[2]))
        #expect(resumedAt > 3, "the loop resumed after its checkpoint")
        let kinds = try await store().events(of: job.id, after: nil, limit: 1000).map(\.kind)
        #expect(kinds.contains(.interrupted) && kinds.contains(.recovered))
    }

    @Test func aPausedJobComesBackPausedAfterARestart() async throws {
        let first = try worker(["--submit-sleeper", "sleeper", "--pause-when-running", "sleeper"])
        try await waitUntil("the pause") { ledger.count("paused sleeper") == 1 }
        let before = try #require(try await store().task(id: "sleeper"))
        #expect(before.status == .paused)
        first.kill()
        try await first.waitForExit()

        // The next worker leaves it paused: a paused job is changed where it is (in the store, by progressctl or any
        // executor), and claimed once it is resumed.
        let second = try worker([])
        defer { second.kill() }
        try await waitUntil("the new worker to start") {
            try await store().owners().contains { $0.id != before.ownerID && $0.stoppedAt == nil }
        }
        #expect(await eventually(timeout: .milliseconds(500)) {
            (try? await store().task(id: "sleeper"))?.status != .paused
        } == false)
        let after = try #require(try await store().task(id: "sleeper"))
        #expect(after.status == .paused)
        #expect(after.interruptions == 0, "a paused task was not running")
    }

    @Test func aRunningClosureTaskFailsAsInterrupted() async throws {
        let first = try worker(["--closure-sleeper", "closure"])
        try await waitUntil("the closure task to run") { ledger.count("closure closure running") == 1 }
        first.kill()
        try await first.waitForExit()

        let second = try worker([])
        defer { second.kill() }
        try await waitUntil("the closure task to fail") { try await store().task(id: "closure")?.status == .failed }
        let failed = try #require(try await store().task(id: "closure"))
        #expect(failed.errorDescription?.contains("interrupted") == true)
        #expect(failed.interruptions == 1)
    }

    @Test func aJobKillingItsOwnProcessFailsAfterTheSetNumberOfInterruptions() async throws {
        var starts = 0
        while starts < 10 {
            starts += 1
            let process = try worker(["--submit-suicide", "suicide", "--max-interruptions", "2", "--exit-when-idle"])
            if try await process.waitForExit() == 0 { break }
        }
        let failed = try #require(try await store().task(id: "suicide"))
        #expect(failed.status == .failed)
        #expect(failed.interruptions == 3)
        #expect(failed.errorDescription?.contains("interrupted 3 times") == true)
        #expect(ledger.count("suicide suicide") == 3)
        #expect(starts == 4)
    }

    @Test func aGracefulShutdownLeavesTheTaskPendingAndTheNextStartCompletesIt() async throws {
        let first = try worker(["--service", "--submit-sleeper", "sleeper", "--ticks", "300"])
        try await waitUntil("the job to run a while") {
            (try await store().task(id: "sleeper")?.checkpoint) != nil
        }
        first.kill(SIGTERM)
        #expect(try await first.waitForExit() == 0)
        #expect(ledger.count("worker stopped gracefully") == 1)
        let stopped = try #require(try await store().task(id: "sleeper"))
        #expect(stopped.status == .pending)
        #expect(stopped.ownerID == nil)
        #expect(stopped.interruptions == 0)

        let second = try worker(["--exit-when-idle"])
        #expect(try await second.waitForExit() == 0)
        let done = try #require(try await store().task(id: "sleeper"))
        #expect(done.status == .completed)
        #expect(ledger.contains(prefix: "sleeper sleeper running from ") && ledger.count("sleeper sleeper running from 0") == 1)
    }

    @Test func twoExecutorsOnOneDatabaseNeverRunTheSameTask() async throws {
        let arguments = ["--submit-batch", "24", "--iterations", "5", "--delay", "5", "--exit-when-idle", "--concurrency", "4"]
        let workers = try [worker(arguments), worker(arguments)]
        for worker in workers {
            #expect(try await worker.waitForExit() == 0)
        }
        let jobs = try await store().roots(TaskQuery(kind: "batch"))
        #expect(jobs.count == 24)
        #expect(jobs.allSatisfy { $0.status == .completed })
        for job in jobs {
            #expect(ledger.count("begin \(job.id) step-0") == 1, "\(job.id) ran twice")
            #expect(ledger.count("done \(job.id) 39") == 1)
        }
    }

    @Test func aControlRequestOfAnotherProcessIsAppliedAndAnswered() async throws {
        let service = try worker(["--submit-sleeper", "sleeper"])
        defer { service.kill() }
        let store = try self.store()
        try await waitUntil("the job to run") { try await store.task(id: "sleeper")?.status == .running }
        let owner = try #require(try await store.task(id: "sleeper")?.ownerID)
        for (action, status) in [(ControlRequest.Action.pause, TaskStatus.paused), (.resume, .running), (.cancel, .cancelled)] {
            let id = try await store.addControlRequest(
                ControlRequest(taskID: "sleeper", action: action, ownerID: owner, requestedAt: Date()))
            try await waitUntil("\(action) to be handled", timeout: .seconds(120)) {
                try await store.controlRequest(id: id)?.handledAt != nil
            }
            #expect(try await store.controlRequest(id: id)?.outcome == "applied")
            try await waitUntil("the task to be \(status)") { try await store.task(id: "sleeper")?.status == status }
        }
        let refused = try await store.addControlRequest(
            ControlRequest(taskID: "missing", action: .pause, ownerID: owner, requestedAt: Date()))
        try await waitUntil("the refusal") { try await store.controlRequest(id: refused)?.handledAt != nil }
        #expect(try await store.controlRequest(id: refused)?.outcome?.hasPrefix("refused: No task with id") == true)
    }
}

/// Restarts and races in one process: retry after a restart, and claims racing with a completion.
struct RestartTests {
    struct Input: Codable, Sendable {}
    struct Flaky: Error {}

    @Test func aFailedRetryableJobIsRetryableAfterARestart() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("jobs.sqlite")
        let first = try TaskExecutor(path: path)
        try first.register("flaky", input: Input.self, options: TaskOptions.default.retryable()) { _, _ in throw Flaky() }
        try await first.start()
        let id = try await first.submit("flaky", input: Input())
        _ = try await first.finished(id)
        await first.shutdown()

        let second = try TaskExecutor(path: path)
        try second.register("flaky", input: Input.self, options: TaskOptions.default.retryable()) { _, context in
            try await context.report(.progress(1))
        }
        try await second.start()
        #expect(second.snapshot(of: id) == nil, "finished tasks are not loaded at start")
        try await second.retry(taskID: id)
        try await second.runEnded(id)
        let snapshot = try #require(second.snapshot(of: id))
        #expect(snapshot.status == .completed && snapshot.attempt == 2)
        await second.shutdown()
        #expect(try await SQLiteTaskStore(path: path).task(id: id)?.status == .completed)
    }

    @Test func aTaskThatCompletesWhileASecondExecutorClaimsItStaysCompleted() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("race.sqlite")
        let store = try SQLiteTaskStore(path: path)
        // A ghost owner on this host whose process is gone, holding 300 running jobs.
        let now = Date()
        try await store.saveOwner(
            OwnerRecord(id: "ghost", host: OwnerRecord.currentHost, pid: 999_999_999, startedAt: now, heartbeatAt: now))
        let records = (0..<300).map { index in
            TaskRecord(
                id: "job-\(index)", name: "job", kind: "noop", input: Data("{}".utf8), status: .running,
                ownerID: "ghost", createdAt: now, startedAt: now)
        }
        try await store.insert(records, events: [])

        let ran = Recorder<String>()
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .seconds(600)
        let executor = TaskExecutor(store: try SQLiteTaskStore(path: path), configuration: configuration)
        try executor.register("noop", input: Input.self) { _, context in ran.append(context.taskID) }
        // The ghost completes its jobs (compare-and-set on status and owner) while the executor claims them.
        let completer = Task {
            var completedByGhost: [String] = []
            for record in records {
                let completion = TaskChangeRequest(
                    taskID: record.id, transition: .complete(result: nil), requester: .system, expectedStatus: .running,
                    checksOwner: true, expectedOwner: "ghost", at: Date())
                do {
                    _ = try await store.change(completion)
                    completedByGhost.append(record.id)
                } catch let error as TaskStoreError where error.reason == .conflict {
                    // Claimed by the executor first.
                }
            }
            return completedByGhost
        }
        try await executor.start()
        let completedByGhost = Set(try await completer.value)
        try await waitUntil("every job to be completed") {
            try await store.roots(TaskQuery(statuses: [.completed], limit: 1000)).count == 300
        }
        let ranByExecutor = Set(ran.all)
        #expect(completedByGhost.isDisjoint(with: ranByExecutor), "a completed job was claimed and run again")
        #expect(completedByGhost.union(ranByExecutor).count == 300)
        for id in completedByGhost {
            #expect(try await store.task(id: id)?.ownerID == "ghost")
        }
        await executor.shutdown()
    }
}

struct BatchSubmitTests {
    struct Input: Codable, Sendable { var number: Int }

    @Test(arguments: StoreKind.allCases)
    func manyJobsAreSubmittedInOneGoAndRunWithBoundedConcurrency(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        var configuration = TaskExecutor.Configuration()
        configuration.maxConcurrentTasks = 3
        configuration.completedTaskVisibility = .seconds(600)
        let executor = try TaskExecutor(store: try await kind.make(in: directory), configuration: configuration)
        let running = Counter(), peak = Recorder<Int>(), sum = Recorder<Int>()
        try executor.register("add", input: Input.self) { input, _ in
            running.increment()
            peak.append(running.count)
            try await Task.sleep(for: .milliseconds(5))
            sum.append(input.number)
            running.decrement()
        }
        let inputs = (1...30).map { Input(number: $0) }
        let ids = try await executor.submit("add", inputs: inputs) { JobOptions(idempotencyKey: "n-\($0.number)") }
        #expect(ids.count == 30 && Set(ids).count == 30)
        for id in ids { try await executor.runEnded(id) }
        #expect(sum.all.reduce(0, +) == 465)
        #expect((peak.all.max() ?? 0) <= 3, "at most 3 roots ran at once")
        // The same keys again: the existing jobs, nothing new.
        let again = try await executor.submit("add", inputs: inputs) { JobOptions(idempotencyKey: "n-\($0.number)") }
        #expect(again == ids)
        #expect(try await executor.store.roots(TaskQuery(kind: "add", limit: 100)).count == 30)
        await executor.shutdown()
    }

    /// The executor's batch takes the options a `JobClient` takes, one per input: a name, a priority, an id, a key
    /// (the same key twice is one job), a delay — a batch with a job that waits is written to the store whole, for
    /// any worker; bad options add nothing.
    @Test(arguments: StoreKind.allCases)
    func aBatchTakesJobOptionsPerInput(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        let clock = ManualClock()
        var configuration = TaskExecutor.Configuration()
        configuration.clock = clock
        configuration.completedTaskVisibility = .seconds(600)
        let executor = try TaskExecutor(store: store, configuration: configuration)
        try executor.register("add", input: Input.self) { _, _ in }
        try await executor.start()
        let ids = try await executor.submit("add", inputs: (1...4).map { Input(number: $0) }) { input in
            switch input.number {
            case 1: JobOptions(id: "first", name: "one", priority: 7)
            case 2, 3: JobOptions(idempotencyKey: "two-or-three")
            default: JobOptions(name: "later", delay: .seconds(3_600))
            }
        }
        #expect(ids.count == 4 && ids[0] == "first" && ids[1] == ids[2] && Set(ids).count == 3)
        let first = try #require(try await executor.store.task(id: "first"))
        #expect(first.name == "one" && first.options.priority == 7)
        let later = try #require(try await executor.store.task(id: ids[3]))
        #expect(later.name == "later" && later.status == .pending && later.waitReason == .runAt)
        #expect(later.nextAttemptAt == clock.wallClockNow.addingTimeInterval(3_600))
        // Written to the store (the batch has a job that waits): claimed at once, without a poll (the clock stands).
        for id in ["first", ids[1]] {
            try await poll("job \(id) to complete", timeout: .seconds(60)) {
                try await executor.store.task(id: id)?.status == .completed
            }
        }
        // Jobs to run after another: marked waiting for it, in a batch and alone.
        let after = try await executor.submit("add", inputs: [Input(number: 7)]) { _ in JobOptions(after: [later.id]) }
        let alone = try await executor.submit("add", input: Input(number: 8), options: JobOptions(after: [later.id]))
        for id in after + [alone] {
            let waiting = try #require(try await executor.store.task(id: id))
            #expect(waiting.displayStatus == "waiting" && waiting.waitingFor == "job \(later.id)", "\(waiting)")
        }

        let before = try await executor.store.countRoots(TaskQuery(kind: "add"), upTo: nil)
        await #expect(throws: ProgressionError.self) {
            try await executor.submit("add", inputs: [Input(number: 5), Input(number: 6)]) { input in
                input.number == 5 ? JobOptions() : JobOptions(runAt: Date(), delay: .seconds(1))
            }
        }
        #expect(try await executor.store.countRoots(TaskQuery(kind: "add"), upTo: nil) == before)
        // An id given twice, or one that is taken, fails the whole batch: nothing of it is added.
        for taken in [["x", "x"], ["y", "first"]] {
            let error = await #expect(throws: ProgressionError.self) {
                try await executor.submit("add", inputs: [Input(number: 9), Input(number: 10)]) { input in
                    JobOptions(id: input.number == 9 ? taken[0] : taken[1])
                }
            }
            guard case .duplicateID(taken[1]) = error else {
                Issue.record("\(String(describing: error)) is not duplicateID(\(taken[1]))")
                continue
            }
            #expect(try await executor.store.task(id: taken[0]) == nil)
        }
        #expect(try await executor.store.countRoots(TaskQuery(kind: "add"), upTo: nil) == before)
        await executor.shutdown()
    }
}
