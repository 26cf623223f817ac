import Foundation
import Progression
import ProgressionTestSupport
import Synchronization
import Testing

/// A store needs only ``TaskStoreCore`` for an executor to run jobs on one host (issue 36): an executor on a store
/// that implements nothing else runs closures and jobs with steps, checkpoints and retries, pauses, cancels and
/// retries them, resumes a dead owner's job from its checkpoint, and refuses what needs a capability the store lacks,
/// saying why and writing nothing.
@Suite struct CoreOnlyStoreTests {
    /// The eleven requirements of the core and nothing else: each goes to a store in memory, counted by name.
    final class CoreOnlyStore: TaskStoreCore {
        let inner = InMemoryTaskStore()
        let calls = Mutex<[String: Int]>([:])

        private func count(_ name: String) { calls.withLock { $0[name, default: 0] += 1 } }

        func task(id: String) async throws -> TaskRecord? {
            count("task")
            return try await inner.task(id: id)
        }
        func tree(of id: String) async throws -> [TaskRecord] {
            count("tree")
            return try await inner.tree(of: id)
        }
        func root(kind: String, idempotencyKey: String) async throws -> TaskRecord? {
            count("root")
            return try await inner.root(kind: kind, idempotencyKey: idempotencyKey)
        }
        func reserveIdentifiers(_ count: Int) async throws -> Range<Int64> {
            self.count("reserveIdentifiers")
            return try await inner.reserveIdentifiers(count)
        }
        func insert(_ tasks: [TaskRecord], events: [TaskEvent]) async throws {
            count("insert")
            try await inner.insert(tasks, events: events)
        }
        func apply(_ batch: TaskBatch) async throws -> TaskBatchResult {
            count("apply")
            return try await inner.apply(batch)
        }
        func change(_ request: TaskChangeRequest) async throws -> TaskChangeResult {
            count("change")
            return try await inner.change(request)
        }
        func claimRoots(_ claim: RootClaim) async throws -> [ClaimedRoot] {
            count("claimRoots")
            return try await inner.claimRoots(claim)
        }
        func transferTree(
            of rootID: String, ifStatusIn statuses: Set<TaskStatus>, from owner: String?, to newOwner: String?
        ) async throws -> Bool {
            count("transferTree")
            return try await inner.transferTree(of: rootID, ifStatusIn: statuses, from: owner, to: newOwner)
        }
        func saveOwner(_ owner: OwnerRecord) async throws {
            count("saveOwner")
            try await inner.saveOwner(owner)
        }
        func owners() async throws -> [OwnerRecord] {
            count("owners")
            return try await inner.owners()
        }
    }

    struct Steps: JobKind {
        struct Input: Codable, Sendable { var n: Int }
        static let name = "steps"

        func run(_ input: Input, context: any TaskContext) async throws -> Int {
            var sum = try context.lastCheckpoint(as: Int.self) ?? 0
            for step in 0..<input.n {
                sum += try await context.push("step-\(step)") { _ in step + 1 }
                try await context.checkpoint(sum)
            }
            return sum
        }
    }

    /// Fails its first run, completes its second.
    struct FailsOnce: JobKind {
        struct Input: Codable, Sendable {}
        static let name = "fails-once"
        static var options: TaskOptions { TaskOptions(canRetry: true) }
        let runs: Counter

        func run(_ input: Input, context: any TaskContext) async throws -> String {
            runs.increment()
            guard runs.count > 1 else { throw TestFailure("the first run fails") }
            return "second"
        }
    }

    /// Resumes from its checkpoint and returns it.
    struct Resumable: JobKind {
        struct Input: Codable, Sendable {}
        static let name = "resumable"

        func run(_ input: Input, context: any TaskContext) async throws -> Int {
            (try context.lastCheckpoint(as: Int.self) ?? 0) + 1
        }
    }

    /// A job that starts a child job.
    struct Parent: JobKind {
        struct Input: Codable, Sendable {}
        static let name = "parent"

        func run(_ input: Input, context: any TaskContext) async throws {
            _ = try await context.startChild(Steps.self, input: .init(n: 1))
        }
    }

    struct Capabilities: Equatable, CustomStringConvertible {
        var control, housekeeping, fleet, jobTrees, beacons: Bool

        init(_ store: any TaskStoreCore) {
            control = store is any ControlRequestQueue
            housekeeping = store is any StoreHousekeeping
            fleet = store is any FleetStore
            jobTrees = store is any JobTreeStore
            beacons = store is any BroadcastingChanges
        }

        init(all: Bool, beacons: Bool) {
            (control, housekeeping, fleet, jobTrees, self.beacons) = (all, all, all, all, beacons)
        }

        var description: String {
            "control \(control), housekeeping \(housekeeping), fleet \(fleet), job trees \(jobTrees), beacons \(beacons)"
        }
    }

    /// What the executor finds when it asks a store for each capability (`as?`): every one on the package's stores
    /// and on a store that wraps one, none on the core alone.
    @Test func theExecutorFindsEveryCapabilityOnThePackagesStoresAndNoneOnTheCore() throws {
        let directory = try TemporaryDirectory()
        let stores: [(String, any TaskStoreCore, Capabilities)] = [
            ("in memory", InMemoryTaskStore(), Capabilities(all: true, beacons: true)),
            ("SQLite", try SQLiteTaskStore(path: directory.file("c.sqlite")), Capabilities(all: true, beacons: true)),
            ("a wrapper", FaultInjectingStore(wrapping: InMemoryTaskStore()), Capabilities(all: true, beacons: false)),
            ("the core alone", CoreOnlyStore(), Capabilities(all: false, beacons: false)),
        ]
        for (name, store, expected) in stores {
            #expect(Capabilities(store) == expected, "\(name)")
        }
    }

    @Test func aDelayedJobRunsAtItsTimeOnTheCoreAlone() async throws {
        let clock = ManualClock()
        let store = CoreOnlyStore()
        var configuration = TaskExecutor.Configuration()
        configuration.clock = clock
        let executor = TaskExecutor(core: store, configuration: configuration)
        try executor.register(Steps())
        try await executor.start()
        let id = try await executor.submit(Steps.self, input: .init(n: 1), options: JobOptions(delay: .seconds(600)))
        let runAt = try #require(try await store.inner.task(id: id)?.nextAttemptAt)
        clock.advance(by: .seconds(300))
        #expect(await eventually(timeout: .milliseconds(300)) { (try? await store.inner.task(id: id))??.status != .pending } == false)
        clock.advance(by: .seconds(300))
        // Without the fleet's earliest waiting time, a later claim pass finds it due.
        try await poll("the delayed job to run") {
            clock.advance(by: .milliseconds(100))
            return try await store.inner.task(id: id)?.status == .completed
        }
        #expect(try #require(try await store.inner.task(id: id)?.startedAt) >= runAt)
        await executor.shutdown()
    }

    @Test func anExecutorRunsJobsClosuresPausesCancelsAndRetriesOnTheCoreAlone() async throws {
        let store = CoreOnlyStore()
        let executor = TaskExecutor(core: store)
        let runs = Counter()
        try executor.register(Steps())
        try executor.register(FailsOnce(runs: runs))
        try await executor.start()

        // A job with steps and checkpoints; the same idempotency key gives the same job.
        let job = try await executor.submit(Steps.self, input: .init(n: 3), options: JobOptions(idempotencyKey: "k"))
        #expect(try await executor.submit(Steps.self, input: .init(n: 9), options: JobOptions(idempotencyKey: "k")) == job)
        try await executor.runEnded(job)
        try await executor.flush()
        let done = try #require(try await executor.store.task(id: job))
        #expect(done.status == .completed)
        #expect(done.result.flatMap { try? JSONDecoder().decode(Int.self, from: $0) } == 6)
        #expect(try await executor.store.tree(of: job).map(\.name) == ["steps", "step-0", "step-1", "step-2"])

        // A job that fails, retried by hand: it runs again and completes.
        let failing = try await executor.submit(FailsOnce.self, input: .init())
        try await executor.runEnded(failing)
        try await executor.flush()
        #expect(try await store.inner.task(id: failing)?.status == .failed)
        _ = try await executor.retry(taskID: failing)
        try await poll("the retried job to complete") {
            try await store.inner.task(id: failing)?.status == .completed
        }
        #expect(runs.count == 2)

        // A closure task paused, resumed, and one cancelled.
        let gate = Gate()
        let held = try await executor.addTask(name: "held", options: TaskOptions(canPause: true)) { context in
            await gate.wait()
            try await context.report(.progress(0.5))
        }
        try await executor.pause(taskID: held)
        #expect(try await store.inner.task(id: held)?.status == .paused)
        try await executor.resume(taskID: held)
        gate.open()
        try await executor.runEnded(held)
        try await executor.flush()
        #expect(try await store.inner.task(id: held)?.status == .completed)
        let forever = try await executor.addTask(name: "forever") { _ in try await Task.sleep(for: .seconds(3_600)) }
        try await executor.cancel(taskID: forever)
        try await executor.runEnded(forever)
        try await executor.flush()
        #expect(try await store.inner.task(id: forever)?.status == .cancelled)

        await executor.shutdown()
        let calls = store.calls.withLock { $0 }
        #expect(calls["apply", default: 0] > 0 && calls["saveOwner", default: 0] > 0)
    }

    @Test func aRestartedExecutorResumesADeadOwnersJobFromItsCheckpoint() async throws {
        let store = CoreOnlyStore()
        // An owner of this host whose process is gone, holding a running job that checkpointed 41.
        let now = Date()
        try await store.inner.saveOwner(
            OwnerRecord(id: "ghost", host: OwnerRecord.currentHost, pid: 999_999_999, startedAt: now, heartbeatAt: now))
        try await store.inner.insert(
            [
                TaskRecord(
                    id: "job", name: "resumable", kind: Resumable.name, input: Data("{}".utf8), status: .running,
                    checkpoint: Data("41".utf8), ownerID: "ghost", createdAt: now, startedAt: now)
            ], events: [])
        let executor = TaskExecutor(core: store)
        try executor.register(Resumable())
        try await executor.start()
        try await poll("the dead owner's job to complete") { try await store.inner.task(id: "job")?.status == .completed }
        let done = try #require(try await store.inner.task(id: "job"))
        #expect(done.result == Data("42".utf8))
        #expect(done.interruptions == 1)
        #expect(done.ownerID == executor.ownerID)
        await executor.shutdown()
    }

    @Test func whatTheStoreCannotDoIsRefusedSayingWhyAndWritesNothing() async throws {
        let store = CoreOnlyStore()
        let executor = TaskExecutor(core: store)
        try executor.register(Steps())
        try executor.register(Parent())
        try await executor.start()
        let before = store.calls.withLock { $0 }

        func refusal(_ body: () async throws -> Void) async -> String? {
            do {
                try await body()
                return nil
            } catch let error as ProgressionError {
                guard case .storeCannot(let type, let action) = error else { return "another error: \(error)" }
                #expect(type.hasSuffix("CoreOnlyStore"))
                return action
            } catch {
                return "another error: \(error)"
            }
        }
        #expect(await refusal { _ = try await executor.pauseKind(Steps.name) } == "pause kinds or keep schedules")
        #expect(
            await refusal {
                try executor.schedule("nightly", Steps.self, input: .init(n: 1), cron: "0 3 * * *")
            } == "pause kinds or keep schedules")
        #expect(
            await refusal {
                try executor.register("limited", input: Steps.Input.self, maxConcurrent: 2) { _, _ in }
            } == "limit a kind's jobs")
        #expect(executor.registeredOptions(of: "limited") == nil)
        #expect(
            await refusal {
                _ = try await executor.submit(Steps.self, input: .init(n: 1), options: JobOptions(after: ["x"]))
            } == "keep child jobs, dependencies or signals")
        #expect(
            await refusal { _ = try await executor.signal("x", name: "go") } == "keep child jobs, dependencies or signals")
        #expect(await refusal { _ = try await executor.store.roots(TaskQuery()) } == "list tasks")
        #expect(await refusal { _ = try await executor.store.events(of: "x") } == "read a task's history")
        // None of them wrote.
        let after = store.calls.withLock { $0 }
        for name in ["insert", "apply", "change", "transferTree"] {
            #expect(after[name, default: 0] == before[name, default: 0], "\(name) was called")
        }

        // A job whose code starts a child job fails, saying why.
        let parent = try await executor.submit(Parent.self, input: .init())
        try await executor.runEnded(parent)
        try await executor.flush()
        let failed = try #require(try await store.inner.task(id: parent))
        #expect(failed.status == .failed)
        #expect(failed.errorDescription?.contains("cannot keep child jobs, dependencies or signals") == true)
        #expect(try await store.inner.roots(TaskQuery()).map(\.id) == [parent], "no child job was written")
        await executor.shutdown()
    }
}
