#if PostgreSQL
import Foundation
import Synchronization
import Progression
@testable import ProgressionPostgres
import ProgressionPostgresTestSupport
import ProgressionTestSupport
import Testing

/// The store and the executor against a server that goes away: restarted (`pg_ctl restart -m fast|immediate`), its
/// backends killed (`pg_terminate_backend`), stopped, or cut off behind a relay that stops passing bytes (a network
/// partition). Each test starts a server of its own, since it restarts or stops it.
@Suite
struct PostgresResilienceTests {
    /// Job input: `steps` sequential steps of `milliseconds` each.
    struct Steps: Codable, Sendable {
        var steps = 5
        var milliseconds = 20
    }

    /// What the steps' code did, in order: `begin job/step` when a step's code starts, `committed job/step` once its
    /// push returned (its end committed). A step begun again after its end was committed is a violation.
    final class Ledger: Sendable {
        let lines = Recorder<String>()

        func begin(_ key: String) { lines.append("begin " + key) }
        func committed(_ key: String) { lines.append("committed " + key) }

        var committedCount: Int { lines.all.filter { $0.hasPrefix("committed ") }.count }

        /// Steps begun again after their end was committed.
        var rerunAfterCommit: [String] {
            var committed: Set<String> = []
            var violations: [String] = []
            for line in lines.all {
                let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
                if parts[0] == "committed" { committed.insert(parts[1]) }
                if parts[0] == "begin", committed.contains(parts[1]) { violations.append(parts[1]) }
            }
            return violations
        }
    }

    /// An executor on `store` that runs `steps` jobs, recording in `ledger`; with `holdAfterFirstStep`, each job waits
    /// for that gate after its first step.
    static func executor(
        _ store: PostgresTaskStore, ledger: Ledger, host: String = OwnerRecord.currentHost,
        holdAfterFirstStep: Gate? = nil, change: (inout TaskExecutor.Configuration) -> Void = { _ in }
    ) throws -> TaskExecutor {
        var configuration = TaskExecutor.Configuration()
        configuration.maxConcurrentTasks = 4
        configuration.hostName = host
        configuration.heartbeatInterval = .milliseconds(200)
        configuration.recoveryInterval = .milliseconds(200)
        configuration.shutdownGracePeriod = .seconds(2)
        configuration.maxInterruptions = 1_000
        change(&configuration)
        let executor = TaskExecutor(store: store, configuration: configuration)
        try executor.register("steps", input: Steps.self, options: TaskOptions.interactive.retryable()) {
            input, context in
            for step in 0..<input.steps {
                if step > 0, let holdAfterFirstStep { await holdAfterFirstStep.wait() }
                let key = "\(context.taskID)/\(step)"
                _ = try await context.push("step \(step)") { _ in
                    ledger.begin(key)
                    try await Task.sleep(for: .milliseconds(input.milliseconds))
                    return step
                }
                ledger.committed(key)
            }
        }
        return executor
    }

    /// A server of this test's own (fsync off), and a store configuration for a schema on it with a short deadline.
    static func server(tcp: Bool = false) async throws -> LocalPostgresServer {
        guard tcp else { return try await LocalPostgresServer.make(durable: false) }
        // A free TCP port, chosen at random; another test's server may hold one.
        var failure: (any Error)?
        for _ in 0..<5 {
            do {
                return try await LocalPostgresServer.make(
                    durable: false, tcpAddresses: ["127.0.0.1"], tcpPort: Int.random(in: 20_000...60_000))
            } catch {
                failure = error
            }
        }
        throw failure!
    }

    /// - Parameter serverGoesAway: `true` (the default) for a test that stops, restarts or cuts off its server: calls
    ///   stuck on a dead server end within 5 s (long enough that most of a loaded machine's calls to a live one end
    ///   well within it: 2 s was not). A test whose server stays up passes `false`: its calls get a minute, since in a
    ///   full parallel run on a loaded machine even 5 s was not enough for the test's own reads (a failed CI run).
    static func configuration(
        _ server: LocalPostgresServer, schema: String = "resilience", serverGoesAway: Bool = true
    ) -> PostgresTaskStore.Configuration {
        var configuration = server.configuration(schema: schema)
        configuration.callTimeout = serverGoesAway ? .seconds(5) : .seconds(60)
        configuration.connectTimeout = serverGoesAway ? .seconds(5) : .seconds(60)
        return configuration
    }

    static func completed(_ store: PostgresTaskStore) async throws -> Int {
        try await store.countRoots(TaskQuery(statuses: [.completed]))
    }

    /// Submits `count` step jobs, runs them while `disturb` is done to the server twice (after a quarter and after
    /// half of the steps were committed), and checks that every job completed, no committed step ran again, and the
    /// executor wrote (its heartbeat) after the last disturbance.
    static func runThrough(
        _ disturbance: String, disturb: @escaping @Sendable (LocalPostgresServer) async throws -> Void
    ) async throws {
        let server = try await Self.server()
        defer { server.discard() }
        let ledger = Ledger()
        try await PostgresTaskStore.withStore(configuration: configuration(server)) { store in
            let executor = try executor(store, ledger: ledger)
            try await executor.start()
            let jobs = 16
            let input = Steps(steps: 6, milliseconds: 25)
            for _ in 0..<jobs { _ = try await executor.submit("steps", input: input) }
            for fraction in [4, 2] {
                do {
                    try await poll("\(jobs * input.steps / fraction) steps to commit", timeout: .seconds(120)) {
                        ledger.committedCount >= jobs * input.steps / fraction
                    }
                } catch {
                    Issue.record(Comment(rawValue: try await diagnosis(executor, store, ledger: ledger)))
                    throw error
                }
                try await disturb(server)
            }
            let disturbed = Date()
            do {
                try await poll("\(jobs) jobs to complete after \(disturbance)", timeout: .seconds(120)) {
                    (try? await completed(store)) == jobs
                }
            } catch {
                Issue.record(Comment(rawValue: try await diagnosis(executor, store, ledger: ledger)))
                throw error
            }
            try await poll("a heartbeat after \(disturbance)", timeout: .seconds(60)) {
                let owners = (try? await store.owners()) ?? []
                return owners.contains { $0.id == executor.ownerID && $0.heartbeatAt > disturbed }
            }
            #expect(ledger.rerunAfterCommit.isEmpty, "steps run again after their commit: \(ledger.rerunAfterCommit)")
            await executor.shutdown()
        }
    }

    /// What the executor and the store hold of unfinished jobs, for a failure's message.
    static func diagnosis(_ executor: TaskExecutor, _ store: PostgresTaskStore, ledger: Ledger? = nil) async throws -> String {
        let graph = executor.graph()
        let unfinished = graph.tasks.filter { !$0.isFinished && $0.parentID == nil }
        var lines = ["storage: \(executor.storageHealth)", "in memory, unfinished roots: \(unfinished.count)"]
        lines.append("loops: \(executor.runningLoops)")
        for task in unfinished.prefix(2) {
            lines.append("  \(task.id) \(task.status)")
            if let ledger { lines += ledger.lines.all.filter { $0.contains(task.id) }.map { "    ledger: " + $0 } }
            for child in graph.tasks where child.parentID == task.id {
                lines.append("    memory \(child.name) \(child.status)")
            }
            for node in try await store.tree(of: task.id) {
                lines.append("    stored \(node.name) \(node.status) owner=\(node.ownerID ?? "-")")
            }
        }
        let stored = try await store.roots(TaskQuery(statuses: [.pending, .running, .paused], limit: 5))
        for root in stored {
            lines.append("  stored \(root.id) \(root.status) owner=\(root.ownerID ?? "-") (executor \(executor.ownerID))")
            for node in try await store.tree(of: root.id).dropFirst() where !node.status.isFinished {
                lines.append("    \(node.name) \(node.status)")
            }
        }
        return lines.joined(separator: "\n")
    }

    @Test(arguments: LocalPostgresServer.StopMode.allCases)
    func jobsCompleteOnceThroughServerRestarts(mode: LocalPostgresServer.StopMode) async throws {
        try await Self.runThrough("pg_ctl restart -m \(mode)") { try await $0.restart(mode) }
    }

    @Test func jobsCompleteOnceWhileTheirBackendsAreKilled() async throws {
        try await Self.runThrough("pg_terminate_backend") { server in
            // Twice in a row: the writer's connection, the listener's and whichever the pool opened again.
            try await server.terminateBackends()
            try await server.terminateBackends()
        }
    }

    @Test func aCallWhileTheServerIsDownFailsWithinItsDeadlineAndTheNextOneAfterItWorks() async throws {
        let server = try await Self.server()
        defer { server.discard() }
        // The deadline is the one of the other tests here (5 s): what is checked is that a call ends while the server
        // is down, not how soon (a shorter one made a loaded machine's first calls to a live server fail for a minute).
        let configuration = Self.configuration(server)
        try await PostgresTaskStore.withStore(configuration: configuration) { store in
            try await poll("a first call to succeed", timeout: .seconds(180)) { (try? await store.statistics()) != nil }
            try await server.stop(.immediate)
            // What is checked is that the call ends, with a transient error.
            let failure = await #expect(throws: TaskStoreError.self) { try await store.statistics() }
            #expect(failure?.reason == .unavailable, "\(String(describing: failure))")
            #expect(failure?.isTransient == true)
            try await server.start()
            let lastError = Recorder<String>()
            do {
                // postgres-nio's pool backs off between failed connection attempts (100 ms × 1.25ⁿ, at most 60 s): a
                // server that a loaded machine took long to start again is reached within a minute of that.
                try await poll("a call to succeed once the server is back", timeout: .seconds(180)) {
                    do {
                        _ = try await store.statistics()
                        return true
                    } catch {
                        lastError.append("\(Date()): \(error)")
                        return false
                    }
                }
            } catch {
                Issue.record("\(lastError.all.suffix(5))")
                throw error
            }
        }
    }

    @Test func aStatementTheServerRefusesIsFinalAndOneThatWaitsPastItsDeadlineIsTransient() async throws {
        let server = try await Self.server()
        defer { server.discard() }
        // The refusals on a deadline no loaded machine reaches: what is checked is the server's answer.
        var patient = Self.configuration(server)
        patient.callTimeout = .seconds(60)
        try await PostgresTaskStore.withStore(configuration: patient) { store in
            let syntax = await #expect(throws: TaskStoreError.self) { try await store.queryPlan("SELEC 1") }
            #expect(syntax?.reason == .refused && syntax?.isTransient == false, "\(String(describing: syntax))")
            let missing = await #expect(throws: TaskStoreError.self) { try await store.queryPlan("SELECT * FROM nowhere") }
            #expect(missing?.reason == .refused && missing?.isTransient == false, "\(String(describing: missing))")
        }
        try await PostgresTaskStore.withStore(configuration: Self.configuration(server)) { store in
            // A lock held elsewhere past the call's deadline: the call ends (the server's statement_timeout or the
            // client's deadline, whichever comes first), transient.
            // Held far longer than the deadline (a loaded machine may see it held late), and ended once checked.
            let holder = Task {
                try? await server.sql("BEGIN; LOCK TABLE resilience.owners IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(300); COMMIT")
            }
            try await poll("the lock to be held", timeout: .seconds(120)) {
                let held = try await server.sql(
                    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'owners' AND l.mode = 'AccessExclusiveLock'")
                return held.trimmingCharacters(in: .whitespacesAndNewlines) != "0"
            }
            let waited = await #expect(throws: TaskStoreError.self) { try await store.owners() }
            #expect(waited?.isTransient == true, "\(String(describing: waited))")
            try await server.terminateBackends(applicationName: "psql")
            _ = await holder.value
            // Then calls go through again (a few tries: the deadline is short).
            try await poll("a call after the lock", timeout: .seconds(60)) { (try? await store.owners()) != nil }
        }
        for (state, reason) in [
            ("42601", TaskStoreError.Reason.refused), ("42501", .refused), ("42P01", .refused), ("23505", .conflict),
            ("23514", .constraint), ("22P02", .constraint), ("40001", .busy), ("40P01", .busy), ("57014", .busy),
            ("57P01", .unavailable), ("57P03", .unavailable), ("08006", .unavailable), ("25P03", .unavailable),
            ("53100", .storageFailure), ("53200", .storageFailure), ("53300", .busy), ("58030", .storageFailure),
            ("XX000", .refused),
        ] {
            #expect(PostgresTaskStore.reason(sqlState: state) == reason, "\(state)")
        }
    }

    @Test func listeningResumesAfterARestart() async throws {
        let server = try await Self.server()
        defer { server.discard() }
        var quiet = Self.configuration(server)
        // No poll tick within the test: only a notification moves the counter.
        quiet.changePollInterval = .seconds(3_600)
        try await PostgresTaskStore.withStore(configuration: quiet) { listener in
            try await PostgresTaskStore.withStore(configuration: Self.configuration(server)) { writer in
                #expect(listener.changes.isListening)
                try await server.restart(.fast)
                try await poll("the listener to listen again", timeout: .seconds(60)) {
                    // What it missed meanwhile counts as a change once it listens again; then it is quiet.
                    listener.changes.isListening
                }
                let before = try await listener.changeCounter()
                try await poll("a write to succeed after the restart", timeout: .seconds(60)) {
                    (try? await writer.addControlRequest(
                        ControlRequest(id: 0, taskID: "t", action: .pause, ownerID: "o", requestedAt: Date()))) != nil
                }
                try await poll("the notification to arrive", timeout: .seconds(120)) {
                    try await listener.changeCounter() != before
                }
            }
        }
    }

    @Test func aGracefulStopEndsWhileTheServerIsDown() async throws {
        let server = try await Self.server()
        defer { server.discard() }
        let ledger = Ledger()
        let store = try await PostgresTaskStore.started(configuration: Self.configuration(server))
        let executor = try Self.executor(store, ledger: ledger)
        try await executor.start()
        for _ in 0..<8 { _ = try await executor.submit("steps", input: Steps(steps: 100, milliseconds: 20)) }
        try await poll("steps to commit", timeout: .seconds(60)) { ledger.committedCount >= 8 }
        try await server.stop(.immediate)
        // Running code waits for commits that cannot come: the stop must still end, bounded by the grace period
        // (2 s; the bound checked here is generous, what matters is that it returns).
        let stopped = Task { await executor.shutdown() }
        let ended = await eventually(timeout: .seconds(60)) { executor.runningLoops == 0 }
        #expect(ended, "the executor did not stop within 60 s with the server down")
        if ended { await stopped.value }
        await store.close()
    }

    /// A batch whose commit answer was lost while the server could not say whether it committed, found committed by
    /// the next batch, which then fails: the executor sends that next batch again as it took it, with the first one's
    /// insert and event, and they are still known as stored (a chaos run lost a job in a way this explains: the
    /// knowledge was dropped once settled, the insert came back as a conflict, and the worker took the row for
    /// another owner's and stopped the job, which then stayed running).
    @Test func whatALostCommitStoredStaysKnownUntilABatchLeavingItOutCommits() async throws {
        let server = try await Self.server()
        defer { server.discard() }
        try await PostgresTaskStore.withStore(configuration: Self.configuration(server, schema: "settle", serverGoesAway: false)) { store in
            let t0 = Date(timeIntervalSince1970: 1_700_000_000)
            var root = TaskRecord(id: "r", name: "r", kind: "k", status: .running, ownerID: "o", createdAt: t0)
            try await store.insert([root], events: [])
            let step = TaskRecord(id: "r.1", parentID: "r", rootID: "r", name: "step", status: .running, createdAt: t0)
            let created = TaskEvent(taskID: "r.1", rootID: "r", kind: .created, at: t0, attempt: 1)
            var first = TaskBatch(owner: "o")
            first.inserts = [step]
            first.events = [created]
            _ = try await store.apply(first)
            // Its answer lost while the server was down: the executor got an error and keeps what it held.
            let xmin = try await server.sql("SELECT xmin::text FROM settle.tasks WHERE id = 'r.1'")
            let xid = try #require(Int64(xmin.trimmingCharacters(in: .whitespacesAndNewlines)))
            store.ambiguous.withLock {
                $0.batches.append(Ambiguous.Batch(commit: .transaction(xid), writes: .init(inserts: ["r.1"], events: [created: 1])))
            }
            root.progress = 0.5
            var next = TaskBatch(owner: "o")
            next.inserts = [step]
            next.events = [created]
            next.updates = [TaskUpdate(root, columns: .progress)]
            _ = try await server.sql(
                """
                CREATE FUNCTION settle.refuse() RETURNS trigger LANGUAGE plpgsql AS
                  $$ BEGIN RAISE EXCEPTION 'no space left (test)' USING ERRCODE = '53100'; END $$;
                CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON settle.tasks FOR EACH ROW EXECUTE FUNCTION settle.refuse();
                """)
            await #expect(throws: TaskStoreError.self) { try await store.apply(next) }
            _ = try await server.sql("DROP TRIGGER refuse ON settle.tasks")
            // Sent again as taken: the step's row is not a conflict, its event not stored twice.
            let result = try await store.apply(next)
            #expect(result.conflictingTaskIDs.isEmpty && result.rejectedTaskIDs.isEmpty, "\(result)")
            #expect(try await store.events(of: "r.1").filter { $0.kind == .created }.count == 1)
            #expect(try await store.task(id: "r")?.progress == 0.5)
            // Once that batch committed, nothing is left to adapt.
            #expect(store.ambiguous.withLock { $0.stored.isEmpty && $0.batches.isEmpty })
        }
    }

    /// Writes of tasks fail (a trigger refuses them, as a full disk would) while the owners table still takes writes:
    /// the executor renews no lease until its writes go through again, so that another host would take its roots.
    @Test func anExecutorWhoseWritesFailRenewsNoLease() async throws {
        let server = try await Self.server()
        defer { server.discard() }
        let ledger = Ledger()
        try await PostgresTaskStore.withStore(configuration: Self.configuration(server, schema: "lease", serverGoesAway: false)) { store in
            let executor = try Self.executor(store, ledger: ledger)
            try await executor.start()
            _ = try await executor.submit("steps", input: Steps(steps: 1_000, milliseconds: 20))
            try await poll("steps to commit", timeout: .seconds(60)) { ledger.committedCount >= 3 }
            func heartbeat() async throws -> Date? {
                try await store.owners().first { $0.id == executor.ownerID }?.heartbeatAt
            }
            _ = try await server.sql(
                """
                CREATE FUNCTION lease.refuse() RETURNS trigger LANGUAGE plpgsql AS
                  $$ BEGIN RAISE EXCEPTION 'no space left (test)' USING ERRCODE = '53100'; END $$;
                CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON lease.tasks FOR EACH ROW EXECUTE FUNCTION lease.refuse();
                """)
            try await poll("the writer to fail", timeout: .seconds(120)) { !executor.storageHealth.isHealthy }
            // Once failing, no heartbeat. The heartbeat loop writes one at a time, so besides the last one before the
            // failure, at most one already under way may land (however late, on a loaded machine): over fifteen
            // heartbeat intervals (200 ms), a live lease would show about fifteen values, this one at most two.
            var seen: Set<Date> = []
            if let first = try await heartbeat() { seen.insert(first) }
            let watch = ContinuousClock.now
            while ContinuousClock.now - watch < .seconds(3) {
                if let now = try await heartbeat() { seen.insert(now) }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(seen.count <= 2, "\(seen.count) heartbeats were written while the writer failed")
            let last = try await heartbeat()
            _ = try await server.sql("DROP TRIGGER refuse ON lease.tasks")
            try await poll("writes to succeed again", timeout: .seconds(120)) { executor.storageHealth.isHealthy }
            try await poll("a heartbeat again", timeout: .seconds(120)) { (try? await heartbeat()) != last }
            await executor.shutdown()
        }
    }

    /// An executor cut off from the server (a relay that stops passing bytes) while it runs jobs: the other executor
    /// takes them once its heartbeat is stale; when the link heals, its late writes are rejected, it stops that work,
    /// and it takes new work again.
    @Test func aWorkerCutOffIsFencedAndTakesNewWorkOnceHealed() async throws {
        let server = try await Self.server(tcp: true)
        defer { server.discard() }
        let proxy = try TCPProxy(port: server.tcpPort)
        defer { proxy.stop() }
        var throughProxy = PostgresTaskStore.Configuration(
            host: "127.0.0.1", port: proxy.port, username: server.username, database: server.database)
        throughProxy.schema = "partition"
        throughProxy.tls = .disable
        throughProxy.callTimeout = .seconds(1)
        throughProxy.connectTimeout = .seconds(1)
        let ledger = Ledger()
        // Host-a's jobs run their first step and then wait for the cut: a job host-a finished before the cut (host-b's
        // start can take seconds on a loaded machine) stays host-a's and host-b never takes it (it failed a CI run).
        let cutMade = Gate()
        let staleAfter = Duration.seconds(2)
        try await PostgresTaskStore.withStore(configuration: throughProxy) { storeA in
            try await PostgresTaskStore.withStore(configuration: Self.configuration(server, schema: "partition")) {
                storeB in
                // The test's own reads go through a store of their own with a deadline no loaded machine reaches: a
                // read of the test that takes 5 s is not what is checked (it failed a CI run).
                var patient = Self.configuration(server, schema: "partition")
                patient.callTimeout = .seconds(60)
                patient.connectTimeout = .seconds(60)
                try await PostgresTaskStore.withStore(configuration: patient) { observer in
                // Host-b judges host-a by `staleAfter`; host-a judges host-b by ten minutes. On a loaded machine
                // host-b's own writes can fail for seconds, and then host-b renews no lease, as it should: with the
                // same 2 s, host-a would rightly take the jobs back once healed, and which host ends up with them
                // would depend on the load, not on the fencing this test checks.
                let a = try Self.executor(storeA, ledger: ledger, host: "host-a", holdAfterFirstStep: cutMade) {
                    $0.ownerStaleAfter = .seconds(600)
                }
                let b = try Self.executor(storeB, ledger: ledger, host: "host-b") { $0.ownerStaleAfter = staleAfter }
                try await a.start()
                let jobs = try await a.submit("steps", inputs: Array(repeating: Steps(steps: 40, milliseconds: 50), count: 4))
                try await poll("host-a to commit the first step of every job", timeout: .seconds(60)) {
                    let committed = ledger.lines.all.filter { $0.hasPrefix("committed ") }
                    return Set(jobs).allSatisfy { job in committed.contains { $0.hasPrefix("committed \(job)/") } }
                }
                try await b.start()
                proxy.cut()
                let cutAt = Date()
                cutMade.open()
                // On a loaded machine host-a's heartbeat can be late enough before the cut for host-b to take a job
                // then (host-a looked dead): those are fenced like the others but are not the cut's takeovers.
                var heldAtCut: [String] = []
                for job in jobs where try await observer.task(id: job)?.ownerID == a.ownerID { heldAtCut.append(job) }
                try await poll("host-b to take every job", timeout: .seconds(60)) {
                    try await jobs.asyncAllSatisfy { job in try await observer.task(id: job)?.ownerID == b.ownerID }
                }
                // Taken only once host-a's heartbeat was stale: its last one (it cannot write while cut, and on a
                // loaded machine it may have stopped before the cut, its writes failing) is at least `staleAfter`
                // before the recovery by host-b of each job it still held at the cut.
                let lastHeartbeat = try #require(try await observer.owners().first { $0.id == a.ownerID }?.heartbeatAt)
                // The claim commits first; host-b writes each job's `recovered` event in a batch after it.
                func recoveries(_ job: String) async throws -> [Date] {
                    try await observer.events(EventQuery(taskID: job, kinds: [.recovered])).filter { $0.taskID == job }
                        .map(\.at)
                }
                try await poll("host-b to record the recoveries", timeout: .seconds(60)) {
                    try await jobs.asyncAllSatisfy { job in try await !recoveries(job).isEmpty }
                }
                for job in heldAtCut {
                    let takenAt = try #require(try await recoveries(job).max(), "\(job) has no recovered event")
                    #expect(
                        takenAt.timeIntervalSince(lastHeartbeat) >= 1.95,
                        "\(job) taken \(takenAt.timeIntervalSince(lastHeartbeat)) s after host-a's last heartbeat")
                }
                proxy.heal()
                // Its writes for them are rejected: it stops them and forgets them.
                try await poll("host-a to stop the jobs it lost", timeout: .seconds(60)) {
                    jobs.allSatisfy { job in a.snapshot(of: job) == nil }
                }
                try await poll("every job to complete on host-b", timeout: .seconds(120)) {
                    try await jobs.asyncAllSatisfy { job in try await observer.task(id: job)?.status == .completed }
                }
                for job in jobs {
                    let root = try #require(try await observer.task(id: job))
                    #expect(root.ownerID == b.ownerID, "\(job) is held by \(root.ownerID ?? "none")")
                    let completions = try await observer.events(EventQuery(taskID: job, kinds: [.completed]))
                        .filter { $0.taskID == job }
                    #expect(completions.count == 1, "\(job) completed \(completions.count) times")
                }
                #expect(ledger.rerunAfterCommit.isEmpty, "steps run again after their commit: \(ledger.rerunAfterCommit)")
                // Host-a writes again (its heartbeat) and takes new work: host-b stops, a new job goes to host-a.
                try await poll("host-a's heartbeat after the cut", timeout: .seconds(60)) {
                    ((try? await observer.owners().first { $0.id == a.ownerID }?.heartbeatAt) ?? .distantPast) > cutAt
                }
                await b.shutdown()
                let late = try await a.submit("steps", input: Steps(steps: 2, milliseconds: 10))
                try await poll("host-a to run a new job", timeout: .seconds(60)) {
                    try await observer.task(id: late)?.status == .completed
                }
                #expect(try await observer.task(id: late)?.ownerID == a.ownerID)
                await a.shutdown()
                }
            }
        }
    }
}

extension Sequence {
    func asyncAllSatisfy(_ predicate: (Element) async throws -> Bool) async rethrows -> Bool {
        for element in self where try await !predicate(element) { return false }
        return true
    }
}
#endif
