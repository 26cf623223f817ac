import Foundation
import Progression
import ProgressionTestSupport
import Synchronization
import Testing

/// A fleet in one process: a producer that only enqueues, and workers on connections of their own that share the
/// backlog (issue 22). The multi-process versions run the real executables (`FleetProcessTests`).
@Suite struct FleetTests {
    @Test(arguments: StoreKind.allCases)
    func aProducerEnqueuesWithoutAHandlerAndReadsTheWorkersResult(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let producer = try database.producer()
        // Submitted with no worker running: nothing runs it, and it waits unowned.
        let id = try await producer.submit(Doubler.self, input: .init(n: 21), options: JobOptions(name: "twenty-one"))
        let waiting = try #require(try await producer.job(id))
        #expect(waiting.status == .pending && waiting.ownerID == nil && waiting.name == "twenty-one")
        let batch = try await producer.submit(Doubler.self, inputs: (1...5).map { Doubler.Input(n: $0) })
        #expect(batch.count == 5 && Set(batch).count == 5)

        let worker = try database.worker(slots: 2)
        try worker.register(Doubler(worker: "w1"))
        try await worker.start()
        let output = try await producer.result(of: id, as: Doubler.self, timeout: .seconds(120))
        #expect(output == Doubler.Output(doubled: 42, worker: "w1"))
        for (n, job) in zip(1...5, batch) {
            #expect(try await producer.result(of: job, as: Doubler.self, timeout: .seconds(120)).doubled == n * 2)
        }
        // The result is stored with the root, as JSON.
        let done = try #require(try await producer.job(id))
        #expect(done.status == .completed)
        #expect(try JSONDecoder().decode(Doubler.Output.self, from: try #require(done.result)).doubled == 42)
        await worker.shutdown()
    }

    @Test func aProducerSubmitIsOneTransactionAndKeepsIdempotencyKeys() async throws {
        let database = try SharedDatabase(.sqlite)
        let producer = try database.producer()
        let first = try await producer.submit(
            Doubler.self, input: .init(n: 1), options: JobOptions(idempotencyKey: "one"))
        let ids = try await producer.submit(Doubler.self, inputs: [.init(n: 1), .init(n: 2), .init(n: 2)]) { input in
            JobOptions(idempotencyKey: input.n == 1 ? "one" : "two")
        }
        #expect(ids[0] == first)
        #expect(ids[1] == ids[2] && ids[1] != first)
        #expect(try await producer.store.countRoots(TaskQuery(kind: "double")) == 2)
    }

    @Test func badSubmissionsAreRefusedAndWriteNothing() async throws {
        let database = try SharedDatabase(.sqlite)
        let producer = try database.producer()
        await #expect(throws: ProgressionError.self) {
            try await producer.submit(
                Doubler.self, input: .init(n: 1), options: JobOptions(runAt: Date(), delay: .seconds(1)))
        }
        await #expect(throws: ProgressionError.self) {
            try await producer.submit(Doubler.self, input: .init(n: 1), options: JobOptions(delay: .seconds(-5)))
        }
        await #expect(throws: ProgressionError.self) {
            try await producer.submit(
                Doubler.self, input: .init(n: 1), options: JobOptions(delay: .seconds(Int64.max / 2)))
        }
        var small = JobClient.Configuration()
        small.maxInputBytes = 64
        let limited = JobClient(backend: try database.open(), configuration: small)
        await #expect(throws: JobInputTooLargeError.self) {
            try await limited.submit(Echo.self, inputs: [.init(text: "small"), .init(text: String(repeating: "x", count: 100))])
        }
        #expect(try await producer.store.countRoots(TaskQuery()) == 0)
    }

    /// Two workers share a backlog, each holding only what its slots can start, and each claims again as its own slots
    /// free while the other's are full (each job has a gate of its own, so which worker may claim is decided by the
    /// test, not by which of them runs faster on a loaded machine).
    @Test(arguments: StoreKind.allCases)
    func twoWorkersShareABacklogAndEachClaimsOnlyWhatItCanStart(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let producer = try database.producer()
        let ids = try await producer.submit(GatedByNumber.self, inputs: (0..<20).map { GatedByNumber.Input(n: $0) })
        let gates = NumberedGates(count: 20)
        let runs = Runs()
        let first = try database.worker(slots: 2)
        try first.register(GatedByNumber(worker: "a", gates: gates, runs: runs))
        try await first.start()
        try await poll("the first worker's two jobs to start") { runs.total == 2 }
        // It holds two (its slots), not the backlog.
        #expect(try await producer.store.census().filter { $0.ownerID == first.ownerID }.count == 2)
        let second = try database.worker(slots: 2)
        try second.register(GatedByNumber(worker: "b", gates: gates, runs: runs))
        try await second.start()
        try await poll("the second worker's two jobs to start") { runs.byWorker["b"]?.count == 2 }
        func holds() async throws -> (a: Int, b: Int, unowned: Int) {
            let census = try await producer.store.census().filter { !$0.status.isFinished }
            return (
                census.filter { $0.ownerID == first.ownerID }.count,
                census.filter { $0.ownerID == second.ownerID }.count,
                census.filter { $0.ownerID == nil && $0.status == .pending }.count
            )
        }
        #expect(try await holds() == (2, 2, 16))
        // One worker's jobs end while the other's slots are full: it takes two more, and only two.
        for (worker, started) in [("a", 4), ("b", 4)] {
            for n in runs.byWorker[worker] ?? [] { gates.open(n) }
            try await poll("worker \(worker)'s next two jobs to start") { runs.byWorker[worker]?.count == started }
        }
        try await poll("the four first jobs' ends") { try await holds() == (2, 2, 12) }
        gates.openAll()
        for id in ids { _ = try await producer.wait(for: id, timeout: .seconds(60)) }
        let byWorker = runs.byWorker
        #expect(runs.total == 20, "each job ran once: \(byWorker)")
        #expect(Set(byWorker.values.flatMap { $0 }) == Set(0..<20))
        #expect((byWorker["a"]?.count ?? 0) >= 4 && (byWorker["b"]?.count ?? 0) >= 4, "\(byWorker)")
        await first.shutdown()
        await second.shutdown()
    }

    /// A worker's own `submit` leaves what its slots cannot start unowned in the store, as a producer's does: a worker
    /// that dies leaves to be claimed from it only what it ran, and its backlog is the fleet's at once.
    @Test(arguments: StoreKind.allCases)
    func aWorkersOwnSubmitsWaitUnownedAndItHoldsOnlyWhatItRuns(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let producer = try database.producer()
        let gate = Gate()
        let runs = Runs()
        // Heartbeats judged stale only after two minutes: on a loaded machine (this test took 101 s in one CI run) a
        // worker must not take the first's jobs as a dead owner's, which is not what this test is about.
        let first = try database.worker(slots: 2) { $0.ownerStaleAfter = .seconds(120) }
        try first.register(Held(worker: "a", gate: gate, runs: runs))
        try await first.start()
        let ids = try await first.submit(Held.name, inputs: (0..<10).map { Held.Input(n: $0) })
        try await poll("the submitting worker's two jobs to start") { runs.total == 2 }
        // A claim pass under way when the submits took both slots may hold two more for a moment: it gives them back
        // as it ends (`aClaimWhoseSlotsOwnSubmitsTookGivesWhatItTookBack`), and then the worker holds only what it runs.
        try await poll("the worker to hold only the two jobs it runs", timeout: .seconds(60)) {
            let census = try await producer.store.census()
            return census.filter { $0.ownerID == first.ownerID }.count == 2
                && census.filter { $0.ownerID == nil && $0.status == .pending }.count == 8
        }
        #expect(runs.total == 2)
        // Another worker takes from that backlog while the first still runs its two.
        let second = try database.worker(slots: 3) { $0.ownerStaleAfter = .seconds(120) }
        try second.register(Held(worker: "b", gate: gate, runs: runs))
        try await second.start()
        try await poll("the second worker's three jobs to start") { runs.byWorker["b"]?.count == 3 }
        let held = try await producer.store.census().filter { $0.ownerID == first.ownerID }
        #expect(held.count == 2, "\(held.map { "\($0.id) \($0.status)" }), runs \(runs.byWorker)")
        gate.open()
        for id in ids { _ = try await producer.wait(for: id, timeout: .seconds(60)) }
        #expect(runs.total == 10, "each job ran once: \(runs.byWorker)")
        #expect(Set(runs.byWorker.values.flatMap { $0 }) == Set(0..<10))
        await first.shutdown()
        await second.shutdown()
    }

    @Test(arguments: StoreKind.allCases)
    func aPausedJobGivesItsSlotBackAndResumesIntoTheNextFreeOne(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let worker = try database.worker(slots: 1)
        let release = Gate()
        let steps = Counter()
        let long = try await worker.addTask(name: "long", options: .interactive) { context in
            for step in 1...3 {
                try await context.report(.step(step, of: 3))
                steps.increment()
                if step == 1 { await release.wait() }
            }
        }
        let short = Gate()
        let second = try await worker.addTask(name: "second", options: .interactive) { _ in await short.wait() }
        try await poll("the long task to take the slot") { steps.count == 1 }
        #expect(worker.snapshot(of: second)?.status == .pending)
        // Paused: its slot goes to the second task at once.
        try await worker.pause(taskID: long)
        try await worker.waitForStatus(second, .running)
        release.open()
        // Resumed while the slot is taken: it waits for it, pending, its code still suspended.
        try await worker.resume(taskID: long)
        try await worker.waitForStatus(long, .pending)
        #expect(steps.count == 1)
        short.open()
        let done = try await worker.finished(long)
        #expect(done.status == .completed)
        #expect(steps.count == 3)
        let history = try await worker.store.events(of: long).map(\.kind)
        #expect(history.filter { $0 == .started }.count == 1, "the same run went on: \(history)")
        await worker.shutdown()
    }

    @Test(arguments: StoreKind.allCases)
    func aJobWaitingForASlotIsPausedCancelledAndRemovedFromAnotherProcess(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let producer = try database.producer()
        let gate = Gate()
        let runs = Runs()
        let worker = try database.worker(slots: 1)
        try worker.register(Held(worker: "w", gate: gate, runs: runs))
        try await worker.start()
        let ids = try await producer.submit(Held.self, inputs: (0..<4).map { Held.Input(n: $0) })
        try await poll("one job to hold the slot") { runs.total == 1 }
        // An operator's executor elsewhere (no kinds of its own): the waiting jobs are in the store, unowned.
        let elsewhere = try database.worker(slots: 1)
        let waiting = try await producer.store.census().filter { $0.ownerID == nil }.map(\.id).sorted()
        #expect(waiting.count == 3)
        try await elsewhere.pause(taskID: waiting[0])
        try await elsewhere.cancel(taskID: waiting[1])
        try await elsewhere.remove(taskID: waiting[1])
        #expect(try await producer.job(waiting[0])?.status == .paused)
        #expect(try await producer.job(waiting[1]) == nil)
        gate.open()
        _ = try await producer.wait(for: waiting[2], timeout: .seconds(120))
        // The paused one stays paused until resumed, then runs.
        #expect(try await producer.job(waiting[0])?.status == .paused)
        try await elsewhere.resume(taskID: waiting[0])
        #expect(try await producer.wait(for: waiting[0], timeout: .seconds(120)).status == .completed)
        #expect(runs.total == 3 && ids.count == 4)
        await worker.shutdown()
        await elsewhere.shutdown()
    }

    @Test(arguments: StoreKind.allCases)
    func aKindsLimitHoldsAcrossWorkers(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let producer = try database.producer()
        let ids = try await producer.submit(Limited.self, inputs: (0..<12).map { Limited.Input(n: $0) })
        let gates = Gates()
        let workers = try (0..<2).map { _ in try database.worker(slots: 4) }
        for (index, worker) in workers.enumerated() {
            try worker.register(Limited(worker: "w\(index)", gates: gates))
            try await worker.start()
        }
        var most = 0
        var finished = 0
        while finished < ids.count {
            // Sampled from the store: never more than the kind's limit running, whatever the slots.
            let running = try await producer.store.census().filter { $0.status == .running }.count
            most = max(most, running)
            #expect(running <= Limited.maxConcurrent!)
            try await poll("a job of the kind to run", timeout: .seconds(120)) { gates.waiting > 0 || finished >= ids.count }
            if gates.releaseOne() { finished += 1 }
        }
        for id in ids { #expect(try await producer.wait(for: id, timeout: .seconds(120)).status == .completed) }
        #expect(most == 2)
        for worker in workers { await worker.shutdown() }
    }

    @Test(arguments: StoreKind.allCases)
    func aPausedKindStartsNothingOnAnyWorkerUntilResumed(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let producer = try database.producer()
        let worker = try database.worker(slots: 2)
        try worker.register(Doubler(worker: "w"))
        try await worker.start()
        try await worker.pauseKind(Doubler.name)
        let id = try await producer.submit(Doubler.self, input: .init(n: 3))
        await #expect(throws: JobWaitTimeoutError.self) { try await producer.wait(for: id, timeout: .milliseconds(600)) }
        #expect(try await producer.job(id)?.status == .pending)
        let other = try database.worker(slots: 1)
        #expect(try await other.resumeKind(Doubler.name))
        #expect(try await producer.result(of: id, as: Doubler.self, timeout: .seconds(120)).doubled == 6)
        await worker.shutdown()
        await other.shutdown()
    }
}

/// A job kind limited to two at once across the fleet, each held until the test releases one.
struct Limited: JobKind {
    struct Input: Codable, Sendable { var n: Int }
    static let name = "limited"
    static let maxConcurrent: Int? = 2
    let worker: String
    let gates: Gates

    func run(_ input: Input, context: any TaskContext) async throws {
        await gates.wait()
    }
}

/// Gates the test opens one at a time.
final class Gates: Sendable {
    private let state = Mutex<[CheckedContinuation<Void, Never>]>([])

    func wait() async {
        await withCheckedContinuation { continuation in state.withLock { $0.append(continuation) } }
    }

    var waiting: Int { state.withLock { $0.count } }

    /// Lets the oldest waiter go; returns whether there was one.
    func releaseOne() -> Bool {
        let waiter = state.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        waiter?.resume()
        return waiter != nil
    }
}

/// A job that holds its slot until the test opens its own gate (by its number), recording which worker ran it.
struct GatedByNumber: JobKind {
    struct Input: Codable, Sendable { var n: Int }
    static let name = "gated-by-number"
    static let options = TaskOptions.interactive
    let worker: String
    let gates: NumberedGates
    let runs: Runs

    func run(_ input: Input, context: any TaskContext) async throws {
        runs.started(input.n, by: worker)
        await gates.gate(input.n).wait()
    }
}

/// A gate for each job number.
final class NumberedGates: Sendable {
    private let gates: [Gate]

    init(count: Int) { gates = (0..<count).map { _ in Gate() } }

    func gate(_ n: Int) -> Gate { gates[n] }
    func open(_ n: Int) { gates[n].open() }
    func openAll() { for gate in gates { gate.open() } }
}
