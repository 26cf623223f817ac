import Foundation
import Progression
import ProgressionTestSupport
import Synchronization
import Testing

/// A child job: its number times ten, failing for a negative one; counts its runs.
struct Part: JobKind {
    struct Input: Codable, Sendable { var n: Int }
    struct Output: Codable, Sendable, Equatable { var n: Int }
    struct Failure: Error, CustomStringConvertible {
        var n: Int
        var description: String { "part \(n) is negative" }
    }
    static let name = "part"
    static let options = TaskOptions.interactive.retryable()
    let runs: RunLog

    func run(_ input: Input, context: any TaskContext) async throws -> Output {
        runs.add(input.n)
        try await context.report(.progress(0.5))
        guard input.n >= 0 else { throw Failure(n: input.n) }
        return Output(n: input.n * 10)
    }
}

/// A parent: one child per number, their outputs summed (failed ones skipped when `tolerant`).
struct Batch: JobKind {
    struct Input: Codable, Sendable {
        var parts: [Int]
        var tolerant = false
        var each = false
    }
    struct Output: Codable, Sendable, Equatable { var sum: Int }
    static let name = "batch"
    static let options = TaskOptions.interactive.retryable()

    func run(_ input: Input, context: any TaskContext) async throws -> Output {
        try await context.report(.total(Double(input.parts.count)))
        let children = try await context.startChildren(Part.self, inputs: input.parts.map { .init(n: $0) }) { part in
            ChildJobOptions(name: "part \(part.n)")
        }
        if input.each {
            var sum = 0
            for try await done in context.completions(of: children) { sum += try done.output().n }
            return Output(sum: sum)
        }
        if input.tolerant {
            var sum = 0
            for child in children {
                do { sum += try await context.result(of: child).n } catch ProgressionError.subtaskFailed {}
            }
            return Output(sum: sum)
        }
        return Output(sum: try await context.results(of: children).map(\.n).reduce(0, +))
    }
}

/// A job that waits for a signal `name` `count` times and returns the payloads.
struct Approval: JobKind {
    struct Input: Codable, Sendable {
        var count = 1
        var timeoutSeconds: Double?
    }
    static let name = "approval"
    static let options = TaskOptions.interactive.retryable()

    func run(_ input: Input, context: any TaskContext) async throws -> [String] {
        var received: [String] = []
        for _ in 0..<input.count {
            received.append(
                try await context.signal(
                    "approve", as: String.self, timeout: input.timeoutSeconds.map { .milliseconds(Int64($0 * 1000)) }))
        }
        return received
    }
}

/// Numbers seen, in order.
final class RunLog: Sendable {
    private let values = Mutex<[Int]>([])
    func add(_ value: Int) { values.withLock { $0.append(value) } }
    var all: [Int] { values.withLock { $0 } }
}

@Suite struct ChildJobTests {
    /// A worker of one slot: a parent that held its slot while it waits would never see its children run.
    func worker(_ database: SharedDatabase, runs: RunLog = RunLog(), slots: Int = 1) throws -> TaskExecutor {
        let worker = try database.worker(slots: slots) { $0.recoveryInterval = .milliseconds(200) }
        try worker.register(Batch())
        try worker.register(Part(runs: runs))
        try worker.register(Approval())
        return worker
    }

    @Test(arguments: StoreKind.allCases)
    func aParentAwaitsItsChildrenWithoutItsSlotAndGetsTheirResults(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let runs = RunLog()
        let worker = try worker(database, runs: runs)
        try await worker.start()
        let jobs = try database.producer()
        let id = try await jobs.submit(Batch.self, input: .init(parts: [1, 2, 3]))
        #expect(try await jobs.result(of: id, as: Batch.self, timeout: .seconds(120)).sum == 60)
        #expect(runs.all.sorted() == [1, 2, 3])
        let tree = try await jobs.store.tree(of: id)
        let links = tree.filter(\.isLink)
        #expect(links.count == 3 && links.allSatisfy { $0.status == .completed && $0.progress == 1 })
        for link in links {
            let childID = try #require(link.childJobID)
            let child = try #require(try await jobs.job(childID))
            #expect(child.parentJobID == id && child.status == .completed && child.kind == Part.name)
        }
        let parent = try #require(try await jobs.job(id))
        #expect(parent.progress == 1 && parent.wait == nil)
        #expect(try await jobs.store.events(of: id).contains { $0.kind == .waiting })
        await worker.shutdown()
        await database.closeAll()
    }

    /// Ten parents on one slot, some awaiting all their children, some each as it comes: every one completes (a
    /// parent whose wait was released while its previous run was still ending, or whose awaited child finished while
    /// it ran, is not left waiting).
    @Test(arguments: StoreKind.allCases)
    func tenParentsShareOneSlotWithTheirChildrenAndAllComplete(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let worker = try worker(database)
        try await worker.start()
        let jobs = try database.producer()
        var ids: [String] = []
        for index in 0..<10 {
            ids.append(try await jobs.submit(Batch.self, input: .init(parts: [1, 2, 3, index], each: index % 2 == 0)))
        }
        for (index, id) in ids.enumerated() {
            do {
                #expect(try await jobs.result(of: id, as: Batch.self, timeout: .seconds(120)).sum == 60 + 10 * index)
            } catch {
                await dumpTree(id, database)
                throw error
            }
        }
        await worker.shutdown()
        await database.closeAll()
    }

    @Test(arguments: StoreKind.allCases)
    func aChildsFailureReachesItsParentWhichMayCatchIt(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let worker = try worker(database, slots: 4)
        try await worker.start()
        let jobs = try database.producer()
        let tolerant = try await jobs.submit(Batch.self, input: .init(parts: [1, -1, 2], tolerant: true))
        let strict = try await jobs.submit(Batch.self, input: .init(parts: [3, -2]))
        #expect(try await jobs.result(of: tolerant, as: Batch.self, timeout: .seconds(120)).sum == 30)
        let failed = try await jobs.wait(for: strict, timeout: .seconds(120))
        #expect(failed.status == .failed)
        #expect(failed.errorDescription?.contains("Subtask 'part -2' failed") == true, "\(failed.errorDescription ?? "")")
        #expect(failed.errorDescription?.contains("part -2 is negative") == true)
        await worker.shutdown()
        await database.closeAll()
    }

    @Test(arguments: StoreKind.allCases)
    func completionsYieldEachChildAsItFinishes(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let worker = try worker(database, slots: 2)
        try await worker.start()
        let jobs = try database.producer()
        let id = try await jobs.submit(Batch.self, input: .init(parts: [4, 5, 6, 7], each: true))
        #expect(try await jobs.result(of: id, as: Batch.self, timeout: .seconds(120)).sum == 220)
        await worker.shutdown()
        await database.closeAll()
    }

    @Test(arguments: StoreKind.allCases)
    func cancellingAWaitingParentCancelsItsChildrenAndARetryRunsOnlyThoseAgain(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let runs = RunLog()
        let worker = try worker(database, runs: runs, slots: 2)
        try await worker.start()
        let jobs = try database.producer()
        // Part 5 completes; the approvals wait for a signal each.
        struct Mixed: JobKind {
            static let name = "mixed"
            static let options = TaskOptions.interactive.retryable()
            func run(_ input: [Int], context: any TaskContext) async throws -> Int {
                let part = try await context.startChild(Part.self, input: .init(n: 5))
                let approvals = try await context.startChildren(Approval.self, inputs: [.init(), .init()]) { _ in
                    ChildJobOptions(allowsUnregisteredKind: false)
                }
                let approved = try await context.results(of: approvals).flatMap { $0 }
                return try await context.result(of: part).n + approved.count
            }
        }
        try worker.register(Mixed())
        let id = try await jobs.submit(Mixed.self, input: [])
        try await poll("the parent to wait for its children") {
            guard try await jobs.job(id)?.wait == .children(all: true) else { return false }
            return try await jobs.store.tree(of: id).filter(\.isLink).count == 3
        }
        let links = try await jobs.store.tree(of: id).filter(\.isLink)
        let approvals = links.filter { $0.name == Approval.name }.compactMap(\.childJobID)
        #expect(approvals.count == 2)
        try await poll("the approvals to wait for their signals") {
            for approval in approvals where try await jobs.job(approval)?.wait != .signal("approve") { return false }
            return true
        }
        try await worker.cancel(taskID: id)
        try await poll("the children to be cancelled") {
            for approval in approvals where try await jobs.job(approval)?.status != .cancelled { return false }
            return true
        }
        #expect(try await jobs.job(id)?.status == .cancelled)
        #expect(runs.all == [5])
        try await worker.retry(taskID: id)
        do {
            try await poll("the cancelled children to run again", timeout: .seconds(30)) {
                for approval in approvals where try await jobs.job(approval)?.wait != .signal("approve") { return false }
                return true
            }
        } catch {
            await dumpTree(id, database)
            for approval in approvals { await dumpTree(approval, database) }
            throw error
        }
        for approval in approvals { try await jobs.signal(approval, name: "approve", payload: "yes") }
        #expect(try await jobs.wait(for: id, timeout: .seconds(120)).status == .completed)
        #expect(try await jobs.result(of: id, as: Mixed.self) == 52)
        #expect(runs.all == [5], "the completed child did not run again")
        for approval in approvals { #expect(try await jobs.job(approval)?.attempt == 2) }
        await worker.shutdown()
        await database.closeAll()
    }

    @Test(arguments: StoreKind.allCases)
    func aSignalSentBeforeTheJobWaitsIsKeptAndEachIsTakenOnce(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let jobs = try database.producer()
        let id = try await jobs.submit(Approval.self, input: .init(count: 2))
        try await jobs.signal(id, name: "approve", payload: "first")
        let worker = try worker(database)
        try await worker.start()
        try await poll("the job to wait for its second signal") { try await jobs.job(id)?.wait == .signal("approve") }
        #expect(try await jobs.job(id)?.displayStatus == "waiting")
        try await jobs.signal(id, name: "approve", payload: "second")
        #expect(try await jobs.result(of: id, as: Approval.self, timeout: .seconds(120)) == ["first", "second"])
        let signals = try await database.open().signals(of: id)
        #expect(signals.map(\.consumedBy).allSatisfy { $0 != nil } && signals.count == 2)
        await #expect(throws: ProgressionError.self) { try await jobs.signal(id, name: "approve", payload: "late") }
        await worker.shutdown()
        await database.closeAll()
    }

    @Test func aSignalThatDoesNotComeInTimeFailsTheWait() async throws {
        let database = try SharedDatabase(.sqlite)
        let worker = try worker(database)
        try await worker.start()
        let jobs = try database.producer()
        let id = try await jobs.submit(Approval.self, input: .init(count: 1, timeoutSeconds: 0.3))
        let ended = try await jobs.wait(for: id, timeout: .seconds(120))
        #expect(ended.status == .failed)
        #expect(ended.errorDescription?.contains("No signal 'approve' came within") == true, "\(ended.errorDescription ?? "")")
        await worker.shutdown()
        await database.closeAll()
    }

    @Test(arguments: StoreKind.allCases)
    func aJobRunsAfterItsDependenciesAndFollowsItsPolicyWhenOneFails(kind: StoreKind) async throws {
        let database = try SharedDatabase(kind)
        let runs = RunLog()
        let worker = try worker(database, runs: runs, slots: 2)
        let jobs = try database.producer()
        let first = try await jobs.submit(Part.self, input: .init(n: 1))
        let failing = try await jobs.submit(Part.self, input: .init(n: -1))
        let second = try await jobs.submit(Part.self, input: .init(n: 2), options: JobOptions(after: [first]))
        let cancelled = try await jobs.submit(Part.self, input: .init(n: 3), options: JobOptions(after: [failing, first]))
        let runsAnyway = try await jobs.submit(
            Part.self, input: .init(n: 4), options: JobOptions(after: [failing], ifDependencyFails: .run))
        #expect(try await jobs.job(second)?.displayStatus == "waiting")
        #expect(try await jobs.job(second)?.waitingFor == "job \(first)")
        try await worker.start()
        #expect(try await jobs.result(of: second, as: Part.self, timeout: .seconds(120)).n == 20)
        #expect(try await jobs.result(of: runsAnyway, as: Part.self, timeout: .seconds(120)).n == 40)
        let ended = try await jobs.wait(for: cancelled, timeout: .seconds(120))
        #expect(ended.status == .cancelled && ended.errorDescription == "its dependency \(failing) failed")
        let order = runs.all
        let one = try #require(order.firstIndex(of: 1))
        let two = try #require(order.firstIndex(of: 2))
        #expect(one < two)
        #expect(!order.contains(3))
        await worker.shutdown()
        await database.closeAll()
    }

    @Test func badDependenciesAreRefusedAndWriteNothing() async throws {
        let database = try SharedDatabase(.sqlite)
        let jobs = try database.producer()
        let first = try await jobs.submit(Part.self, input: .init(n: 1))
        let before = try await jobs.store.census().count
        await #expect(throws: JobDependencyError.unknownJob("nope")) {
            try await jobs.submit(Part.self, input: .init(n: 2), options: JobOptions(after: [first, "nope"]))
        }
        await #expect(throws: ProgressionError.self) {
            try await jobs.submit(Part.self, input: .init(n: 2), options: JobOptions(id: "self", after: ["self"]))
        }
        await #expect(throws: ProgressionError.self) {
            try await jobs.submit(Part.self, input: .init(n: 2), options: JobOptions(delay: .seconds(5), after: [first]))
        }
        await #expect(throws: JobDependencyError.self) {
            try await jobs.submit(Part.self, inputs: [.init(n: 7), .init(n: 8)]) { input in
                input.n == 7 ? JobOptions(id: "seven", after: ["eight"]) : JobOptions(id: "eight", after: ["seven"])
            }
        }
        #expect(try await jobs.store.census().count == before)
    }

    @Test func awaitingAJobThatIsNotAChildIsRefused() async throws {
        let database = try SharedDatabase(.sqlite)
        struct Stranger: JobKind {
            static let name = "stranger"
            func run(_ input: String, context: any TaskContext) async throws {
                _ = try await context.result(of: ChildJob<Part>(id: input, name: "x"))
            }
        }
        let worker = try worker(database)
        try worker.register(Stranger())
        try await worker.start()
        let jobs = try database.producer()
        let other = try await jobs.submit(Part.self, input: .init(n: 1))
        let id = try await jobs.submit(Stranger.self, input: other)
        let ended = try await jobs.wait(for: id, timeout: .seconds(120))
        #expect(ended.status == .failed)
        #expect(ended.errorDescription == ProgressionError.notAChildJob(taskID: id, jobID: other).description)
        await worker.shutdown()
        await database.closeAll()
    }

    @Test func aClosureTaskCannotStartChildJobs() async throws {
        let database = try SharedDatabase(.memory)
        let worker = try worker(database)
        try await worker.start()
        let id = try await worker.addTask(name: "closure") { context in
            _ = try await context.startChild(Part.self, input: .init(n: 1))
        }
        let ended = try await worker.finished(id)
        #expect(ended.status == .failed)
        #expect(ended.errorDescription?.contains("only a job (a registered kind) can start child jobs") == true)
        #expect(try await worker.store.census().count == 1)
        await worker.shutdown()
        await database.closeAll()
    }

    @Test func aChildOfAKindNoWorkerRegisteredIsRefusedUnlessAllowed() async throws {
        let database = try SharedDatabase(.memory)
        struct Ghost: JobKind {
            static let name = "ghost"
            func run(_ input: Int, context: any TaskContext) async throws {}
        }
        struct Summoner: JobKind {
            static let name = "summoner"
            func run(_ allow: Bool, context: any TaskContext) async throws -> String {
                try await context.startChild(Ghost.self, input: 1, options: ChildJobOptions(allowsUnregisteredKind: allow)).id
            }
        }
        let worker = try worker(database)
        try worker.register(Summoner())
        try await worker.start()
        let jobs = try database.producer()
        let refused = try await jobs.wait(for: try await jobs.submit(Summoner.self, input: false), timeout: .seconds(120))
        #expect(refused.status == .failed && refused.errorDescription == "No job kind 'ghost' is registered")
        let allowed = try await jobs.submit(Summoner.self, input: true)
        let ghost = try await jobs.result(of: allowed, as: Summoner.self, timeout: .seconds(120))
        // Its parent ended without awaiting it: a child outlives no parent.
        try await poll("the unfinished child of a completed parent to be cancelled") {
            try await jobs.job(ghost)?.status == .cancelled
        }
        await worker.shutdown()
        await database.closeAll()
    }
}

/// How many changes a pass of the tree keeper takes (``TreeKeeperPassLimit``), as a table of what happened to the
/// passes before.
struct TreeKeeperPassLimitTests {
    enum Pass { case failed, took(Int) }

    @Test(arguments: [
        ([Pass](), 500),
        ([.failed], 125),
        ([.failed, .failed], 31),
        ([.failed, .failed, .failed, .failed, .failed], 4),
        ([.failed, .took(125)], 250),
        ([.failed, .took(3)], 125),
        ([.failed, .took(125), .took(250), .took(500)], 500),
        ([.took(500)], 500),
        ([.took(0)], 500),
    ] as [([Pass], Int)])
    func aPassTakesLessAfterFailuresAndMoreAfterFullSuccesses(passes: [Pass], expected: Int) {
        var limit = TreeKeeperPassLimit()
        for pass in passes {
            switch pass {
            case .failed: limit.failed()
            case .took(let count): limit.succeeded(taking: count)
            }
        }
        #expect(limit.changes == expected)
    }
}
