import Foundation
import ProgressionSQLite

/// The durable ``TaskStore``: one SQLite database file in WAL mode.
///
/// The store owns one connection and runs on a dispatch queue of its own, so a statement that waits (on the busy
/// timeout, on the disk) never blocks Swift's cooperative thread pool. Cancelling the Swift task that awaits a call
/// interrupts the statement it runs (`sqlite3_interrupt`); the transaction is rolled back.
///
/// Opening it creates the file with mode 0600 when it does not exist, and applies the migrations embedded in the binary.
/// A database written by a newer version, another application's database (tables but no Progression schema), an
/// empty file this process did not create (a truncated database), and a path through a symbolic link owned by another
/// user are refused and left untouched.
///
/// ```swift
/// let store = try SQLiteTaskStore(path: "/var/lib/myservice/tasks.sqlite")
/// let executor = TaskExecutor(store: store)
/// ```
public actor SQLiteTaskStore: TaskStoreBackend, BroadcastingChanges {
    /// How the database is opened.
    public struct Configuration: Sendable {
        /// How commits reach the disk (SQLite's `synchronous` setting, in WAL mode).
        public enum Synchronous: Sendable {
            /// Commits survive a process crash; a power loss may lose the last ones but never corrupts the file.
            case normal
            /// Every commit is synced to the disk: it also survives a power loss, at the cost of an `fsync` per
            /// commit.
            case full
        }

        /// How commits reach the disk (`.normal` by default).
        public var synchronous: Synchronous = .normal
        /// How long to wait for another process's write lock before failing with `.busy`.
        public var busyTimeout: Duration = .seconds(5)
        /// Create the file when it does not exist.
        public var createIfMissing = true
        /// Open without writing anything (no migration; every write fails), and without leaving a `-wal` or `-shm`
        /// file that the database's writer could not use.
        public var readOnly = false

        /// The defaults: created when missing, writable, `synchronous=NORMAL`, a 5 s busy timeout.
        public init() {}
    }

    /// The database file.
    public nonisolated let path: String
    /// How long a statement waits for another process's lock.
    let busyTimeout: Duration
    private let queue: DispatchSerialExecutor
    let connection: SQLiteConnection
    let encoder: JSONEncoder
    let decoder = JSONDecoder()
    /// Tasks share a few option sets: their JSON is encoded once.
    var encodedOptions: [TaskOptions: String] = [:]
    /// And decoded once: reading a tree of 10,000 nodes decoded the same few option sets 10,000 times (most of the
    /// read's time; console-bench's job page).
    var decodedOptions: [String: TaskOptions] = [:]
    /// Narrow UPDATE statements by the columns they write (and what they check of the row).
    var updateStatements: [UInt64: SQLiteStatement] = [:]
    /// Checkpoints the log off the commit path (`nil` when read-only).
    let checkpointer: WALCheckpointer?
    /// Shared with every store of this file in the process: posted after each commit.
    package nonisolated let beacons: StoreBeacons

    /// The store's dispatch queue: its statements never block Swift's cooperative thread pool.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }

    /// The executor's writer runs on the store's queue: its calls into the store switch no thread.
    package nonisolated var writerExecutor: UnownedSerialExecutor? { queue.asUnownedSerialExecutor() }

    /// Opens the database at `path`, creating and migrating it as needed.
    ///
    /// When `path` is ``defaultPath``, its missing directories are created with mode 0700.
    ///
    /// - Throws: ``TaskStoreError`` naming the file: `.cannotOpen` (missing directory or file, a dangling symbolic
    ///   link or one owned by another user), `.notADatabase`, `.foreignDatabase`, `.corrupt` (truncated, or empty but
    ///   not new), `.readOnly`, `.busy`, `.schemaTooNew`. The file is left as it was.
    public init(path: String, configuration: Configuration = .init()) throws {
        self.path = path
        busyTimeout = configuration.busyTimeout
        queue = DispatchSerialExecutor(label: "progression.sqlite")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        self.encoder = encoder
        var options = SQLiteConnectionOptions()
        options.readOnly = configuration.readOnly
        options.create = configuration.createIfMissing
        options.busyTimeout = configuration.busyTimeout
        options.synchronous = configuration.synchronous == .full ? .full : .normal
        options.pageSizeOfNewDatabase = Self.pageSize
        let migrator = SQLiteMigrator(migrations: SQLiteMigration.embedded)
        options.validate = { connection in try migrator.checkOwnership(of: connection) }
        if path == Self.defaultPath, configuration.createIfMissing, !configuration.readOnly {
            try Self.createParentDirectories(of: path)
        }
        do {
            connection = try Self.openRetryingBusy(path: path, options: options, readOnly: configuration.readOnly)
        } catch let error as SQLiteError {
            throw Self.storeError(error, path: path)
        }
        beacons = StoreBeacons.forDatabase(StoreBeacons.key(ofFile: path))
        if configuration.readOnly {
            checkpointer = nil
        } else {
            let checkpointer = WALCheckpointer(path: path)
            connection.checkpointAfterCommits(
                handOff: Self.checkpointHandOffFrames, inline: Self.checkpointInlineFrames
            ) { checkpointer.request() }
            self.checkpointer = checkpointer
        }
    }

    /// The page size of a new database. A commit rewrites the last leaf page of the tasks table, of each index that
    /// new roots are in and of the events table: with 2 KiB pages instead of SQLite's 4 KiB it writes 29 % fewer bytes
    /// (3,600 instead of 5,080 per task in progression-bench's RSS child; the same throughput, A/B twice). Rows of more
    /// than about 2,000 bytes (large inputs, checkpoints) spill into overflow pages, as larger ones do with 4 KiB.
    /// Databases made before keep their 4 KiB pages.
    static let pageSize = 2_048

    /// Frames in the log (a page each: about 8 MiB with 2 KiB pages) from which commits ask the checkpointer for a
    /// checkpoint. Four times SQLite's own threshold: a checkpoint costs two `fsync`s and competes with the writer for the cores,
    /// and fewer of them raised jobs_per_s from 28,200-28,500 to 30,700-30,900 (progression-bench, 2 cores, A/B twice).
    static let checkpointHandOffFrames = 4_000
    /// Frames from which the store's connection checkpoints after a commit itself (the checkpointer fell behind, or a
    /// reader holds old frames): the log stays under about 20 MiB (40 MiB in a database of 4 KiB pages).
    static let checkpointInlineFrames = 10_000

    /// Opens and migrates the database. Two processes opening a new file at once can meet SQLite's deadlock
    /// avoidance (`SQLITE_BUSY` without waiting) while one switches it to WAL or migrates it: the open is tried again
    /// until the busy timeout runs out.
    private static func openRetryingBusy(
        path: String, options: SQLiteConnectionOptions, readOnly: Bool
    ) throws -> SQLiteConnection {
        let deadline = ContinuousClock.now + options.busyTimeout
        while true {
            do {
                return try openAndMigrate(path: path, options: options, readOnly: readOnly)
            } catch let error as SQLiteError where error.code.primary == SQLiteError.busy && ContinuousClock.now < deadline {
                usleep(20_000)
            }
        }
    }

    private static func openAndMigrate(
        path: String, options: SQLiteConnectionOptions, readOnly: Bool
    ) throws -> SQLiteConnection {
        do {
            // `options.validate` refuses another application's database before anything is written to it.
            let connection = try SQLiteConnection(path: path, options: options)
            let migrator = SQLiteMigrator(migrations: SQLiteMigration.embedded)
            if readOnly {
                let pending = try migrator.pendingMigrations(in: connection)
                guard pending.isEmpty else {
                    throw TaskStoreError(
                        .cannotOpen, path: path,
                        message: "the database needs migrations \(pending.map(\.identifier)) and was opened read-only")
                }
            } else {
                try migrator.migrate(connection, now: Date().storedMilliseconds)
            }
            return connection
        }
    }

    /// The default database path: `$PROGRESSION_DB`, else `$XDG_STATE_HOME/progression/progression.sqlite`, else
    /// `$HOME/.local/state/progression/progression.sqlite`. The library and `progressctl` agree on it.
    ///
    /// As the XDG Base Directory specification says, `$XDG_STATE_HOME` counts only when it is an absolute path; a
    /// missing or relative `$HOME` falls back to the home directory of the user database.
    public static var defaultPath: String {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["PROGRESSION_DB"], !path.isEmpty { return path }
        let state: String
        if let directory = environment["XDG_STATE_HOME"], directory.hasPrefix("/") {
            state = directory
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            state = (home.hasSuffix("/") ? String(home.dropLast()) : home) + "/.local/state"
        } else {
            state = NSHomeDirectory() + "/.local/state"
        }
        return state + "/progression/progression.sqlite"
    }

    /// Creates the missing directories above `path` with mode 0700 whatever the umask: the state directory holds one
    /// user's tasks. Directories that exist are left as they are.
    ///
    /// - Throws: ``TaskStoreError`` (`.cannotOpen`) naming the directory that cannot be created.
    package static func createParentDirectories(of path: String) throws {
        var missing: [String] = []
        var directory = (path as NSString).deletingLastPathComponent
        var info = stat()
        while !directory.isEmpty, directory != "/", stat(directory, &info) != 0 {
            missing.append(directory)
            directory = (directory as NSString).deletingLastPathComponent
        }
        for directory in missing.reversed() {
            guard mkdir(directory, 0o700) == 0 || errno == EEXIST else {
                throw TaskStoreError(
                    .cannotOpen, path: path,
                    message: "cannot create the directory '\(directory)': \(String(cString: strerror(errno)))")
            }
            chmod(directory, 0o700)
        }
    }

    /// Closes the database. Later calls fail.
    public func close() {
        updateStatements.removeAll()
        checkpointer?.close()
        connection.close()
    }

    // MARK: Running SQL

    /// Runs `body` in an immediate transaction; cancellation interrupts it and rolls it back. Its commit is posted to
    /// the stores of the database in this process (``StoreBeacons/commits``) unless `postsCommit` is false: a write
    /// that can neither end nor remove a job (a claim) wakes no waiter.
    func write<T>(postsCommit: Bool = true, _ body: (SQLiteConnection) throws -> T) async throws -> T {
        let result = try await read { connection in try connection.transaction { try body(connection) } }
        if postsCommit { beacons.commits.post() }
        return result
    }

    /// Runs `body`; cancellation interrupts the statement it runs. SQLite errors become ``TaskStoreError``s.
    func read<T>(_ body: (SQLiteConnection) throws -> T) async throws -> T {
        let interrupt = connection.interruptHandle
        if Task.isCancelled { throw TaskStoreError(.cancelled, path: path, message: "cancelled before it ran") }
        do {
            return try await withTaskCancellationHandler {
                try body(connection)
            } onCancel: {
                interrupt.interrupt()
            }
        } catch let error as SQLiteError {
            throw Self.storeError(error, path: path)
        } catch let error as EncodingError {
            throw TaskStoreError(.other, path: path, message: "cannot encode a value: \(error)")
        } catch let error as DecodingError {
            throw TaskStoreError(.corrupt, path: path, message: "cannot decode a stored value: \(error)")
        }
    }

    static func storeError(_ error: SQLiteError, path: String) -> TaskStoreError {
        let reason: TaskStoreError.Reason =
            switch error.code.primary {
            case SQLiteError.schemaTooNew: .schemaTooNew
            case SQLiteError.foreignDatabase: .foreignDatabase
            case SQLiteError.cantOpen: .cannotOpen
            case SQLiteError.notADatabase: .notADatabase
            case SQLiteError.corrupt: .corrupt
            case SQLiteError.readOnly: .readOnly
            case SQLiteError.busy, SQLiteError.locked, SQLiteError.lockProtocol, SQLiteError.schemaChanged: .busy
            case SQLiteError.full, SQLiteError.ioError, SQLiteError.noMemory: .storageFailure
            case SQLiteError.permission: .readOnly
            case SQLiteError.interrupt: .cancelled
            case SQLiteError.constraint:
                // A duplicate identity is a conflict; a broken CHECK, NOT NULL or foreign key is bad data.
                [1555, 2067].contains(error.code.rawValue) ? .conflict : .constraint
            default: .other
            }
        var message = error.message
        if let sql = error.sql, reason == .constraint || reason == .other {
            message += " (in: \(sql.prefix(120)))"
        }
        return TaskStoreError(reason, path: path, message: message, sqliteCode: error.code.rawValue)
    }

}
