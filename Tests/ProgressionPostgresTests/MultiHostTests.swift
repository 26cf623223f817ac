#if PostgreSQL
import Foundation
import Progression
import ProgressionPostgres
import ProgressionPostgresTestSupport
import ProgressionTestSupport
import Testing

/// Several "hosts" on one PostgreSQL database: `progression-demo serve` processes with distinct `$PROGRESSION_HOST`
/// (so each judges the other by its heartbeat, never by its pid), and progressctl as a third host.
@Suite(.serialized)
struct MultiHostTests {
    /// How long a host's heartbeat may be silent before the other takes its jobs.
    static let staleAfter = 3.0

    /// A schema of its own on the test process's server, with its URL and a store to read it.
    struct Database {
        let url: String
        let store: PostgresTaskStore
        let server: LocalPostgresServer
        let schema: String

        init() async throws {
            server = try await LocalPostgresServer.shared()
            schema = "hosts_\(UInt32.random(in: 0...UInt32.max))"
            url = server.url(schema: schema)
            store = try await PostgresTaskStore.started(configuration: server.configuration(schema: schema))
        }

        /// How many job-tree changes wait for the fleet's tree keeper.
        func queuedTreeChanges() async throws -> Int {
            let output = try await server.sql("SELECT count(*) FROM \(schema).tree_changes")
            return Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }

        /// The owner ids of a host's executors.
        func owners(of host: String) async throws -> Set<String> {
            Set(try await store.owners().filter { $0.host == host }.map(\.id))
        }
    }

    /// `count` directories of `files` small files each.
    static func makeData(_ count: Int, files: Int, in scratch: TemporaryDirectory) throws -> [URL] {
        try (0..<count).map { index in
            let directory = scratch.url.appendingPathComponent("data-\(index)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            for file in 0..<files {
                try Data(String(repeating: "job \(index) file \(file)\n", count: 50).utf8)
                    .write(to: directory.appendingPathComponent("f\(file).txt"))
            }
            return directory
        }
    }

    /// Submits a checksum job per directory, as `progressctl submit` would commit it; returns their ids.
    static func submit(_ directories: [URL], delayMilliseconds: Int, to store: PostgresTaskStore) async throws -> [String] {
        let now = Date()
        let records = try directories.enumerated().map { index, directory in
            let input = try JSONSerialization.data(
                withJSONObject: [
                    "directory": directory.path, "fileDelayMilliseconds": delayMilliseconds, "parallelFiles": 1,
                ], options: [.sortedKeys])
            return TaskRecord(
                id: "job-\(UUID().uuidString.prefix(8).lowercased())", name: "checksum \(index)", kind: "checksum",
                input: input, options: TaskOptions.interactive.retryable(), createdAt: now.addingTimeInterval(Double(index) / 1000))
        }
        try await store.insert(records, events: [])
        return records.map(\.id)
    }

    /// The job that checksums the one folder of `job`'s directory (the demo's job starts one child job per folder,
    /// which any host runs; its steps are the files).
    static func folderJob(of job: String, in database: Database) async throws -> String {
        var folder: String?
        try await poll("\(job) to start its folder's job", timeout: .seconds(60)) {
            folder = try await database.store.tree(of: job).first(where: \.isLink)?.childJobID
            return folder != nil
        }
        return try #require(folder)
    }

    /// A demo service as `host` (it claims only what it can start now, leaving the rest to the other host).
    static func serve(
        _ database: Database, host: String, concurrency: Int, in scratch: TemporaryDirectory
    ) throws -> ChildProcess {
        try ChildProcess(
            "progression-demo",
            [
                "serve", "--db", database.url, "--concurrency", "\(concurrency)", "--owner-stale-after",
                "\(staleAfter)", "--log-level", "info",
            ], host: host, in: scratch)
    }

    @Test func twoHostsRunTwoHundredJobsEachOnceAndShareThem() async throws {
        let scratch = try TemporaryDirectory()
        let database = try await Database()
        let directories = try Self.makeData(200, files: 2, in: scratch)
        // Each host claims only what its 4 slots can start, so neither takes the whole batch.
        let a = try Self.serve(database, host: "host-a", concurrency: 4, in: scratch)
        let b = try Self.serve(database, host: "host-b", concurrency: 4, in: scratch)
        defer { Task { await a.terminate(); await b.terminate() } }
        try await poll("both hosts to start", timeout: .seconds(60)) {
            a.output.contains("serving checksum jobs") && b.output.contains("serving checksum jobs")
        }
        // Jobs arrive over two seconds, as a service's submissions do: each host claims unowned ones when its
        // scheduler looks, up to its backlog.
        var ids: [String] = []
        for wave in stride(from: 0, to: directories.count, by: 10) {
            ids += try await Self.submit(Array(directories[wave..<(wave + 10)]), delayMilliseconds: 0, to: database.store)
            try await Task.sleep(for: .milliseconds(100))
        }
        // Each job's files are in one folder: one child job each, which either host runs.
        do {
            try await poll("200 jobs to complete", until: 200) {
                try await database.store.countRoots(TaskQuery(statuses: [.completed], kind: "checksum"), upTo: nil)
            }
        } catch {
            // What each host and the store say, for a run that stops short.
            let unfinished = try await database.store.roots(TaskQuery(statuses: [.pending, .running, .paused]))
            let rows = unfinished.prefix(40).map {
                "\($0.id) \($0.kind ?? "-") \($0.status) owner=\($0.ownerID ?? "-") wait=\(String(describing: $0.wait)) for=\($0.waitingFor ?? "-") next=\(String(describing: $0.nextAttemptAt))"
            }
            Issue.record(
                """
                \(unfinished.count) unfinished roots:
                \(rows.joined(separator: "\n"))
                host-a:
                \(a.output.split(separator: "\n").suffix(40).joined(separator: "\n"))
                host-b:
                \(b.output.split(separator: "\n").suffix(40).joined(separator: "\n"))
                """)
            throw error
        }
        let ownersA = try await database.owners(of: "host-a")
        let ownersB = try await database.owners(of: "host-b")
        var ranOnA = 0
        var ranOnB = 0
        for id in ids {
            let root = try #require(try await database.store.task(id: id))
            #expect(root.status == .completed && root.attempt == 1 && root.interruptions == 0)
            let events = try await database.store.events(EventQuery(taskID: id, kinds: [.completed, .interrupted]))
            #expect(events.filter { $0.taskID == id }.map(\.kind) == [.completed], "\(id)")
            // Its folder's job ran once, on one host: one start and one completion in its history.
            let folderID = try #require(try await database.store.tree(of: id).first(where: \.isLink)?.childJobID)
            let folder = try #require(try await database.store.task(id: folderID))
            #expect(folder.status == .completed && folder.attempt == 1 && folder.interruptions == 0)
            if let owner = folder.ownerID, ownersA.contains(owner) { ranOnA += 1 }
            if let owner = folder.ownerID, ownersB.contains(owner) { ranOnB += 1 }
            let folderEvents = try await database.store.events(
                EventQuery(taskID: folderID, kinds: [.started, .completed, .interrupted]))
            #expect(folderEvents.filter { $0.taskID == folderID }.map(\.kind) == [.started, .completed], "\(folderID)")
        }
        #expect(ranOnA + ranOnB == 200)
        #expect(ranOnA > 0 && ranOnB > 0, "work shared: host-a ran \(ranOnA), host-b \(ranOnB)")
        for directory in directories {
            #expect(FileManager.default.fileExists(atPath: directory.path + ".manifest.tsv"))
        }
        await a.terminate()
        await b.terminate()
    }

    /// Starts host-a alone with one slow job, waits until its folder's job has completed `steps` file steps there,
    /// then starts host-b. Returns the job, its folder's job (where the files are read) and host-a's owner of it.
    static func slowJobOnHostA(
        _ database: Database, in scratch: TemporaryDirectory, files: Int, delay: Int, steps: Int
    ) async throws -> (job: String, folder: String, a: ChildProcess, b: ChildProcess, ownerA: String) {
        let directory = try makeData(1, files: files, in: scratch)
        let a = try serve(database, host: "host-a", concurrency: 2, in: scratch)
        try await poll("host-a to start", timeout: .seconds(60)) { a.output.contains("serving checksum jobs") }
        let job = try await submit(directory, delayMilliseconds: delay, to: database.store)[0]
        let folder = try await folderJob(of: job, in: database)
        try await poll("host-a to complete \(steps) file steps", timeout: .seconds(60)) {
            try await database.store.tree(of: folder).filter { $0.status == .completed && $0.name.hasSuffix(".txt") }
                .count >= steps
        }
        let ownerA = try #require(try await database.store.task(id: folder)?.ownerID)
        #expect(try await database.owners(of: "host-a").contains(ownerA))
        let b = try serve(database, host: "host-b", concurrency: 2, in: scratch)
        try await poll("host-b to start", timeout: .seconds(60)) { b.output.contains("serving checksum jobs") }
        return (job, folder, a, b, ownerA)
    }

    @Test func aKilledHostsJobIsResumedByTheOtherOnlyOnceItsHeartbeatIsStale() async throws {
        let scratch = try TemporaryDirectory()
        let database = try await Database()
        let (job, folder, a, b, ownerA) = try await Self.slowJobOnHostA(
            database, in: scratch, files: 12, delay: 250, steps: 3)
        defer { Task { await a.terminate(); await b.terminate() } }
        a.signal(SIGKILL)
        _ = try await a.waitForExit(timeout: .seconds(120))
        let done = try await database.store.tree(of: folder).filter {
            $0.status == .completed && $0.name.hasSuffix(".txt")
        }
        let lastHeartbeat = try #require(try await database.store.owners().first { $0.id == ownerA }?.heartbeatAt)

        try await poll("host-b to take the folder's job", timeout: .seconds(120)) {
            try await database.store.task(id: folder)?.ownerID != ownerA
        }
        let takenAt = Date()
        // Not before the heartbeat went stale (the claim's own time, in the history, tells when).
        let interrupted = try await database.store.events(EventQuery(taskID: folder, kinds: [.interrupted]))
            .filter { $0.taskID == folder }
        let claimedAt = interrupted.last?.at ?? takenAt
        #expect(claimedAt.timeIntervalSince(lastHeartbeat) >= Self.staleAfter, "taken \(claimedAt.timeIntervalSince(lastHeartbeat)) s after the last heartbeat")
        let ownersB = try await database.owners(of: "host-b")
        #expect(ownersB.contains(try #require(try await database.store.task(id: folder)?.ownerID)))

        try await poll("the job to complete on host-b", timeout: .seconds(60)) {
            try await database.store.task(id: job)?.status == .completed
        }
        let root = try #require(try await database.store.task(id: job))
        #expect(try await database.store.task(id: folder)?.interruptions == 1)
        // Completed steps were skipped: their stored results came back, their rows untouched.
        let summary = try JSONDecoder().decode(Summary.self, from: try #require(root.checkpoint))
        #expect(summary.files == 12)
        #expect(summary.skipped >= done.count, "skipped \(summary.skipped), completed before the kill \(done.count)")
        let after = try await database.store.tree(of: folder)
        for step in done {
            let now = try #require(after.first { $0.id == step.id })
            #expect(now.finishedAt == step.finishedAt && now.result == step.result && now.attempt == step.attempt)
        }
        await b.terminate()
    }

    @Test func aHostStoppedPastItsLeaseFindsItsWritesRejectedAndStopsTheJob() async throws {
        let scratch = try TemporaryDirectory()
        let database = try await Database()
        let (job, folder, a, b, ownerA) = try await Self.slowJobOnHostA(
            database, in: scratch, files: 16, delay: 300, steps: 2)
        defer { Task { await a.terminate(); await b.terminate() } }
        a.signal(SIGSTOP)
        try await poll("host-b to take the folder's job", timeout: .seconds(120)) {
            try await database.store.task(id: folder)?.ownerID != ownerA
        }
        let ownerB = try #require(try await database.store.task(id: folder)?.ownerID)
        #expect(try await database.owners(of: "host-b").contains(ownerB))
        // The first host comes back while the second runs the job: its writes are rejected and it stops the job.
        a.signal(SIGCONT)
        try await poll("host-a to notice the lost lease", timeout: .seconds(120)) {
            a.output.contains("lost tasks to another owner")
        }
        try await poll("the job to complete on host-b", timeout: .seconds(90)) {
            try await database.store.task(id: job)?.status == .completed
        }
        let root = try #require(try await database.store.task(id: job))
        #expect(try await database.store.task(id: folder)?.ownerID == ownerB)
        for id in [job, folder] {
            let events = try await database.store.events(EventQuery(taskID: id)).filter { $0.taskID == id }
            #expect(events.filter { $0.kind == .completed }.count == 1)
        }
        let summary = try JSONDecoder().decode(Summary.self, from: try #require(root.checkpoint))
        #expect(summary.files == 16)
        // host-a is alive and holds nothing: the job's code stopped there, and no row of it names host-a.
        #expect(kill(a.pid, 0) == 0)
        let tree = try await database.store.tree(of: job) + database.store.tree(of: folder)
        #expect(tree.allSatisfy { $0.status == .completed })
        try await poll("host-a to hold no unfinished root", timeout: .seconds(120)) {
            try await database.store.roots(TaskQuery(statuses: [.pending, .running, .paused])).allSatisfy { $0.ownerID != ownerA }
        }
        await a.terminate()
        await b.terminate()
    }

    @Test func progressctlOnAnotherHostReadsAndControlsThroughNotify() async throws {
        let scratch = try TemporaryDirectory()
        let database = try await Database()
        let directory = try Self.makeData(1, files: 40, in: scratch)
        let a = try Self.serve(database, host: "host-a", concurrency: 2, in: scratch)
        defer { Task { await a.terminate() } }
        try await poll("host-a to start", timeout: .seconds(60)) { a.output.contains("serving checksum jobs") }
        let parent = try await Self.submit(directory, delayMilliseconds: 100, to: database.store)[0]
        // The folder's job runs on host-a (its parent waits for it, without an owner): the changes aimed at it go to
        // host-a as control requests.
        let job = try await Self.folderJob(of: parent, in: database)
        try await poll("the job to run", timeout: .seconds(60)) { try await database.store.task(id: job)?.status == .running }
        func ctl(_ arguments: String...) async throws -> (status: Int32, output: String) {
            try await ChildProcess.run("progressctl", ["--db", database.url] + arguments, host: "host-c", in: scratch)
        }
        let list = try await ctl("list")
        #expect(list.status == 0 && list.output.contains(job), "\(list.output)")
        let show = try await ctl("show", job)
        #expect(show.status == 0 && show.output.contains("running"), "\(show.output)")
        let history = try await ctl("history", job)
        #expect(history.status == 0 && history.output.contains("started"), "\(history.output)")

        // Each change goes to host-a as a control request, applied within a second of being written.
        for (action, expected) in [("pause", TaskStatus.paused), ("resume", .running), ("cancel", .cancelled)] {
            let result = try await ctl(action, job)
            #expect(result.status == 0, "\(action): \(result.output)")
            try await poll("\(action) to show", timeout: .seconds(120)) {
                try await database.store.task(id: job)?.status == expected
            }
            let requests = try await database.store.pendingControlRequests(for: nil)
            #expect(requests.isEmpty)
        }
        // The parent, whose child was cancelled, ends before its child runs again, and the tree keeper has carried
        // out its end (which cancels its unfinished children: a child retried before that would be cancelled again).
        try await poll("the parent to end", timeout: .seconds(60)) {
            guard try await database.store.task(id: parent)?.status.isFinished == true else { return false }
            return try await database.queuedTreeChanges() == 0
        }
        let retried = try await ctl("retry", job)
        #expect(retried.status == 0, "\(retried.output)")
        try await poll("the retried job to run again", timeout: .seconds(60)) {
            let root = try await database.store.task(id: job)
            return root?.attempt == 2 && root?.status.isFinished == false
        }
        let watch = try await ctl("watch", job, "--until-done")
        #expect(watch.status == 0, "\(watch.output)")
        #expect(try await database.store.task(id: job)?.status == .completed)
        // Every request was handled and applied by the owner on the other host (how soon is not bounded here: a
        // loaded machine is slow; aControlRequestWakesAnotherStoreThroughNotifyNotThePoll shows it comes by NOTIFY).
        let handled = try await handledRequests(of: job, in: database)
        #expect(handled.count == 4)
        for request in handled {
            #expect(request.handledAt != nil)
            #expect(request.outcome == "applied")
        }
        await a.terminate()
    }

    private func handledRequests(of job: String, in database: Database) async throws -> [ControlRequest] {
        var requests: [ControlRequest] = []
        var id: Int64 = 1
        while let request = try await database.store.controlRequest(id: id) {
            if request.taskID == job { requests.append(request) }
            id += 1
        }
        return requests
    }

    /// The demo's job summary, as far as these tests read it.
    struct Summary: Decodable {
        var files: Int
        var skipped: Int
    }
}
#endif
