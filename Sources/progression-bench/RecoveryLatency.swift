import Foundation
import Progression
import ProgressionSQLite

/// Recovery after a crash: a database holding 100,000 unfinished jobs (`running`, of a registered kind) of an owner
/// whose process is gone; a new executor registers the kind and calls `start()`.
///
/// Two moments are timed from just before `start()`:
/// - **first running**: the first job body runs (`recovery_first_running_ms_100k`, and `recovery_ms_100k`, the
///   figure with the < 1,000 ms target), median of ``trials`` runs, each on a fresh copy of the database;
/// - **all claimed**: no row is held by the dead owner any more (`SELECT count(*) … WHERE owner_id = 'dead'` on a
///   connection of its own, polled every 50 ms). Measured in the first run only, and given up after
///   ``BenchSizes/recoveryClaimWait``: the executor claims what its free slots can start, and again as they free,
///   so the last roots are claimed as the jobs before them end. When it gives up, the figure is reported as not
///   reached (`null` in JSON, `> 30,000` in the table) beside the fraction claimed by then.
///
/// The executor runs with the default configuration, so the figures are what a service gets out of the box.
enum RecoveryLatency {
    static let trials = 3
    static let deadOwner = "dead"
    static let kind = "noop"

    static let scenario = Scenario(
        name: "recovery",
        keys: [
            "recovery_ms_100k", "recovery_first_running_ms_100k", "recovery_all_claimed_ms_100k",
            "recovery_claimed_fraction", "recovery_start_returned_ms_100k",
        ]
    ) { context in
        let jobs = context.sizes.recoveryJobs
        let wait = context.sizes.recoveryClaimWait
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let template = scratch.file("dead-owner.sqlite")
        let (_, buildTime) = try await Measurement.time { try await buildDatabase(template, jobs: jobs) }
        context.log(
            "built \(FigureFormat.number(Double(jobs))) running jobs of a dead owner in "
                + "\(String(format1: buildTime.inSeconds, decimals: 1)) s")

        var runs: [Run] = []
        for trial in 0..<trials {
            let copy = scratch.file("trial-\(trial).sqlite")
            try FileManager.default.copyItem(atPath: template, toPath: copy)
            let run = try await recover(copy, jobs: jobs, waitForAllClaimed: trial == 0 ? wait : nil)
            try? FileManager.default.removeItem(atPath: copy)
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: copy + suffix) }
            context.log(
                "trial \(trial + 1): first job running after \(String(format1: run.firstRunning.inMilliseconds, decimals: 1)) ms, "
                    + "start() returned after \(String(format1: run.startReturned.inMilliseconds, decimals: 1)) ms"
                    + (trial == 0
                        ? ", " + (run.allClaimed.map { "all claimed after \(String(format1: $0.inMilliseconds, decimals: 0)) ms" }
                            ?? "\(FigureFormat.number(Double(run.claimed))) of \(FigureFormat.number(Double(jobs))) claimed after \(String(format1: wait.inSeconds, decimals: 0)) s")
                        : ""))
            runs.append(run)
        }

        let shape = "\(FigureFormat.number(Double(jobs))) running jobs of a dead owner, default configuration"
        let firstRunning = Measurement.median(runs.map(\.firstRunning.inMilliseconds))
        let long = runs[0]
        var allClaimed = Figure(
            "recovery_all_claimed_ms_100k", long.allClaimed?.inMilliseconds, unit: "ms", target: .below(1_000),
            note: "start() until no row is held by the dead owner, \(shape) (claims as slots "
                + "free), one run, given up after \(String(format1: wait.inSeconds, decimals: 0)) s")
        if long.allClaimed == nil { allClaimed.notReachedWithin = wait.inMilliseconds }
        return [
            Figure(
                "recovery_ms_100k", firstRunning, unit: "ms", target: .below(50),
                note: "= recovery_first_running_ms_100k (all claimed: see recovery_all_claimed_ms_100k)"),
            Figure(
                "recovery_first_running_ms_100k", firstRunning, unit: "ms", target: .below(50),
                note: "register + start() until the first job body runs, \(shape), median of \(trials) "
                    + "(\(runs.map { String(format1: $0.firstRunning.inMilliseconds, decimals: 0) }.joined(separator: ", ")))"),
            allClaimed,
            Figure(
                "recovery_claimed_fraction", Double(long.claimed) / Double(jobs), unit: "ratio",
                note: "share of the dead owner's jobs claimed when the all-claimed wait ended", allowsZero: true),
            Figure(
                "recovery_start_returned_ms_100k", Measurement.median(runs.map(\.startReturned.inMilliseconds)),
                unit: "ms", note: "how long start() itself took (its first recovery pass), median of \(trials)"),
        ]
    }

    /// What one recovery run measured.
    struct Run: Sendable {
        var firstRunning: Duration
        var startReturned: Duration
        /// `nil`: not all within the wait (or not waited for).
        var allClaimed: Duration?
        /// Roots no longer held by the dead owner when the run ended.
        var claimed: Int
    }

    /// Starts an executor on `path` and times it (see the type's description). Waits for all jobs to be claimed only
    /// when `waitForAllClaimed` is given, and at most that long.
    static func recover(_ path: String, jobs: Int, waitForAllClaimed: Duration?) async throws -> Run {
        let watcher = try SQLiteConnection(path: path)
        defer { watcher.close() }
        func held() throws -> Int {
            Int(try watcher.scalarInt("SELECT count(*) FROM tasks WHERE owner_id = ?", [.text(deadOwner)]) ?? 0)
        }
        guard try held() == jobs else { throw BenchFailure("the dead owner does not hold \(jobs) jobs") }

        let store = try SQLiteTaskStore(path: path)
        let executor = TaskExecutor(store: store)
        let firstRun = SharedValue<ContinuousClock.Instant?>(nil)
        try executor.register(kind, input: RecoveredInput.self) { _, _ in
            let now = ContinuousClock.now
            firstRun.update { if $0 == nil { $0 = now } }
        }
        let start = ContinuousClock.now
        try await executor.start()
        let startReturned = ContinuousClock.now - start

        var allClaimed: Duration?
        var remaining = jobs
        let deadline = start + (waitForAllClaimed ?? .seconds(30))
        while true {
            // Counting rows costs a few ms of a core: only once the first job runs, and then every 50 ms.
            let running = firstRun.value != nil
            if running, waitForAllClaimed != nil, allClaimed == nil {
                remaining = try held()
                if remaining == 0 { allClaimed = ContinuousClock.now - start }
            }
            if running, waitForAllClaimed == nil || allClaimed != nil { break }
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(running ? 50 : 1))
        }
        if waitForAllClaimed == nil { remaining = try held() }
        await executor.shutdown()
        await store.close()
        guard let first = firstRun.value else { throw BenchFailure("no recovered job ran within the wait") }
        return Run(
            firstRunning: first - start, startReturned: startReturned, allClaimed: allClaimed,
            claimed: jobs - remaining)
    }

    /// The recovered jobs' input (an empty JSON object).
    struct RecoveredInput: Codable, Sendable {}

    /// Writes a database of `jobs` root jobs, `running`, of kind `noop`, held by the owner `dead` (this host, a pid
    /// that does not exist), each with its `created` and `started` events. The file is made by `SQLiteTaskStore` (so
    /// the schema is the library's), then filled with raw inserts, 10,000 per transaction.
    static func buildDatabase(_ path: String, jobs: Int) async throws {
        let store = try SQLiteTaskStore(path: path)
        let base = Date().addingTimeInterval(-3_600)
        try await store.saveOwner(
            OwnerRecord(
                id: deadOwner, host: OwnerRecord.currentHost, pid: 999_999_999, startedAt: base, heartbeatAt: base))
        await store.close()

        let connection = try SQLiteConnection(path: path)
        defer { connection.close() }
        try connection.execute("PRAGMA synchronous=OFF")
        let insertTask = try connection.prepare(
            """
            INSERT INTO tasks (id, root_id, name, occurrence, kind, input, options, status, progress, weight, attempt,
              interruptions, owner_id, priority, created_at, started_at, updated_at)
            VALUES (?1, ?1, ?2, 0, ?3, ?4, ?5, 'running', 0.25, 1.0, 1, 0, ?6, 0, ?7, ?8, ?8)
            """, persistent: true)
        let insertEvent = try connection.prepare(
            "INSERT INTO events (task_id, root_id, kind, at, attempt) VALUES (?1, ?1, ?2, ?3, 1)", persistent: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let options = String(decoding: try encoder.encode(TaskOptions.default), as: UTF8.self)
        let input = Array(try encoder.encode(RecoveredInput()))
        let baseMilliseconds = Int64(base.timeIntervalSince1970 * 1000)
        for first in stride(from: 0, to: jobs, by: 10_000) {
            try connection.transaction {
                for job in first..<min(jobs, first + 10_000) {
                    let id = ListDatabase.id(root: job, node: 0)
                    let created = baseMilliseconds + Int64(job)
                    insertTask.reset()
                    try insertTask.bind(id, at: 1)
                    try insertTask.bind("recovered \(job)", at: 2)
                    try insertTask.bind(kind, at: 3)
                    try insertTask.bind(input, at: 4)
                    try insertTask.bind(options, at: 5)
                    try insertTask.bind(deadOwner, at: 6)
                    try insertTask.bind(created, at: 7)
                    try insertTask.bind(created + 5, at: 8)
                    _ = try insertTask.step()
                    for (event, at) in [("created", created), ("started", created + 5)] {
                        insertEvent.reset()
                        try insertEvent.bind(id, at: 1)
                        try insertEvent.bind(event, at: 2)
                        try insertEvent.bind(at, at: 3)
                        _ = try insertEvent.step()
                    }
                }
            }
        }
        try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }
}
