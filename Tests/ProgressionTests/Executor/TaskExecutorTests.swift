import Foundation
import ProgressionTestSupport
import Testing

@testable import Progression

struct TaskExecutorTests {
    @Test(arguments: StoreKind.allCases)
    func aTaskRunsCompletesAndIsStored(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(kind, in: directory)
        let id = try await executor.addTask(name: "Data Import", id: "import-1", options: .interactive) { context in
            try await context.report(.named("Initializing..."))
            try await context.report(.progress(0.2))
            try await context.push("Downloading files") { download in
                for index in 1...10 { try await download.report(.progress(Double(index) / 10)) }
            }
            try await context.report(.progress(1.0))
        }
        #expect(id == "import-1")
        let snapshot = try await executor.finished(id)
        #expect(snapshot.status == .completed)
        #expect(snapshot.progress == 1)
        #expect(snapshot.stepName == "Initializing...")
        #expect(snapshot.children.map(\.name) == ["Downloading files"])
        #expect(snapshot.children.first?.status == .completed)
        try await executor.flush()
        let stored = try #require(try await executor.store.task(id: id))
        #expect(stored.status == .completed && stored.progress == 1 && stored.finishedAt != nil)
        let kinds = try await executor.store.events(of: id, after: nil, limit: 100).map(\.kind)
        #expect(kinds.first == .created)
        #expect(kinds.filter { $0 == .completed }.count == 2)
        #expect(kinds.contains(.step))
        await executor.shutdown()
    }

    @Test(arguments: StoreKind.allCases)
    func aDuplicateIDIsRefusedAndTheStoredTaskIsLeftAlone(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let first = try TaskExecutor(store: store)
        try await first.addTask(name: "first", id: "same") { _ in }
        await #expect(throws: ProgressionError.self) { try await first.addTask(name: "again", id: "same") { _ in } }
        try await first.runEnded("same")
        await first.shutdown()
        // Another executor on the same store: the row exists, the insert finds the id taken.
        let second = try TaskExecutor(store: store)
        let error = await #expect(throws: ProgressionError.self) {
            try await second.addTask(name: "second", id: "same") { _ in }
        }
        #expect(error?.description == "A task with id 'same' exists already")
        #expect(try await store.task(id: "same")?.name == "first")
        #expect(second.snapshot(of: "same") == nil)
        #expect(try await store.events(of: "same", after: nil, limit: 100).filter { $0.kind == .created }.count == 1)
        // The executor goes on working.
        let other = try await second.addTask(name: "other") { _ in }
        #expect(try await second.finished(other).status == .completed)
        await second.shutdown()
    }

    static let invalidReports: [TaskProgress] = [
        .progress(.nan), .progress(.infinity), .progress(-0.1), .progress(1.1), .step(1, of: 0), .step(3, of: 2),
        .step(-1, of: 2), .named("x").progress(2),
    ]

    @Test(arguments: invalidReports)
    func anInvalidReportThrowsAndChangesNothing(report: TaskProgress) async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory)
        let caught = Recorder<String>()
        let proceed = Gate()
        let id = try await executor.addTask(name: "t") { context in
            try await context.report(.named("before").progress(0.4))
            do {
                try await context.report(report)
            } catch let error as ProgressionError {
                caught.append(error.description)
            }
            await proceed.wait()
        }
        try await waitUntil("the invalid report") { caught.all.count == 1 }
        let snapshot = try #require(executor.snapshot(of: id))
        #expect(snapshot.progress == 0.4 && snapshot.stepName == "before")
        #expect(caught.all.first?.hasPrefix("Invalid progress value") == true)
        proceed.open()
        _ = try await executor.finished(id)
        await executor.shutdown()
    }

    @Test func pausingPausesTheSubtreeAndConcurrentReportersWaitThenContinue() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.sqlite, in: directory)
        let started = Counter(), passed = Counter(), release = Gate()
        let id = try await executor.addTask(name: "root", options: .interactive) { context in
            try await context.push("child") { child in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<2 {
                        group.addTask {
                            started.increment()
                            await release.wait()
                            try await child.report(.progress(0.5))
                            passed.increment()
                        }
                    }
                    try await group.waitForAll()
                }
            }
        }
        try await waitUntil("both reporters") { started.count == 2 }
        try await executor.pause(taskID: id)
        let paused = try #require(executor.snapshot(of: id))
        #expect(paused.status == .paused)
        #expect(paused.children.first?.status == .paused)
        #expect(try await executor.store.task(id: id)?.status == .paused, "committed before pause returned")
        release.open()
        // Both reporters reach their report and wait there while the task is paused (their waits read from the graph).
        try await waitUntil("both reporters to wait in their report") {
            executor.engine.locked { state in state.nodes.values.reduce(0) { $0 + $1.pauseWaiters.count } } == 2
        }
        #expect(passed.count == 0)
        try await executor.resume(taskID: id)
        try await waitUntil("both reporters to continue") { passed.count == 2 }
        #expect(try await executor.finished(id).status == .completed)
        await executor.shutdown()
    }

    @Test func cancellingAPausedTaskCancelsIt() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory)
        let reported = Gate(), afterPause = Counter()
        let id = try await executor.addTask(name: "root", options: .interactive) { context in
            try await context.report(.progress(0.1))
            reported.open()
            while true {
                try await context.report(.progress(0.2))
                afterPause.increment()
                try await Task.sleep(for: .milliseconds(1))
            }
        }
        await reported.wait()
        try await executor.pause(taskID: id)
        try await executor.cancel(taskID: id)
        let snapshot = try await executor.finished(id)
        #expect(snapshot.status == .cancelled)
        await executor.shutdown()
    }

    /// On a manual clock: the timeout's deadline passes while the task is paused, the timer fires and, finding that the
    /// paused time does not count, arms itself again for the time left (the event waited for, read from the timer
    /// queue); the task stays paused, and completes once resumed.
    @Test func aTimeoutDoesNotTickWhilePaused() async throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock()
        let executor = try await makeExecutor(.memory, in: directory, clock: clock)
        let paused = Gate()
        let id = try await executor.addTask(name: "root", options: TaskOptions.interactive.timeout(.seconds(2))) {
            context in
            try await executor.pause(taskID: context.taskID)
            paused.open()
            try await context.report(.progress(0.5))  // waits here while paused
        }
        await paused.wait()
        let armed = try #require(executor.engine.locked { $0.timers.earliest }, "the timeout's deadline")
        clock.advance(by: .seconds(3))  // past the timeout, paused
        try await waitUntil("the timer to fire and arm again for the time left") {
            executor.engine.locked { $0.timers.earliest }.map { $0 > armed } ?? false
        }
        #expect(executor.snapshot(of: id)?.status == .paused)
        try await executor.resume(taskID: id)
        #expect(try await executor.finished(id).status == .completed)
        await executor.shutdown()
    }

    @Test func cancellingAParentCancelsItsRunningChildren() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.sqlite, in: directory)
        let running = Counter()
        let id = try await executor.addTask(name: "parent") { context in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<3 {
                    group.addTask {
                        try await context.push("child \(index)") { child in
                            try await child.push("grandchild") { _ in
                                running.increment()
                                try await Task.sleep(for: .seconds(600))
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await waitUntil("grandchildren running") { running.count == 3 }
        try await executor.cancel(taskID: id)
        let snapshot = try await executor.finished(id)
        #expect(snapshot.status == .cancelled)
        for node in snapshot.allNodes {
            #expect(node.status == .cancelled, "\(node.name) is \(node.status)")
        }
        await executor.shutdown()
    }

    @Test func cancelAllStopsEveryTasksCode() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory)
        let running = Counter()
        var ids: [String] = []
        for index in 0..<5 {
            ids.append(
                try await executor.addTask(name: "task \(index)") { _ in
                    running.increment()
                    try await Task.sleep(for: .seconds(600))
                })
        }
        try await waitUntil("all running") { running.count == 5 }
        await executor.cancelAll()
        for id in ids {
            #expect(try await executor.finished(id).status == .cancelled)
        }
        await executor.shutdown()
    }

    struct Boom: Error, LocalizedError {
        var errorDescription: String? { "boom" }
    }

    @Test func aChildsErrorFailsItsParentUnlessTheParentCatchesIt() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory)
        let failing = try await executor.addTask(name: "failing") { context in
            try await context.push("outer") { outer in
                try await outer.push("inner") { _ in throw Boom() }
            }
        }
        let failed = try await executor.finished(failing)
        #expect(failed.status == .failed)
        #expect(failed.errorDescription == "Subtask 'inner' failed: boom")
        #expect(failed.errorType?.hasSuffix("ProgressionError") == true)
        #expect(failed.children.first?.status == .failed)
        #expect(failed.children.first?.children.first?.errorDescription == "boom")

        let catching = try await executor.addTask(name: "catching") { context in
            do {
                try await context.push("inner") { _ in throw Boom() }
            } catch ProgressionError.subtaskFailed(let name, let underlying) {
                #expect(name == "inner" && underlying is Boom)
            }
        }
        let caught = try await executor.finished(catching)
        #expect(caught.status == .completed)
        #expect(caught.children.first?.status == .failed)
        await executor.shutdown()
    }

    @Test func retryRunsAFailedRetryableTaskAgainUnderTheSameIDWithTheNextAttempt() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.sqlite, in: directory)
        let runs = Counter()
        let id = try await executor.addTask(name: "flaky", options: TaskOptions.default.retryable()) { _ in
            runs.increment()
            if runs.count == 1 { throw Boom() }
        }
        #expect(try await executor.finished(id).status == .failed)
        #expect(try await executor.retry(taskID: id) == id)
        try await executor.runEnded(id)
        let snapshot = try #require(executor.snapshot(of: id))
        #expect(snapshot.status == .completed && snapshot.attempt == 2 && snapshot.errorDescription == nil)
        #expect(try await executor.store.task(id: id)?.attempt == 2)

        let plain = try await executor.addTask(name: "plain") { _ in throw Boom() }
        _ = try await executor.finished(plain)
        await #expect(throws: ProgressionError.self) { try await executor.retry(taskID: plain) }
        await #expect(throws: ProgressionError.self) { try await executor.retry(taskID: "missing") }
        await executor.shutdown()
    }

    /// Whether a subtask's value is stored depends on its type, not on which `push` the caller's code resolved to:
    /// pushed from generic code that only knows `T: Sendable`, a `Codable` value is still stored and returned on the
    /// next run without running its subtask again; a value of another type runs again.
    @Test func aCodableValuePushedFromGenericCodeIsStoredAndNotRunAgain() async throws {
        struct Handle: Sendable { let value: Int }  // not Codable: cannot be stored
        @Sendable func step<T: Sendable>(_ context: any TaskContext, _ name: String, _ make: @escaping @Sendable () -> T)
            async throws -> T
        { try await context.push(name) { _ in make() } }

        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.sqlite, in: directory)
        let codableRuns = Counter()
        let handleRuns = Counter()
        let attempts = Counter()
        let results = Recorder<String>()
        let id = try await executor.addTask(name: "generic", options: TaskOptions.default.retryable()) { context in
            attempts.increment()
            let number = try await step(context, "number") {
                codableRuns.increment()
                return 40 + codableRuns.count
            }
            let handle = try await step(context, "handle") {
                handleRuns.increment()
                return Handle(value: handleRuns.count)
            }
            results.append("\(number) \(handle.value)")
            if attempts.count == 1 { throw Boom() }
        }
        #expect(try await executor.finished(id).status == .failed)
        try await executor.retry(taskID: id)
        try await executor.runEnded(id)
        #expect(executor.snapshot(of: id)?.status == .completed)
        #expect(codableRuns.count == 1, "the stored Int was returned, not computed again")
        #expect(handleRuns.count == 2, "a value that cannot be stored is computed again")
        #expect(results.all == ["41 1", "41 2"])
        await executor.shutdown()
    }

    /// A `TaskStore` of the user's own can be read but cannot run tasks: the executor refuses it with a typed error
    /// (it used to stop the process), and takes any of the package's stores known only as `any TaskStore`.
    @Test func aStoreOfAnotherTypeIsRefusedAndThePackagesStoresAreTakenAsAnyTaskStore() async throws {
        struct ReadingStore: TaskStore {
            let base = InMemoryTaskStore()
            func task(id: String) async throws -> TaskRecord? { await base.task(id: id) }
            func tree(of id: String) async throws -> [TaskRecord] { await base.tree(of: id) }
            func roots(_ query: TaskQuery) async throws -> [TaskRecord] { await base.roots(query) }
            func countRoots(_ query: TaskQuery, upTo bound: Int?) async throws -> Int {
                await base.countRoots(query, upTo: bound)
            }
            func events(_ query: EventQuery) async throws -> [TaskEvent] { await base.events(query) }
            func root(kind: String, idempotencyKey: String) async throws -> TaskRecord? {
                await base.root(kind: kind, idempotencyKey: idempotencyKey)
            }
            func taskIDs(withPrefix prefix: String, rootsOnly: Bool, limit: Int) async throws -> [String] {
                await base.taskIDs(withPrefix: prefix, rootsOnly: rootsOnly, limit: limit)
            }
            func statistics() async throws -> TaskStoreStatistics { await base.statistics() }
            func failedSteps(ofRoots ids: [String]) async throws -> [String: Int] {
                await base.failedSteps(ofRoots: ids)
            }
        }
        let foreign: any TaskStore = ReadingStore()
        #expect {
            _ = try TaskExecutor(store: foreign)
        } throws: { error in
            guard case .unsupportedStore(let type) = error as? ProgressionError else { return false }
            return type == "ReadingStore" && "\(error)".contains("cannot run or enqueue jobs on a ReadingStore")
        }
        #expect(throws: ProgressionError.self) { _ = try JobClient(store: foreign) }
        let directory = try TemporaryDirectory()
        let ours: any TaskStore = try SQLiteTaskStore(path: directory.file("any.sqlite"))
        let executor = try TaskExecutor(store: ours)
        let id = try await executor.addTask(name: "runs") { context in try await context.report(.progress(1)) }
        #expect(try await executor.finished(id).status == .completed)
        let client = try JobClient(store: ours)
        #expect(try await client.job(id)?.status == .completed)
        await executor.shutdown()
    }

    @Test func retryingRightAfterACancelKeepsTheNewRunVisible() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.sqlite, in: directory)
        let runs = Counter()
        let started = Gate()
        let id = try await executor.addTask(name: "long", options: TaskOptions.interactive.retryable()) { context in
            runs.increment()
            if runs.count == 1 {
                started.open()
                try await Task.sleep(for: .seconds(600))
            }
            try await context.report(.progress(1))
        }
        await started.wait()
        try await executor.cancel(taskID: id)
        try await executor.retry(taskID: id)
        try await executor.runEnded(id)
        let snapshot = try #require(executor.snapshot(of: id))
        #expect(snapshot.status == .completed && snapshot.attempt == 2)
        let kinds = try await executor.store.events(of: id, after: nil, limit: 100).map(\.kind)
        #expect(kinds.filter { $0 == .cancelled }.count == 1 && kinds.last == .completed)
        await executor.shutdown()
    }

    @Test func automaticRetriesFollowThePolicysBackoff() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory)
        let starts = Recorder<ContinuousClock.Instant>()
        let policy = RetryPolicy.exponential(maxAttempts: 3, initialBackoff: .milliseconds(100), multiplier: 2, jitter: 0)
        let id = try await executor.addTask(name: "flaky", options: TaskOptions.default.retryPolicy(policy)) { _ in
            starts.append(.now)
            if starts.all.count < 3 { throw Boom() }
        }
        try await executor.runEnded(id)
        let snapshot = try #require(executor.snapshot(of: id))
        #expect(snapshot.status == .completed && snapshot.attempt == 3)
        let times = starts.all
        #expect(times.count == 3)
        #expect(times[1] - times[0] >= .milliseconds(100))
        #expect(times[2] - times[1] >= .milliseconds(200))

        let hopeless = try await executor.addTask(name: "hopeless", options: TaskOptions.default.retryPolicy(policy)) { _ in
            throw Boom()
        }
        try await executor.runEnded(hopeless)
        let failed = try #require(executor.snapshot(of: hopeless))
        #expect(failed.status == .failed && failed.attempt == 3)

        struct Fatal: NonRetryableError {}
        let fatal = try await executor.addTask(name: "fatal", options: TaskOptions.default.retryPolicy(policy)) { _ in
            throw Fatal()
        }
        try await executor.runEnded(fatal)
        #expect(executor.snapshot(of: fatal)?.attempt == 1)
        await executor.shutdown()
    }

    @Test func aTimeoutFailsTheTaskCancelsItsSubtreeAndAnEarlyEndLeavesNoTimer() async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory)
        let root = try await executor.addTask(name: "slow", options: TaskOptions.default.timeout(.milliseconds(200))) {
            context in
            try await context.push("child") { _ in try await Task.sleep(for: .seconds(600)) }
        }
        let timedOut = try await executor.finished(root)
        #expect(timedOut.status == .failed)
        #expect(timedOut.errorDescription == "Task timed out after 0.2 seconds")
        #expect(timedOut.errorType?.hasSuffix("TaskTimeoutError") == true)
        #expect(timedOut.children.first?.status == .cancelled)

        let childTimeout = try await executor.addTask(name: "parent") { context in
            try await context.push("slow child", weight: 1, options: TaskOptions.default.timeout(.milliseconds(100))) { _ in
                try await Task.sleep(for: .seconds(600))
            }
        }
        let parent = try await executor.finished(childTimeout)
        #expect(parent.status == .failed)
        #expect(parent.errorDescription == "Subtask 'slow child' failed: Task timed out after 0.1 seconds")
        #expect(parent.children.first?.status == .failed)

        let quick = try await executor.addTask(name: "quick", options: TaskOptions.default.timeout(.milliseconds(100))) {
            _ in
        }
        #expect(try await executor.finished(quick).status == .completed)
        // Its timeout's deadline comes and goes (the timer queue empties): the ended task is left as it was.
        try await waitUntil("the quick task's timer to fire") { executor.engine.locked { $0.timers.earliest } == nil }
        #expect(executor.snapshot(of: quick)?.status == .completed)
        await executor.shutdown()
    }

    @Test(arguments: StoreKind.allCases)
    func afterFlushTheStoreHoldsTheLastSnapshotOfEveryNode(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(kind, in: directory)
        let hold = Gate()
        let id = try await executor.addTask(name: "tree", options: .interactive) { context in
            try await context.report(.named("working").progress(0.1))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<4 {
                    group.addTask {
                        try await context.push("part \(index)", weight: Double(index + 1)) { part in
                            try await part.report(.named("part step").progress(Double(index) / 4))
                            if index == 3 { await hold.wait() }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await waitUntil("parts 0-2 done") {
            let nodes = executor.snapshot(of: id)?.children ?? []
            return nodes.filter(\.isCompleted).count == 3 && nodes.count == 4
        }
        for stage in 0..<2 {
            try await executor.flush()
            let snapshot = try #require(executor.snapshot(of: id))
            let stored = try await executor.store.tree(of: id)
            #expect(stored.count == snapshot.allNodes.count)
            for node in snapshot.allNodes {
                let record = try #require(stored.first { $0.id == node.id })
                #expect(record.status == node.status, "stage \(stage) \(node.name)")
                #expect(record.progress == node.progress, "stage \(stage) \(node.name)")
                #expect(record.step == node.stepName)
                #expect(record.attempt == node.attempt)
                #expect(record.errorDescription == node.errorDescription)
                #expect(record.updatedAt == node.updatedAt)
            }
            hold.open()
            _ = try await executor.finished(id)
        }
        await executor.shutdown()
    }

    @Test func theProgressStreamCoalescesReportsAndPublishesTheLatestGraph() async throws {
        let directory = try TemporaryDirectory()
        var configuration = TaskExecutor.Configuration()
        configuration.publishInterval = .milliseconds(50)
        configuration.completedTaskVisibility = .seconds(600)
        let executor = try TaskExecutor(store: try await StoreKind.memory.make(in: directory), configuration: configuration)
        let stream = executor.progressStream
        let reports = 200_000
        let clock = ContinuousClock()
        let start = clock.now
        let id = try await executor.addTask(name: "busy") { context in
            for index in 1...reports { try await context.report(.progress(Double(index) / Double(reports))) }
        }
        let graphs = try await within(.seconds(120), "the completed task on the stream") {
            var graphs = 0
            for await graph in stream {
                graphs += 1
                if graph.task(id)?.isCompleted == true { break }
            }
            return graphs
        }
        let elapsed = clock.now - start
        // One graph per publish interval at most (plus the first and the last), not one per report.
        let bound = Int(elapsed / .milliseconds(50)) + 3
        #expect(graphs <= bound, "\(graphs) graphs for \(reports) reports in \(elapsed)")
        await executor.shutdown()
    }
}


struct ExecutorLifetimeTests {
    @Test func anExecutorNobodyShutsDownIsReleased() async throws {
        let directory = try TemporaryDirectory()
        weak var released: TaskExecutor?
        do {
            let executor = try await makeExecutor(.sqlite, in: directory)
            released = executor
            let id = try await executor.addTask(name: "t") { context in try await context.report(.progress(1)) }
            _ = try await executor.finished(id)
            try await executor.flush()
        }
        try await waitUntil("the executor to be released") { released == nil }
    }
}

struct VisibilityTests {
    struct Boom: Error {}

    @Test func finishedRootsLeaveMemoryAfterTheirVisibilityAndTheirHistoryStays() async throws {
        let directory = try TemporaryDirectory()
        var configuration = TaskExecutor.Configuration()
        configuration.completedTaskVisibility = .milliseconds(100)
        let executor = try TaskExecutor(store: try await StoreKind.sqlite.make(in: directory), configuration: configuration)
        let done = try await executor.addTask(name: "done") { context in
            try await context.push("child") { _ in }
        }
        let failed = try await executor.addTask(name: "failed") { _ in throw Boom() }
        _ = try await executor.finished(failed)
        try await waitUntil("the completed root to leave memory") { executor.snapshot(of: done) == nil }
        #expect(executor.graph().tasks.map(\.id) == [failed], "a failed root stays until removed")
        #expect(try await executor.store.tree(of: done).map(\.status) == [.completed, .completed])
        #expect(try await executor.store.events(of: done, after: nil, limit: 100).last?.kind == .completed)
        try await executor.remove(taskID: failed)
        #expect(executor.graph().tasks.isEmpty)
        #expect(try await executor.store.task(id: failed) == nil)
        await executor.shutdown()
    }
}
