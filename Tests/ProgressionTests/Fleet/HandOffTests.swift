import Foundation
import ProgressionTestSupport
import Synchronization
import Testing

@testable import Progression

/// Resumed and retrying jobs use the fleet (issue 37): a job resumed, or due for its retry, while the worker holding it
/// has no free slot is given back to the store, and a worker with a free slot of its kind continues it from its
/// checkpoint and completed steps (its paused code's memory is given up, as after a crash). On every store.
struct HandOffTests {
    /// One gate per job number, made on first use, shared by every worker of a test.
    final class Gates: Sendable {
        private let gates = Mutex<[Int: Gate]>([:])
        func callAsFunction(_ n: Int) -> Gate {
            gates.withLock { gates in
                if let gate = gates[n] { return gate }
                let gate = Gate()
                gates[n] = gate
                return gate
            }
        }
    }

    /// A job that records its start, stores a checkpoint naming its worker on its first run, waits at its number's
    /// gate, reports (where a pause holds its code) and returns its worker's name. `failFirst`: its first run fails.
    struct Relay: JobKind {
        struct Input: Codable, Sendable {
            var n: Int
            var failFirst = false
        }
        static let name = "relay"
        static let options = TaskOptions.interactive.retryPolicy(
            .exponential(maxAttempts: 2, initialBackoff: .seconds(60), jitter: 0))
        let worker: String
        let gates: Gates
        let runs: Runs

        func run(_ input: Input, context: any TaskContext) async throws -> String {
            let before = runs.byWorker.values.joined().filter { $0 == input.n }.count
            runs.started(input.n, by: worker)
            defer { runs.ended() }
            if input.failFirst && before == 0 { throw RelayError() }
            if try context.lastCheckpoint(as: String.self) == nil { try await context.checkpoint(worker) }
            await gates(input.n).wait()
            try await context.report(.progress(0.5))
            return worker
        }
    }

    struct RelayError: Error {}

    @Test(arguments: StoreKind.allCases)
    func aJobResumedWhileItsWorkerHasNoFreeSlotIsContinuedByAnIdleWorker(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let producer = try database.producer()
        let runs = Runs()
        let gates = Gates()
        let a = try database.worker(slots: 1)
        try a.register(Relay(worker: "a", gates: gates, runs: runs))
        try await a.start()
        // A's one slot: the job runs, is paused (its slot freed), and its code goes on to wait at its report.
        let job = try await a.submit(Relay.self, input: .init(n: 1))
        try await poll("the job to start on a") { runs.byWorker["a"] == [1] }
        try await a.pause(taskID: job)
        gates(1).open()
        // A's freed slot runs another job, held.
        let other = try await a.submit(Relay.self, input: .init(n: 2))
        try await poll("a to run the other job") { runs.byWorker["a"] == [1, 2] }
        let b = try database.worker(slots: 1)
        try b.register(Relay(worker: "b", gates: gates, runs: runs))
        try await b.start()

        // Resumed while a has no free slot: b, idle, continues it — from a's checkpoint, a's paused code given up.
        try await a.resume(taskID: job)
        #expect(try await producer.result(of: job, as: Relay.self, timeout: .seconds(120)) == "b")
        let done = try #require(try await producer.job(job))
        #expect(done.attempt == 1 && done.interruptions == 0, "a hand-off is neither a retry nor a crash: \(done)")
        #expect(
            try done.checkpoint.map { try JSONDecoder().decode(String.self, from: $0) } == "a",
            "b went on from a's checkpoint")
        #expect(runs.byWorker == ["a": [1, 2], "b": [1]], "\(runs.byWorker)")
        #expect(a.snapshot(of: job) == nil, "it left a's memory")
        #expect(try await producer.job(other)?.ownerID == a.ownerID, "a kept the job it runs")
        gates(2).open()
        #expect(try await producer.result(of: other, as: Relay.self, timeout: .seconds(120)) == "a")
        await a.shutdown()
        await b.shutdown()
        await database.closeAll()
    }

    @Test(arguments: StoreKind.allCases)
    func aRetryDueWhileItsWorkerHasNoFreeSlotIsRunByAnIdleWorker(kind: StoreKind) async throws {
        let clock = ManualClock()
        let database = try SharedDatabase(kind)
        let producer = try database.producer(clock: clock)
        let runs = Runs()
        let gates = Gates()
        gates(3).open()
        let a = try database.worker(slots: 1, clock: clock)
        try a.register(Relay(worker: "a", gates: gates, runs: runs))
        try await a.start()
        // Its first attempt fails on a; its retry waits 60 s (on the test's clock).
        let job = try await a.submit(Relay.self, input: .init(n: 3, failFirst: true))
        try await poll("the first attempt to fail and wait for its retry") {
            try await producer.job(job)?.waitReason == .retry
        }
        // Meanwhile a's slot runs another job, held.
        let other = try await a.submit(Relay.self, input: .init(n: 4))
        try await poll("a to run the other job") { runs.byWorker["a"] == [3, 4] }
        let b = try database.worker(slots: 1, clock: clock)
        try b.register(Relay(worker: "b", gates: gates, runs: runs))
        try await b.start()

        // Due while a has no free slot: b runs the second attempt.
        clock.advance(by: .seconds(60))
        try await poll("the retry to complete") {
            clock.advance(by: .milliseconds(100))
            return try await producer.job(job)?.status == .completed
        }
        let done = try #require(try await producer.job(job))
        #expect(done.attempt == 2, "\(done)")
        #expect(try await producer.result(of: job, as: Relay.self) == "b")
        #expect(runs.byWorker == ["a": [3, 4], "b": [3]], "\(runs.byWorker)")
        gates(4).open()
        try await poll("the other job to complete on a") {
            clock.advance(by: .milliseconds(100))
            return try await producer.job(other)?.status == .completed
        }
        await a.shutdown()
        await b.shutdown()
        await database.closeAll()
    }

    /// A job whose code, stopped to be handed off, returns all the same has completed where it ran.
    @Test(arguments: StoreKind.allCases)
    func aJobWhoseCodeReturnsWhenStoppedForTheHandOffCompletesWhereItRan(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let producer = try database.producer()
        let first = Gate()
        let second = Gate()
        let a = try database.worker(slots: 1)
        try a.register("stubborn", input: Int.self, output: String.self, options: .interactive) { n, context in
            if n == 2 {
                await second.wait()
                return "other"
            }
            await first.wait()
            try? await context.report(.progress(0.5))  // stopped while paused: it returns anyway
            return "a"
        }
        try await a.start()
        let job = try await a.submit("stubborn", input: 1)
        try await a.waitForStatus(job, .running)
        try await a.pause(taskID: job)
        first.open()
        let other = try await a.submit("stubborn", input: 2)
        try await a.waitForStatus(other, .running)
        try await a.resume(taskID: job)
        let done = try await producer.wait(for: job, timeout: .seconds(120))
        #expect(done.status == .completed && done.result == Data(#""a""#.utf8), "\(done)")
        second.open()
        _ = try await producer.wait(for: other, timeout: .seconds(120))
        await a.shutdown()
        await database.closeAll()
    }

    /// A closure task (which no other worker can run) resumed while its executor has no free slot waits for one there.
    @Test func aClosureTaskResumedWithoutAFreeSlotWaitsForOneOnItsExecutor() async throws {
        let executor = try TaskExecutor(
            store: InMemoryTaskStore(), configuration: { var c = TaskExecutor.Configuration(); c.maxConcurrentTasks = 1; return c }())
        let first = Gate()
        let second = Gate()
        let reached = Counter()
        let task = try await executor.addTask(name: "closure", options: .interactive) { context in
            await first.wait()
            reached.increment()
            try await context.report(.progress(0.5))
        }
        try await executor.waitForStatus(task, .running)
        try await executor.pause(taskID: task)
        first.open()
        let other = try await executor.addTask(name: "other", options: .interactive) { _ in await second.wait() }
        try await executor.waitForStatus(other, .running)
        try await executor.resume(taskID: task)
        try await executor.waitForStatus(task, .pending)
        #expect(executor.snapshot(of: task) != nil, "still here, waiting for the slot")
        second.open()
        #expect(try await executor.finished(task).status == .completed)
        await executor.shutdown()
    }
}
