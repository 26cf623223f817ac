import Foundation
import Logging
import Progression
import ProgressionSQLite
import ProgressionTestSupport
import Synchronization
import Testing

/// What the executor does when its store fails, and the defects of issue 11 that its lifecycle fixed: each test fails
/// on the code before them.
struct ExecutorFaultTests {
    /// Collects the warnings an executor logs.
    final class Warnings: Sendable {
        let messages = Recorder<String>()

        func handler(label: String) -> any LogHandler {
            LogSink { [messages] event, _ in
                if event.level >= .warning { messages.append("\(event.message)") }
            }
        }
    }

    static func configuration(warnings: Warnings? = nil) -> TaskExecutor.Configuration {
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .seconds(600)
        configuration.writeWindow = .milliseconds(2)
        if let warnings { configuration.logger = Logger(label: "test", factory: warnings.handler) }
        return configuration
    }

    /// Defect 1: `push` returned the step's value while the commit of its completion had failed. Now it returns only
    /// once the completion is committed, however long the store fails.
    @Test func aPushReturnsOnlyOnceItsCompletionIsCommitted() async throws {
        let faulty = FaultInjectingStore(wrapping: InMemoryTaskStore())
        let executor = try TaskExecutor(store: faulty, configuration: Self.configuration())
        let release = Gate()
        let storedWhenReturned = Recorder<TaskStatus?>()
        let id = try await executor.addTask(name: "root") { context in
            let value: Int = try await context.push("step") { _ in
                await release.wait()
                return 42
            }
            #expect(value == 42)
            let child = try await faulty.inner.tree(of: context.taskID).first { $0.name == "step" }
            storedWhenReturned.append(child?.status)
        }
        try await waitUntil("the step to run") { executor.snapshot(of: id)?.children.first?.status == .running }
        faulty.plan.failNextWrites(3, with: .diskFull)
        release.open()
        let ended = try await executor.finished(id)
        #expect(ended.status == .completed)
        #expect(storedWhenReturned.all == [.completed])
        #expect(faulty.plan.injected == 3)
        await executor.shutdown()
    }

    /// Issue 15, faults 1 and 2: a full disk or a failing write neither strands nor fails a job. While writes fail
    /// the executor says so (once in its log, and in `storageHealth` and the graph), and it carries on after.
    @Test func aStorageOutageFailsNoJobAndStrandsNone() async throws {
        let directory = try TemporaryDirectory()
        let faulty = FaultInjectingStore(wrapping: try SQLiteTaskStore(path: directory.file("tasks.sqlite")))
        let warnings = Warnings()
        var configuration = Self.configuration(warnings: warnings)
        configuration.maxConcurrentTasks = 4
        let executor = try TaskExecutor(store: faulty, configuration: configuration)
        struct Input: Codable, Sendable { var number: Int }
        let midway = Counter()
        try executor.register("work", input: Input.self, options: .default.retryable()) { input, context in
            try await context.report(.total(3))
            for step in 0..<3 {
                try await context.push("step \(step)", weight: 1) { child in
                    try await child.report(.progress(0.5))
                    try await child.checkpoint(step)
                }
                if step == 1 { midway.increment() }
            }
        }
        try await executor.start()
        faulty.plan.outage(.diskFull, for: .milliseconds(400))
        let ids = try await executor.submit("work", inputs: (0..<20).map { Input(number: $0) })
        try await waitUntil("the outage to show") { !executor.storageHealth.isHealthy || faulty.plan.injected > 0 }
        for id in ids { try await executor.runEnded(id) }
        try await executor.flush()
        #expect(executor.storageHealth.isHealthy)
        let stored = try await faulty.inner.roots(TaskQuery(kind: "work", limit: 100))
        #expect(stored.count == 20)
        #expect(stored.allSatisfy { $0.status == .completed }, "\(stored.map(\.status))")
        #expect(warnings.messages.all.filter { $0.hasPrefix("storage failing") }.count == 1, "\(warnings.messages.all)")
        await executor.shutdown()
    }

    /// A store whose claims (or batches), once `stalls` (`stallsWrites`) is set, wait until their caller is
    /// cancelled and then fail as a call cancelled before it ran, as the SQL stores' do.
    final class StallingStore: TaskStoreForwarding {
        let inner = InMemoryTaskStore()
        let stalls = Atomic<Bool>(false)
        let stallsWrites = Atomic<Bool>(false)
        let stalled = Atomic<Int>(0)

        func forward<T: Sendable>(
            _ call: ForwardedCall, _ body: @Sendable (any TaskStoreBackend) async throws -> T
        ) async throws -> T {
            try await body(inner)
        }

        func claimRoots(_ claim: RootClaim) async throws -> [ClaimedRoot] {
            guard stalls.load(ordering: .acquiring) else { return try await inner.claimRoots(claim) }
            try await stall()
            return []
        }

        func apply(_ batch: TaskBatch) async throws -> TaskBatchResult {
            guard stallsWrites.load(ordering: .acquiring) else { return try await inner.apply(batch) }
            try await stall()
            return try await inner.apply(batch)
        }

        private func stall() async throws {
            stalled.add(1, ordering: .releasing)
            do {
                try await Task.sleep(for: .seconds(3_600))
            } catch {
                throw TaskStoreError(.cancelled, message: "cancelled before it ran")
            }
        }
    }

    /// A shutdown cancels a claim on its way: that is the executor stopping, not the store failing, and its log
    /// says nothing of an outage.
    @Test func aClaimCutShortByAShutdownIsNoStorageOutage() async throws {
        let store = StallingStore()
        let warnings = Warnings()
        var configuration = Self.configuration(warnings: warnings)
        configuration.recoveryInterval = .milliseconds(20)
        let executor = try TaskExecutor(store: store, configuration: configuration)
        try await executor.start()
        store.stalls.store(true, ordering: .releasing)
        try await waitUntil("a claim to be on its way") { store.stalled.load(ordering: .acquiring) > 0 }
        await executor.shutdown()
        #expect(warnings.messages.all.isEmpty, "\(warnings.messages.all)")
    }

    /// A stop that cuts a batch short (the store hangs past the grace period) leaves the tasks as the store had them,
    /// and says so in its log: not as an outage the executor would wait out, as what it did not store.
    @Test func aStopThatCutsABatchShortSaysWhatItDidNotStore() async throws {
        let store = StallingStore()
        let warnings = Warnings()
        var configuration = Self.configuration(warnings: warnings)
        configuration.shutdownGracePeriod = .milliseconds(100)
        let executor = try TaskExecutor(store: store, configuration: configuration)
        try await executor.start()
        let go = Gate()
        let hold = Gate()
        defer { hold.open() }
        let id = try await executor.addTask(name: "reports") { context in
            await go.wait()
            try await context.report(.progress(0.5))
            await hold.wait()
        }
        store.stallsWrites.store(true, ordering: .releasing)
        go.open()
        try await waitUntil("the batch with the report to be on its way") { store.stalled.load(ordering: .acquiring) > 0 }
        await executor.shutdown()
        let logged = warnings.messages.all
        #expect(logged.contains("stopped before task changes were stored"), "\(logged)")
        #expect(!logged.contains { $0.hasPrefix("storage failing") }, "\(logged)")
        // The store has the task as it was before the stop: started, the report not stored.
        #expect(try await store.inner.task(id: id)?.progress != 0.5)
    }

    /// Defect 2: a recovery pass claimed a page of roots and stopped at the first one that failed to load, leaving
    /// the rest held by a live owner that did not run them. Now each claimed root is loaded on its own, and one that
    /// fails is tried again. Each job has a finished step, so that its tree is read after the claim (a claim returns the
    /// tree of a root without subtasks itself).
    @Test func aClaimedRootThatFailsToLoadStrandsNoOther() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("tasks.sqlite")
        let store = try SQLiteTaskStore(path: path)
        let now = Date()
        try await store.saveOwner(
            OwnerRecord(id: "ghost", host: OwnerRecord.currentHost, pid: 999_999_999, startedAt: now, heartbeatAt: now))
        let ids = (0..<10).map { "job\($0)" }
        try await store.insert(
            ids.map {
                TaskRecord(
                    id: $0, name: "job", kind: "noop", input: Data("{}".utf8), status: .running, ownerID: "ghost",
                    createdAt: now, startedAt: now)
            }
                + ids.map {
                    TaskRecord(
                        id: "\($0).step", parentID: $0, rootID: $0, name: "step", status: .completed, createdAt: now,
                        startedAt: now, finishedAt: now)
                }, events: [])
        let faulty = FaultInjectingStore(wrapping: store)
        faulty.plan.failTree(of: "job3", times: 2)
        let executor = try TaskExecutor(store: faulty, configuration: Self.configuration())
        struct Input: Codable, Sendable {}
        let ran = Recorder<String>()
        try executor.register("noop", input: Input.self) { _, context in ran.append(context.taskID) }
        try await executor.start()
        try await waitUntil("every job to complete", timeout: .seconds(120)) {
            try await store.roots(TaskQuery(statuses: [.completed])).count == 10
        }
        #expect(Set(ran.all) == Set(ids))
        #expect(faulty.plan.injected == 2)
        await executor.shutdown()
    }

    /// Defect 3: an unknown control action was read as `cancel`, an unknown event kind as `step`, a missing time as
    /// now. A row the library cannot read is an error that names it.
    @Test func aRowTheLibraryCannotReadIsATypedErrorNamingIt() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("tasks.sqlite")
        let store = try SQLiteTaskStore(path: path)
        try await store.insert([makeRecord(id: "sound")], events: [])
        let raw = try SQLiteConnection(path: path)
        try raw.execute("PRAGMA ignore_check_constraints = ON")
        try raw.execute(
            """
            INSERT INTO tasks (id, root_id, name, options, status, created_at, updated_at)
            VALUES ('odd', 'odd', 'odd', '{"canCancel":true,"canPause":false,"canRetry":false,"priority":0}',
                    'exploded', 0, 0)
            """)
        try raw.execute("INSERT INTO events (task_id, root_id, kind, at, attempt) VALUES ('sound', 'sound', 'teleported', 0, 1)")
        try raw.execute(
            "INSERT INTO control_requests (task_id, action, owner_id, requested_at) VALUES ('sound', 'explode', 'me', 0)")
        raw.close()

        let task = await #expect(throws: TaskStoreError.self) { try await store.task(id: "odd") }
        #expect(task?.reason == .corrupt && task?.message.contains("task 'odd'") == true && task?.message.contains("exploded") == true)
        let events = await #expect(throws: TaskStoreError.self) { try await store.events(of: "sound") }
        #expect(events?.reason == .corrupt && events?.message.contains("teleported") == true)
        let requests = await #expect(throws: TaskStoreError.self) { try await store.pendingControlRequests(for: "me") }
        #expect(requests?.reason == .corrupt && requests?.message.contains("explode") == true)
        #expect(try await store.task(id: "sound") != nil)
    }

    /// Defect 4: registering a kind twice silently replaced the first body. Now the second registration throws and
    /// the first code stays.
    @Test func aKindIsRegisteredOnce() async throws {
        let executor = TaskExecutor(store: InMemoryTaskStore(), configuration: Self.configuration())
        struct Input: Codable, Sendable {}
        let ran = Recorder<String>()
        try executor.register("kind", input: Input.self) { _, _ in ran.append("first") }
        let error = #expect(throws: ProgressionError.self) {
            try executor.register("kind", input: Input.self) { _, _ in ran.append("second") }
        }
        #expect(error?.description == "A job kind 'kind' is registered already: register each kind once")
        let id = try await executor.submit("kind", input: Input())
        try await executor.runEnded(id)
        #expect(ran.all == ["first"])
        await executor.shutdown()
    }

    /// Defect 5 (the library's half; progressctl's is in its tests): a job submitted without its kind's options —
    /// by a process that did not know them — gets them from the executor that runs it.
    @Test func aJobSubmittedWithoutItsKindsOptionsGetsThem() async throws {
        let store = InMemoryTaskStore()
        var options = TaskOptions.default.priority(3)
        options.canRetry = true
        options.givenFields = [.canRetry]
        let submitted = TaskRecord(
            id: "cli-job", name: "resize", kind: "resize", input: Data("{}".utf8), options: options, status: .pending,
            createdAt: Date())
        try await store.insert([submitted], events: [])
        let executor = TaskExecutor(store: store, configuration: Self.configuration())
        struct Input: Codable, Sendable {}
        let running = Gate(), finish = Gate()
        try executor.register("resize", input: Input.self, options: TaskOptions.interactive.priority(7)) { _, _ in
            running.open()
            await finish.wait()
        }
        try await executor.start()
        await running.wait()
        try await executor.pause(taskID: "cli-job")  // pausable: the kind's option
        let stored = try #require(try await store.task(id: "cli-job"))
        #expect(stored.options.canPause && stored.options.canRetry && stored.options.priority == 7)
        #expect(stored.options.givenFields == nil)
        try await executor.resume(taskID: "cli-job")
        finish.open()
        try await executor.runEnded("cli-job")
        let kinds = await store.registeredKinds()
        #expect(kinds["resize"]?.options.canPause == true, "\(kinds)")
        await executor.shutdown()
    }

    /// Defect 6: the executor's loops were detached and never awaited. Now they are child tasks of one task that a
    /// shutdown cancels and awaits: once it returns, none runs.
    @Test(arguments: [false, true])
    func afterShutdownReturnsNoLoopRuns(scheduler: Bool) async throws {
        let executor = TaskExecutor(store: InMemoryTaskStore(), configuration: Self.configuration())
        if scheduler { try await executor.start() }
        let id = try await executor.addTask(name: "t") { _ in }
        try await executor.runEnded(id)
        try await waitUntil("the loops to run") { executor.runningLoops == 10 }
        await executor.shutdown()
        #expect(executor.runningLoops == 0)
    }

    /// Issue 15, fault 3: an operator's pause was lost on a graceful stop. Now a paused job stays paused: the next
    /// executor brings it back paused, and it runs once resumed.
    @Test func aPauseOutlivesAGracefulStop() async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteTaskStore(path: directory.file("tasks.sqlite"))
        struct Input: Codable, Sendable {}
        let reached = Gate()
        let ran = Counter()
        let first = TaskExecutor(store: store, configuration: Self.configuration())
        try first.register("pausable", input: Input.self, options: .interactive) { _, context in
            ran.increment()
            reached.open()
            while true {  // until paused (at a report), then stopped by the shutdown
                try await context.report(.progress(0.5))
                try await Task.sleep(for: .milliseconds(1))
            }
        }
        try await first.start()
        let id = try await first.submit("pausable", input: Input())
        await reached.wait()
        try await first.pause(taskID: id)
        await first.shutdown()
        let stopped = try #require(try await store.task(id: id))
        #expect(stopped.status == .paused && stopped.ownerID == nil)

        let second = TaskExecutor(store: store, configuration: Self.configuration())
        try second.register("pausable", input: Input.self, options: .interactive) { _, context in
            ran.increment()
            try await context.report(.progress(1))
        }
        try await second.start()
        // A paused job stays paused in the store, held by no one: no executor claims it until it is resumed.
        #expect(await eventually(timeout: .milliseconds(300)) { second.snapshot(of: id) != nil } == false)
        #expect(try await store.task(id: id)?.status == .paused)
        #expect(ran.count == 1, "a paused job does not run")
        // Resumed through any executor (here one that does not hold it: a change in the store), it runs.
        try await second.resume(taskID: id)
        try await waitUntil("the resumed job to complete") { try await store.task(id: id)?.status == .completed }
        #expect(ran.count == 2)
        await second.shutdown()
    }

    /// Issue 15, fault 4: `remove --force` of a task a live owner runs was refused. The owner now cancels it, waits
    /// for its code to stop, and removes it.
    @Test func aForcedRemovalThroughTheLiveOwnerCancelsThenRemoves() async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteTaskStore(path: directory.file("tasks.sqlite"))
        var configuration = Self.configuration()
        configuration.controlPollInterval = .milliseconds(10)
        let executor = TaskExecutor(store: store, configuration: configuration)
        try await executor.start()
        let running = Gate()
        let id = try await executor.addTask(name: "long") { context in
            try await context.push("child") { _ in
                running.open()
                try await Task.sleep(for: .seconds(600))
            }
        }
        await running.wait()
        // As progressctl does it: from another connection (SQLite's data_version moves only for those).
        let other = try SQLiteTaskStore(path: directory.file("tasks.sqlite"))
        let request = try await other.addControlRequest(
            ControlRequest(taskID: id, action: .remove, ownerID: executor.ownerID, requestedAt: Date()))
        try await waitUntil("the request to be handled") { try await store.controlRequest(id: request)?.handledAt != nil }
        #expect(try await store.controlRequest(id: request)?.outcome == "applied")
        #expect(try await store.tree(of: id).isEmpty)
        #expect(try await store.events(of: id).isEmpty)
        #expect(executor.snapshot(of: id) == nil)
        await executor.shutdown()
    }
}
