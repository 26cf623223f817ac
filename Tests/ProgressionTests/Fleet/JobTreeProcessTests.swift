import Foundation
import Progression
import ProgressionTestSupport
import Testing

#if PostgreSQL
import ProgressionPostgres
import ProgressionPostgresTestSupport
#endif

/// The fleet tool's job-tree kinds, as a producer in the test process names them (their code runs in the workers).
enum FleetKinds {
    struct Fanout: JobKind {
        struct Input: Codable, Sendable {
            var count: Int
            var leafDelayMilliseconds = 0
            var each = false
            var quickLeaves = 0
        }
        struct Output: Codable, Sendable { var sum: Int }
        static let name = "fleet.fanout"
        static let options = TaskOptions.interactive.retryable()
        func run(_ input: Input, context: any TaskContext) async throws -> Output { fatalError("run by the workers") }
    }

    struct Leaf: JobKind {
        struct Input: Codable, Sendable {
            var n: Int
            var delayMilliseconds = 0
        }
        struct Output: Codable, Sendable { var value: Int }
        static let name = "fleet.leaf"
        static let options = TaskOptions.interactive.retryable()
        func run(_ input: Input, context: any TaskContext) async throws -> Output { fatalError("run by the workers") }
    }

    struct Gate: JobKind {
        struct Input: Codable, Sendable { var delayMilliseconds = 0 }
        static let name = "fleet.gate"
        static let options = TaskOptions.interactive.retryable()
        func run(_ input: Input, context: any TaskContext) async throws -> String { fatalError("run by the workers") }
    }
}

/// Job trees across processes (issue 35): a parent's children spread over three workers that are killed, its progress
/// read by `progressctl` while its children run elsewhere, a cancel and a retry across processes, and a dependency and
/// a signal across a SIGKILL — each on SQLite and on PostgreSQL, with the real `progression-bench fleet-test` workers.
@Suite(.serialized) struct JobTreeProcessTests {
    typealias Database = FleetProcessTests.Database

    /// The ledger's step lines: per leaf step, whether one began again after its completion was committed.
    static func stepsRunAgainAfterCommit(_ lines: [String]) -> [String] {
        var committed: Set<String> = []
        var again: [String] = []
        for line in lines {
            let parts = line.split(separator: " ").map(String.init)
            guard parts.count >= 2 else { continue }
            switch parts[0] {
            case "committed": committed.insert(parts[1])
            case "begin" where committed.contains(parts[1]): again.append(parts[1])
            default: break
            }
        }
        return again
    }

    static func jobs(_ store: any TaskStore) throws -> JobClient { try JobClient(store: store) }

    @Test(arguments: Database.allCases)
    func aThousandChildrenOverThreeKilledWorkersCompleteOnceAndTheParentWaitsWithoutASlot(
        database: Database
    ) async throws {
        let directory = try TemporaryDirectory()
        let db = try database.location(in: directory)
        let store = try await database.store(db)
        let ledger = LedgerFile(path: directory.file("ledger"))
        let jobs = try Self.jobs(store)
        var workers: [String: ChildProcess] = [:]
        for name in ["a", "b", "c"] {
            workers[name] = try await FleetProcessTests.worker(
                name, db: db, ledger: ledger, in: directory, ["--concurrency", "4"])
        }
        func restart(_ name: String) async throws {
            workers[name]?.signal(SIGKILL)
            _ = try await workers[name]?.waitForExit(timeout: .seconds(120))
            workers[name] = try await FleetProcessTests.worker(
                name, db: db, ledger: ledger, in: directory, ["--concurrency", "4"])
        }
        let parent = try await jobs.submit(FleetKinds.Fanout.self, input: .init(count: 1_000, leafDelayMilliseconds: 10))
        // The parent's worker is killed once, while its code starts the children.
        var parentWorker = ""
        try await poll("the parent to run", timeout: .seconds(120), every: .milliseconds(2)) {
            guard let line = ledger.lines.first(where: { $0.hasPrefix("run \(parent) ") }) else { return false }
            parentWorker = String(line.split(separator: " ")[2])
            return true
        }
        try await restart(parentWorker)
        let other = parentWorker == "b" ? "c" : "b"
        // While the children run, the parent holds no slot: it waits with no owner.
        var sawItWait = false
        func completedLeaves() -> Int { ledger.lines.filter { $0.hasPrefix("committed ") && $0.hasSuffix("/B") }.count }
        for threshold in [300, 600] {
            try await poll("\(threshold) children to complete", timeout: .seconds(300)) {
                if let record = try await store.task(id: parent), record.waitReason == .waiting, record.ownerID == nil {
                    sawItWait = true
                }
                return completedLeaves() >= threshold
            }
            // Another worker is killed twice while it runs children.
            try await restart(other)
        }
        let ended = try await jobs.wait(for: parent, timeout: .seconds(600))
        #expect(ended.status == .completed, "\(ended.errorDescription ?? "")")
        #expect(try await jobs.result(of: parent, as: FleetKinds.Fanout.self).sum == (0..<1_000).reduce(0) { $0 + 2 * $1 })
        #expect(sawItWait, "the parent was seen waiting without an owner while its children ran")
        let lines = ledger.lines
        #expect(Self.stepsRunAgainAfterCommit(lines).isEmpty, "no committed step ran again")
        let children = try await store.roots(TaskQuery(kind: FleetKinds.Leaf.name, limit: 10_000))
        #expect(children.count == 1_000 && children.allSatisfy { $0.status == .completed && $0.parentJobID == parent })
        // A step skipped when its job ran again (its result stored) says `committed` again: at least once each.
        let completions = Set(lines.filter { $0.hasPrefix("committed ") && $0.hasSuffix("/B") })
        #expect(completions.count == 1_000, "every child's last step completed")
        #expect(lines.filter { $0.hasPrefix("run \(parent) ") }.count >= 2, "the parent's code ran again after its wait")
        #expect(lines.filter { $0.hasPrefix("started \(parent) ") }.allSatisfy { $0 == "started \(parent) 1000" })
        for worker in workers.values { try await FleetProcessTests.stop(worker) }
    }

    /// A worker `p` for the parents, and `c1`, `c2` (three slots each) for their children.
    static func parentAndTwoLeafWorkers(
        db: String, ledger: LedgerFile, in directory: TemporaryDirectory
    ) async throws -> [ChildProcess] {
        [
            try await FleetProcessTests.worker("p", db: db, ledger: ledger, in: directory, ["--kinds", "fanout"]),
            try await FleetProcessTests.worker(
                "c1", db: db, ledger: ledger, in: directory, ["--kinds", "leaf", "--concurrency", "3"]),
            try await FleetProcessTests.worker(
                "c2", db: db, ledger: ledger, in: directory, ["--kinds", "leaf", "--concurrency", "3"]),
        ]
    }

    /// The parent's progress as `progressctl show --json` reads it every 200 ms while its children run on two other
    /// processes: it never goes back, it moves while children complete, and it reads 1 only once the parent completed.
    @Test(arguments: Database.allCases)
    func aParentsProgressReadByProgressctlFollowsItsChildrenOnOtherProcesses(database: Database) async throws {
        let directory = try TemporaryDirectory()
        let db = try database.location(in: directory)
        let store = try await database.store(db)
        let ledger = LedgerFile(path: directory.file("ledger"))
        let jobs = try Self.jobs(store)
        let workers = try await Self.parentAndTwoLeafWorkers(db: db, ledger: ledger, in: directory)
        let parent = try await jobs.submit(
            FleetKinds.Fanout.self, input: .init(count: 48, leafDelayMilliseconds: 500))
        struct Sample {
            /// When progressctl was started, and when its answer came (its read of the store was in between).
            var started: ContinuousClock.Instant
            var ended: ContinuousClock.Instant
            var progress: Double
            var status: String
            /// The children whose last step the ledger had once the answer came.
            var completedChildren: Int
        }
        var samples: [Sample] = []
        while true {
            let started = ContinuousClock.now
            let shown = try await ChildProcess.run("progressctl", ["--db", db, "show", parent, "--json"], in: directory)
            #expect(shown.status == 0, "\(shown.stderr)")
            let root = try Self.root(parent, in: shown.stdout)
            let completed = ledger.lines.filter { $0.hasPrefix("committed ") && $0.hasSuffix("/B") }.count
            samples.append(
                Sample(
                    started: started, ended: .now, progress: root["progress"] as? Double ?? 0,
                    status: root["status"] as? String ?? "", completedChildren: completed))
            if samples.last?.status == "completed" { break }
            #expect(samples.count < 3_000, "the parent completes")
            if samples.count >= 3_000 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        let values = samples.map(\.progress)
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 <= $1 }, "never back: \(values)")
        #expect(samples.dropLast().allSatisfy { $0.progress < 1 }, "1 only once completed")
        #expect(samples.last?.progress == 1)
        // Values in between: five, or as many as a loaded machine let progressctl read while the children ran (the
        // first read may come before any child completed, and two reads may fall between the same completions).
        let whileRunning = samples.filter { $0.status != "completed" }.count
        #expect(
            Set(values.filter { $0 > 0 && $0 < 1 }).count >= min(5, whileRunning - 2),
            "values in between: \(values)")
        // While children complete, the value moves within a second of each: a child first seen completed in the
        // ledger after the last move was read (so it completed after that read began) must show in every read that
        // began more than a second after it was seen. Measured from the instants that bound each read, so that how
        // long progressctl takes to start on a loaded machine is not counted against the store.
        var lastMove = samples[0]
        var firstUnshown: ContinuousClock.Instant?
        for (previous, sample) in zip(samples, samples.dropFirst()) {
            if sample.progress > lastMove.progress {
                lastMove = sample
                firstUnshown = nil
                continue
            }
            if let seen = firstUnshown, sample.started - seen > .seconds(1) {
                Issue.record("no move in a read that began \(sample.started - seen) after a child was seen completed")
                firstUnshown = nil
            }
            if firstUnshown == nil, previous.completedChildren > lastMove.completedChildren { firstUnshown = previous.ended }
        }
        // The children ran on the two other processes; the parent on its own.
        let leaves = ledger.lines.filter { $0.hasPrefix("begin ") }
        #expect(leaves.contains { $0.hasSuffix(" c1") } && leaves.contains { $0.hasSuffix(" c2") })
        #expect(!leaves.contains { $0.hasSuffix(" p") })
        for worker in workers { try await FleetProcessTests.stop(worker) }
    }

    /// The root node of `progressctl show --json`'s document.
    static func root(_ id: String, in text: String) throws -> [String: Any] {
        let document = try JSONSerialization.jsonObject(with: Data(text.utf8))
        if let nodes = document as? [[String: Any]], let root = nodes.first(where: { $0["id"] as? String == id }) {
            return root
        }
        if let object = document as? [String: Any] {
            for key in ["task", "root", "job"] {
                if let root = object[key] as? [String: Any] { return root }
            }
            if let nodes = object["nodes"] as? [[String: Any]], let root = nodes.first(where: { $0["id"] as? String == id }) {
                return root
            }
        }
        throw TestFailure("no node \(id) in \(text.prefix(300))")
    }

    @Test(arguments: Database.allCases)
    func cancellingAParentReachesItsChildrenOnOtherProcessesAndARetryRunsOnlyThoseAgain(database: Database) async throws {
        let directory = try TemporaryDirectory()
        let db = try database.location(in: directory)
        let store = try await database.store(db)
        let ledger = LedgerFile(path: directory.file("ledger"))
        let jobs = try Self.jobs(store)
        var workers = try await Self.parentAndTwoLeafWorkers(db: db, ledger: ledger, in: directory)
        // Four quick children complete; the eight others take a minute, six of them running when the cancel comes.
        let parent = try await jobs.submit(
            FleetKinds.Fanout.self, input: .init(count: 12, leafDelayMilliseconds: 60_000, quickLeaves: 4))
        try await poll("the quick children to complete and six others to run", timeout: .seconds(120)) {
            let lines = ledger.lines
            return lines.filter { $0.hasPrefix("committed ") && $0.hasSuffix("/B") }.count == 4
                && lines.filter { $0.hasPrefix("begin ") && $0.contains("/A ") }.count == 10
        }
        // A quick child's last step is in the ledger once committed; its end is committed by its worker's writer just
        // after (a loaded machine showed three of the four ends committed when the ledger had the fourth step).
        try await poll("the quick children's ends to be committed", timeout: .seconds(60)) {
            try await store.roots(TaskQuery(kind: FleetKinds.Leaf.name, limit: 100)).filter { $0.status == .completed }
                .count == 4
        }
        let children = try await store.roots(TaskQuery(kind: FleetKinds.Leaf.name, limit: 100))
        let quick = Set(children.filter { $0.status == .completed }.map(\.id))
        #expect(quick.count == 4)
        let cancelled = try await ChildProcess.run("progressctl", ["--db", db, "cancel", parent], in: directory)
        #expect(cancelled.status == 0, "\(cancelled.stderr)")
        try await poll("every unfinished child to be cancelled", timeout: .seconds(60)) {
            try await store.roots(TaskQuery(kind: FleetKinds.Leaf.name, limit: 100))
                .allSatisfy { quick.contains($0.id) ? $0.status == .completed : $0.status == .cancelled }
        }
        // Within a second of the parent's cancel, as the store's times of their ends say (how soon this test reads
        // them back on a loaded machine is not counted).
        let parentEnd = try #require(try await store.task(id: parent)?.finishedAt)
        for child in try await store.roots(TaskQuery(kind: FleetKinds.Leaf.name, limit: 100)) where !quick.contains(child.id) {
            let end = try #require(child.finishedAt)
            #expect(end.timeIntervalSince(parentEnd) < 1, "\(child.id) cancelled \(end.timeIntervalSince(parentEnd)) s after its parent")
        }
        // The code of the six that ran stopped on their workers (at their next report), a minute before its end.
        let cancelledChildren = Set(children.map(\.id)).subtracting(quick)
        try await poll("the cancelled children's code to stop", timeout: .seconds(50)) {
            ledger.lines.filter { $0.hasPrefix("stopped ") }.count == 6
        }
        for worker in workers { try await FleetProcessTests.stop(worker) }
        #expect(!ledger.lines.contains { line in
            line.hasPrefix("committed ") && cancelledChildren.contains(String(line.dropFirst(10).split(separator: "/")[0]))
        }, "no step of a cancelled child completed")

        // A retry runs again the cancelled children only.
        workers = [
            try await FleetProcessTests.worker("p", db: db, ledger: ledger, in: directory, ["--kinds", "fanout"]),
            try await FleetProcessTests.worker("c", db: db, ledger: ledger, in: directory, ["--kinds", "leaf", "--concurrency", "8"]),
        ]
        let before = ledger.lines
        let retried = try await ChildProcess.run("progressctl", ["--db", db, "retry", parent], in: directory)
        #expect(retried.status == 0, "\(retried.stderr)")
        try await poll("the retried parent to run its cancelled children again", timeout: .seconds(120)) {
            Set(ledger.lines.dropFirst(before.count).filter { $0.hasPrefix("begin ") }.map {
                String($0.dropFirst(6).split(separator: "/")[0])
            }) == cancelledChildren
        }
        #expect(!ledger.lines.dropFirst(before.count).contains { line in
            quick.contains { line.hasPrefix("begin \($0)/") }
        }, "the completed children did not run again")
        for child in cancelledChildren { #expect(try await store.task(id: child)?.attempt == 2) }
        // The long children are cancelled again (their minute is not waited for): the retry's end cascades too.
        _ = try await ChildProcess.run("progressctl", ["--db", db, "cancel", parent], in: directory)
        for worker in workers { try await FleetProcessTests.stop(worker) }
    }

    @Test(arguments: Database.allCases)
    func aDependencyAndASignalEachWaitAcrossASIGKILLOfTheirWorker(database: Database) async throws {
        let directory = try TemporaryDirectory()
        let db = try database.location(in: directory)
        let store = try await database.store(db)
        let ledger = LedgerFile(path: directory.file("ledger"))
        let jobs = try Self.jobs(store)
        var worker = try await FleetProcessTests.worker(
            "w1", db: db, ledger: ledger, in: directory, ["--kinds", "leaf,gate", "--concurrency", "2"])
        func restart(_ name: String) async throws {
            worker.signal(SIGKILL)
            _ = try await worker.waitForExit(timeout: .seconds(120))
            worker = try await FleetProcessTests.worker(
                name, db: db, ledger: ledger, in: directory, ["--kinds", "leaf,gate", "--concurrency", "2"])
        }

        // A dependency: the second runs once the first completed, across a SIGKILL of the worker that ran the first.
        let first = try await jobs.submit(FleetKinds.Leaf.self, input: .init(n: 1, delayMilliseconds: 1_500))
        let second = try await jobs.submit(FleetKinds.Leaf.self, input: .init(n: 2), options: JobOptions(after: [first]))
        try await poll("the first job to begin", timeout: .seconds(60)) { ledger.contains(prefix: "begin \(first)/A") }
        #expect(try await store.task(id: second)?.waitReason == .waiting)
        try await restart("w2")
        #expect(try await jobs.result(of: second, as: FleetKinds.Leaf.self, timeout: .seconds(120)).value == 4)
        let lines = ledger.lines
        let firstDone = try #require(lines.firstIndex(of: "committed \(first)/B"))
        let secondBegan = try #require(lines.firstIndex { $0.hasPrefix("begin \(second)/A") })
        #expect(firstDone < secondBegan, "the dependent began after its dependency completed")
        #expect(lines.filter { $0.hasPrefix("begin \(second)/") }.count == 2, "the dependent ran once")

        // A signal sent before the job waits for it, with the job's worker killed in the step before its wait: kept,
        // and taken once.
        let early = try await jobs.submit(FleetKinds.Gate.self, input: .init(delayMilliseconds: 1_500))
        try await jobs.signal(early, name: "go", payload: "early")
        try await poll("the gate's first step to begin", timeout: .seconds(60)) {
            ledger.contains(prefix: "gate-begin \(early) ")
        }
        try await restart("w3")
        #expect(try await jobs.result(of: early, as: FleetKinds.Gate.self, timeout: .seconds(120)) == "early")
        #expect(ledger.lines.filter { $0.hasPrefix("gate \(early) ") }.count == 1)

        // A job waiting for its signal (no owner) outlives its worker's SIGKILL and takes the signal sent after.
        let late = try await jobs.submit(FleetKinds.Gate.self, input: .init())
        try await poll("the gate to wait for its signal", timeout: .seconds(60)) {
            try await store.task(id: late)?.waitReason == .waiting
        }
        try await restart("w4")
        #expect(try await store.task(id: late)?.wait == .signal("go"))
        try await jobs.signal(late, name: "go", payload: "late")
        #expect(try await jobs.result(of: late, as: FleetKinds.Gate.self, timeout: .seconds(120)) == "late")
        #expect(ledger.lines.filter { $0.hasPrefix("gate \(late) ") } == ["gate \(late) late w4"])
        #expect(Self.stepsRunAgainAfterCommit(ledger.lines).isEmpty)
        try await FleetProcessTests.stop(worker)
    }
}
