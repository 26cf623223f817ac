import ArgumentParser
import Foundation
import Logging
import Progression

/// Options of `run` and `serve`: which database, how many jobs at once.
struct DatabaseOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The SQLite database holding the tasks, or a postgres://user@host:port/db?schema=name URL (default: $PROGRESSION_DB, else $XDG_STATE_HOME/progression/progression.sqlite, else ~/.local/state/progression/progression.sqlite). Created when missing.",
            valueName: "path|url"))
    var db: String?

    @Option(name: .long, help: ArgumentHelp("At most this many jobs run at once.", valueName: "n"))
    var concurrency: Int = 2

    @Option(
        name: .customLong("owner-stale-after"),
        help: ArgumentHelp(
            "Seconds without a heartbeat after which a service on another host (another $PROGRESSION_HOST) counts as dead and its jobs are taken over.",
            valueName: "seconds"))
    var ownerStaleAfter: Double = 15

    /// The path in force: `--db`, else the library's default.
    var databasePath: String {
        if let db, !db.isEmpty { return db }
        return SQLiteTaskStore.defaultPath
    }

    func validate() throws {
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be 1 or more") }
        guard ownerStaleAfter >= 0.5, ownerStaleAfter <= 86_400 else {
            throw ValidationError("--owner-stale-after must be between 0.5 and 86400 seconds")
        }
    }

    /// An executor on the database with the demo's job kind registered; its scheduler is not started yet.
    /// The executor on the database; with `logger`, the executor logs its recoveries, claims and control requests.
    func makeExecutor(logger: Logger? = nil, jobLogger: Logger? = nil) async throws -> TaskExecutor {
        var configuration = TaskExecutor.Configuration()
        if let logger { configuration.logger = logger }
        configuration.maxConcurrentTasks = concurrency
        configuration.shutdownGracePeriod = .seconds(5)
        // kill -9 is part of the demo: allow a few more interruptions than the default before calling it a crash loop.
        configuration.maxInterruptions = 20
        configuration.ownerStaleAfter = .milliseconds(Int64(ownerStaleAfter * 1000))
        // A few heartbeats within the lease, so one late write does not make the service look dead.
        configuration.heartbeatInterval = min(.seconds(2), .milliseconds(Int64(ownerStaleAfter * 1000 / 4)))
        let executor: TaskExecutor
        if DemoDatabase.isPostgres(databasePath) {
            executor = try TaskExecutor(store: try await DemoDatabase.openPostgres(databasePath), configuration: configuration)
            try ChecksumJob.register(on: executor, logger: jobLogger)
            return executor
        }
        do {
            // The default state directories are one user's: 0700 whatever the umask (before the executor would make
            // them with the umask's mode).
            if databasePath == SQLiteTaskStore.defaultPath {
                try SQLiteTaskStore.createParentDirectories(of: databasePath)
            }
            executor = try TaskExecutor(path: databasePath, configuration: configuration)
        } catch let error as TaskStoreError {
            throw DemoError(error.description)  // it names the file
        } catch {
            throw DemoError("cannot open the database '\(databasePath)': \(ProgressionError.describe(error))")
        }
        try ChecksumJob.register(on: executor, logger: jobLogger)
        return executor
    }
}

/// Finding the job of a directory: one job per directory and run, found again by its idempotency key.
enum JobLookup {
    /// Submits the checksum job of `input`'s directory, or finds the one a killed run left: the key is the directory's
    /// absolute path; once that job has finished, the next run of the same directory gets `<path>#2`, and so on.
    ///
    /// - Returns: the job's id and whether it existed (a resumed run).
    static func submit(_ input: ChecksumInput, on executor: TaskExecutor) async throws -> (id: String, existed: Bool) {
        let directory = input.directoryPath
        var generation = 1
        while true {
            let key = generation == 1 ? directory : "\(directory)#\(generation)"
            if let existing = try await executor.store.root(kind: ChecksumJob.kind, idempotencyKey: key) {
                if existing.status.isFinished {
                    generation += 1
                    continue
                }
                return (existing.id, true)
            }
            let name = "checksum " + URL(fileURLWithPath: directory).lastPathComponent
            let id = try await executor.submit(
                ChecksumJob.kind, input: input,
                options: JobOptions(name: name, idempotencyKey: key, options: TaskOptions.interactive.retryable()))
            return (id, false)
        }
    }
}
