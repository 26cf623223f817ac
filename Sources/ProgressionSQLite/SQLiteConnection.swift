import CSQLite
import CSQLiteWAL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How a connection is opened and configured.
package struct SQLiteConnectionOptions: Sendable {
    /// Open for reading only; the file must exist. Nothing is written, and no `-wal` or `-shm` file is created that
    /// the database's writer could not use (see ``SQLiteConnection/init(path:options:)``).
    package var readOnly = false
    /// Create the file (mode 0600) when it does not exist. Ignored when `readOnly`.
    package var create = true
    /// How long a statement waits for a lock held by another connection before it fails with `SQLITE_BUSY`; also how
    /// long an empty file that another process may be creating is waited for.
    package var busyTimeout: Duration = .seconds(5)
    /// `synchronous=NORMAL` (durable across a process crash in WAL mode) or `FULL` (also across a power loss).
    package var synchronous: SQLiteSynchronousMode = .normal
    /// Checks the database once SQLite has read it and before anything is written to it (before the switch to WAL):
    /// throwing refuses the database, which is closed as it was. The store refuses other applications' files with it.
    package var validate: (@Sendable (SQLiteConnection) throws -> Void)?
    /// The page size of a database this connection creates (SQLite's default, 4096, when `nil`). A database that
    /// has its schema keeps the page size it was made with.
    package var pageSizeOfNewDatabase: Int?
    /// Open with SQLite's `immutable=1`: no locks, no side files, the file is assumed never to change. Only for a
    /// file no writer can change; set by the connection itself for such files.
    var immutable = false

    package init() {}
}

/// SQLite's `PRAGMA synchronous` settings that are meaningful with WAL.
package enum SQLiteSynchronousMode: String, Sendable, Codable {
    case normal = "NORMAL"
    case full = "FULL"
}

/// One connection to a database file.
///
/// A connection is confined to one serial executor (the actor that owns it): it is opened with
/// `SQLITE_OPEN_NOMUTEX` and never `Sendable`. The one thing other threads may do is interrupt it, through
/// ``interruptHandle``.
///
/// At open it turns extended result codes on, sets a finite busy timeout, switches to WAL (and checks that SQLite
/// reports `wal`), sets `synchronous`, and turns foreign keys on.
package final class SQLiteConnection {
    /// The path of the database file.
    package let path: String
    let handle: OpaquePointer
    /// Interrupts the statement running on this connection from any thread.
    package let interruptHandle: SQLiteInterruptHandle
    /// Prepared statements by SQL text, each with when it was last used (``statementUses``): at most
    /// ``statementCacheCapacity``, the least recently used dropped first (a dropped statement is finalized once no
    /// caller holds it). Unbounded, it grew for the life of the connection with every distinct text — a list of
    /// `?` of each length a batch happened to have — by about 100 bytes a job over a soak of a million jobs.
    private var statementCache: [String: (statement: SQLiteStatement, used: UInt64)] = [:]
    private var statementUses: UInt64 = 0
    /// How many prepared statements a connection keeps: every fixed text the library runs, with room to spare.
    package static let statementCacheCapacity = 256
    private var transactionDepth = 0
    /// Set by ``checkpointAfterCommits(handOff:inline:handOffNeeded:)``; SQLite points at it until the connection
    /// closes.
    private var commitHook: CommitHook?

    /// Opens (and, by default, creates) the database at `path`.
    ///
    /// Before SQLite sees the file it is checked: a symbolic link owned by another user (neither root nor the current
    /// user) is not followed, as OpenSSH and systemd treat such paths; a dangling link, a missing directory, a file or
    /// directory that is not writable, and an empty file that this process did not create just now (a truncated
    /// database, or one left by a process that failed before its first write) are refused with a message that says
    /// so. An empty file another process is creating is waited for, up to the busy timeout.
    ///
    /// Read-only, a database in WAL mode whose `-wal` or `-shm` file is missing is opened without creating files its
    /// writer could not use: with `immutable=1` when no writer can change it (the file or its directory has no write
    /// permission at all, or the file system is read-only) and its `-wal` is missing or empty; else, as its owner or
    /// root, after creating the missing files with the database's owner and its mode plus `rw` for the owner (once
    /// ``SQLiteConnectionOptions/validate`` accepted the database); as another user it is refused.
    ///
    /// - Throws: ``SQLiteError`` naming the file when it cannot be opened, is not a database, is truncated, is
    ///   read-only while writing was asked for, is refused by `validate`, or when WAL cannot be enabled. The file is
    ///   not modified then.
    package init(path: String, options: SQLiteConnectionOptions = .init()) throws {
        self.path = path
        let plan = try Self.checkFile(path: path, options: options)
        if !plan.sideFilesToCreate.isEmpty {
            // Check the database before creating anything beside it: a database refused is left without side files.
            var probe = options
            probe.immutable = true
            try SQLiteConnection(path: path, options: probe).close()
            try Self.createSideFiles(plan.sideFilesToCreate, like: plan.resolvedPath)
        }

        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        flags |= options.readOnly || plan.immutable ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        var name = path
        if plan.immutable {
            flags |= SQLITE_OPEN_URI
            name = Self.immutableURI(plan.resolvedPath)
        }
        var db: OpaquePointer?
        let code = sqlite3_open_v2(name, &db, flags, try Self.vfsName())
        guard code == SQLITE_OK, let db else {
            let message = db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) } ?? "cannot open"
            sqlite3_close_v2(db)
            throw SQLiteError(code: code, message: message, path: path)
        }
        handle = db
        interruptHandle = SQLiteInterruptHandle(handle: db)
        do {
            try configure(options: options, writable: !options.readOnly && !plan.immutable)
        } catch {
            close()
            throw error
        }
    }

    deinit {
        close()
    }

    /// The VFS every connection opens its file with: the default one, with the frames of a WAL commit written by one
    /// `write` call instead of two a page (`Sources/CSQLiteWAL`), which halved the writer's kernel time per commit.
    private static func vfsName() throws -> String {
        let code = progression_wal_vfs_register()
        guard code == SQLITE_OK else {
            throw SQLiteError(code: code, message: "cannot register SQLite's WAL-coalescing VFS")
        }
        return PROGRESSION_WAL_VFS_NAME
    }

    /// Closes the connection. Idempotent; later calls on the connection are a programming error.
    package func close() {
        guard interruptHandle.invalidate() else { return }
        statementCache.removeAll()
        sqlite3_close_v2(handle)
        commitHook = nil
    }

    /// How long a statement waits for a lock held by another connection before it fails with `SQLITE_BUSY`.
    package func setBusyTimeout(_ timeout: Duration) {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        sqlite3_busy_timeout(handle, Int32(clamping: milliseconds))
    }

    // MARK: Checkpoints

    /// How a checkpoint treats readers and writers (`sqlite3_wal_checkpoint_v2`).
    package enum CheckpointMode: Sendable {
        /// Copies what it can without waiting for anyone.
        case passive
        /// Waits for the writer and for readers of older frames, copies everything, and truncates the log to zero
        /// bytes.
        case truncate

        var code: Int32 {
            switch self {
            case .passive: SQLITE_CHECKPOINT_PASSIVE
            case .truncate: SQLITE_CHECKPOINT_TRUNCATE
            }
        }
    }

    /// What the WAL-coalescing VFS did for this connection: the `xWrite` calls SQLite made on its `-wal` file (two a
    /// frame) and the `write` calls made to the file for them. `nil` until the connection opened its `-wal` file, or
    /// when the VFS could not tell which `-wal` file is this connection's.
    package var walWrites: (sqliteWrites: Int64, fileWrites: Int64)? {
        var statistics = progression_wal_vfs_statistics()
        let code = sqlite3_file_control(handle, "main", PROGRESSION_WAL_VFS_STATISTICS, &statistics)
        guard code == SQLITE_OK, statistics.linked != 0 else { return nil }
        return (statistics.sqlite_writes, statistics.file_writes)
    }

    /// Copies the write-ahead log's frames into the database file. Returns the frames in the log and how many of
    /// them are in the database now.
    @discardableResult
    package func checkpoint(_ mode: CheckpointMode) throws -> (logFrames: Int, checkpointed: Int) {
        var log: Int32 = 0
        var done: Int32 = 0
        let code = sqlite3_wal_checkpoint_v2(handle, nil, mode.code, &log, &done)
        guard code == SQLITE_OK else { throw error(code: code, sql: "checkpoint") }
        return (Int(log), Int(done))
    }

    /// The policy that replaces SQLite's automatic checkpoint, which runs in the commit that crosses its threshold and
    /// makes that commit (and whoever waits for it) wait for two `fsync`s.
    ///
    /// After each commit, on the thread that committed: when the log has grown by `handOff` frames since it started
    /// over or since the last call, `handOffNeeded` is called (to have another connection checkpoint, off this
    /// thread: while commits go on, the log does not start over, and asking at every commit would copy the same hot
    /// pages again and again); when it holds `inline` frames or more (the other connection falls behind, or readers
    /// hold old frames), this connection checkpoints passively itself, so that the log stays bounded.
    package func checkpointAfterCommits(handOff: Int, inline: Int, handOffNeeded: @escaping @Sendable () -> Void) {
        precondition(handOff > 0 && inline >= handOff, "thresholds must be positive and inline >= handOff")
        let hook = CommitHook(handOff: Int32(clamping: handOff), inline: Int32(clamping: inline), handOffNeeded: handOffNeeded)
        commitHook = hook
        sqlite3_wal_hook(
            handle,
            { context, db, _, frames in
                guard let context else { return SQLITE_OK }
                let hook = Unmanaged<CommitHook>.fromOpaque(context).takeUnretainedValue()
                if frames < hook.lastFrames {
                    // The log started over.
                    hook.nextHandOff = hook.handOff
                }
                hook.lastFrames = frames
                if frames >= hook.inline {
                    // As SQLite's own automatic checkpoint does; a failure (a reader holds old frames) is retried
                    // after the next commit.
                    sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
                } else if frames >= hook.nextHandOff {
                    hook.nextHandOff = frames + hook.handOff
                    hook.handOffNeeded()
                }
                return SQLITE_OK
            },
            Unmanaged.passUnretained(hook).toOpaque())
    }

    /// What the commit hook reads and keeps; the connection keeps it alive while SQLite holds a pointer to it, and it
    /// is used only by the connection's commits (on the connection's thread).
    private final class CommitHook {
        let handOff: Int32
        let inline: Int32
        let handOffNeeded: @Sendable () -> Void
        /// The log's size at which the next hand-off is asked for.
        var nextHandOff: Int32
        /// The log's size after the previous commit (a smaller one means it started over).
        var lastFrames: Int32 = 0

        init(handOff: Int32, inline: Int32, handOffNeeded: @escaping @Sendable () -> Void) {
            self.handOff = handOff
            self.inline = inline
            self.handOffNeeded = handOffNeeded
            nextHandOff = handOff
        }
    }

    private func configure(options: SQLiteConnectionOptions, writable: Bool) throws {
        sqlite3_extended_result_codes(handle, 1)
        setBusyTimeout(options.busyTimeout)
        progression_sqlite_disable_dqs(handle)
        progression_sqlite_enable_defensive(handle)

        try checkHeader()
        // The first read of the file: a file that is not a database fails here, before anything is written.
        let schemaVersion = try scalarInt("PRAGMA schema_version")
        try options.validate?(self)
        if writable {
            // Only before the first write: once the file has pages (or is in WAL mode) SQLite keeps its size.
            if schemaVersion == 0, let pageSize = options.pageSizeOfNewDatabase {
                try execute("PRAGMA page_size=\(pageSize)")
            }
            let mode = try scalarText("PRAGMA journal_mode=WAL")
            guard mode?.lowercased() == "wal" else {
                throw SQLiteError(
                    code: SQLITE_ERROR, message: "journal_mode=WAL was refused (SQLite reports '\(mode ?? "nothing")')",
                    path: path)
            }
        }
        try execute("PRAGMA synchronous=\(options.synchronous.rawValue)")
        try execute("PRAGMA foreign_keys=ON")
    }

    // MARK: Checking the file

    /// What ``checkFile(path:options:)`` decided about opening the file.
    private struct OpenPlan {
        /// The file `path` names, after its symbolic links (SQLite names the side files after it).
        var resolvedPath: String
        /// Open with `immutable=1`.
        var immutable = false
        /// The side files (`-wal`, `-shm`) to create, with the database's owner and mode, before SQLite opens it.
        var sideFilesToCreate: [String] = []
    }

    /// Checks what SQLite would otherwise report late, wrongly or not at all: a symbolic link that is not safe to
    /// follow or leads nowhere, a missing directory, a file or directory that is not writable (also for root, who
    /// SQLite would let write a file marked read-only), an empty file that is not new. Creates a missing file.
    ///
    /// Nothing here opens the file once it may be open in SQLite (closing a descriptor of a file drops this process's
    /// POSIX locks on it, SQLite's included): the header is read through SQLite in ``checkHeader()``.
    private static func checkFile(path: String, options: SQLiteConnectionOptions) throws -> OpenPlan {
        func fail(_ code: Int32, _ message: String) -> SQLiteError {
            SQLiteError(code: code, message: message, path: path)
        }
        let resolved = try resolveSymbolicLinks(path, fail: fail)
        let directory = parentDirectory(of: resolved)
        var info = stat()
        var createdNow = false
        if stat(path, &info) != 0 {
            createdNow = try createFile(path: path, directory: directory, options: options, fail: fail)
            guard stat(path, &info) == 0 else { throw fail(SQLITE_CANTOPEN, "the database file vanished") }
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw fail(SQLITE_CANTOPEN, "not a regular file")
        }
        if !options.readOnly && !options.immutable {
            guard isWritable(path, mode: info.st_mode) else {
                throw fail(SQLITE_READONLY, "the database file is read-only")
            }
            var directoryInfo = stat()
            if stat(directory, &directoryInfo) == 0, !isWritable(directory, mode: directoryInfo.st_mode) {
                throw fail(SQLITE_READONLY, "the directory '\(directory)' is not writable (WAL needs to create files)")
            }
        }
        if info.st_size == 0, !createdNow {
            try waitForEmptyFile(path: path, resolvedPath: resolved, info: &info, timeout: options.busyTimeout, fail: fail)
        }
        var plan = OpenPlan(resolvedPath: resolved)
        if options.immutable {
            plan.immutable = true
        } else if options.readOnly {
            try planReadOnly(&plan, info: info, directory: directory, fail: fail)
        }
        return plan
    }

    /// Follows `path` through its symbolic links to the file it names.
    ///
    /// A link owned by another user than root or the current one could be pointed at any file by that user (at
    /// another user's database, for root): it is refused. So is a dangling link, with a message that says so.
    private static func resolveSymbolicLinks(_ path: String, fail: (Int32, String) -> SQLiteError) throws -> String {
        var current = path
        for _ in 0..<40 {
            var info = stat()
            guard lstat(current, &info) == 0 else {
                guard current == path else {
                    throw fail(SQLITE_CANTOPEN, "'\(path)' is a dangling symbolic link: its target '\(current)' does not exist")
                }
                return current
            }
            guard (info.st_mode & S_IFMT) == S_IFLNK else { return current }
            if info.st_uid != 0 && info.st_uid != geteuid() {
                let which = current == path ? "'\(path)' is a symbolic link" : "'\(path)' leads through the symbolic link '\(current)'"
                throw fail(
                    SQLITE_CANTOPEN,
                    "\(which) owned by another user (uid \(info.st_uid)), who could point it at any file: it is not followed")
            }
            var target = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = readlink(current, &target, target.count - 1)
            guard count >= 0 else {
                throw fail(SQLITE_CANTOPEN, "cannot read the symbolic link '\(current)': \(String(cString: strerror(errno)))")
            }
            let destination = String(decoding: target[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            current = destination.hasPrefix("/") ? destination : parentDirectory(of: current) + "/" + destination
        }
        throw fail(SQLITE_CANTOPEN, "too many levels of symbolic links")
    }

    /// Creates the database file with mode 0600 (SQLite gives the -wal and -shm files the mode of the database file).
    /// Returns `false` when another process created it first.
    private static func createFile(
        path: String, directory: String, options: SQLiteConnectionOptions, fail: (Int32, String) -> SQLiteError
    ) throws -> Bool {
        guard !options.readOnly, options.create else {
            throw fail(SQLITE_CANTOPEN, "the database file does not exist")
        }
        var directoryInfo = stat()
        guard stat(directory, &directoryInfo) == 0, (directoryInfo.st_mode & S_IFMT) == S_IFDIR else {
            throw fail(SQLITE_CANTOPEN, "the directory '\(directory)' does not exist")
        }
        guard isWritable(directory, mode: directoryInfo.st_mode) else {
            throw fail(SQLITE_READONLY, "the directory '\(directory)' is not writable")
        }
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if descriptor < 0 {
            if errno == EEXIST { return false }
            let reason = String(cString: strerror(errno))
            throw fail(SQLITE_CANTOPEN, "cannot create the database file: \(reason)")
        }
        Glibc.close(descriptor)
        return true
    }

    /// An empty file that this process did not create: a database is never empty once its creator wrote its first
    /// page, which follows the creation within moments. So a young empty file is waited for (up to `timeout`: another
    /// process may be creating it, and holds no lock yet); one that stays empty, or that has a `-wal` beside it (which
    /// only a database with pages gets), is a truncated database or one whose creator failed, and is refused.
    private static func waitForEmptyFile(
        path: String, resolvedPath: String, info: inout stat, timeout: Duration, fail: (Int32, String) -> SQLiteError
    ) throws {
        var walInfo = stat()
        if stat(resolvedPath + "-wal", &walInfo) == 0 {
            throw fail(
                SQLITE_CORRUPT,
                "the database file is empty (0 bytes) but has a write-ahead log beside it ('\(resolvedPath)-wal', "
                    + "\(walInfo.st_size) bytes): it was truncated or replaced; restore it from a backup")
        }
        let timeoutMilliseconds = timeout.components.seconds * 1000
            + timeout.components.attoseconds / 1_000_000_000_000_000
        let ageMilliseconds = (Int64(time(nil)) - Int64(info.st_mtim.tv_sec)) * 1000
        if ageMilliseconds <= timeoutMilliseconds + 1000 {
            var waited: Int64 = 0
            while info.st_size == 0, waited < timeoutMilliseconds {
                usleep(10_000)
                waited += 10
                guard stat(path, &info) == 0 else { throw fail(SQLITE_CANTOPEN, "the database file vanished") }
            }
        }
        guard info.st_size == 0 else { return }
        throw fail(
            SQLITE_CORRUPT,
            "the database file is empty (0 bytes) and was not created by this process: it was truncated, or its "
                + "creator failed before writing it; remove it to start a new database")
    }

    /// Chooses how to open a file read-only without leaving side files its writer could not use: a reader of a
    /// database in WAL mode makes SQLite create a missing `-wal` and `-shm` with the database's mode and the reader's
    /// owner (root gives them the database's owner), and never removes them; a `-wal` of mode 0400, or one owned by
    /// another user, then stops the writer with "attempt to write a readonly database".
    private static func planReadOnly(
        _ plan: inout OpenPlan, info: stat, directory: String, fail: (Int32, String) -> SQLiteError
    ) throws {
        let file = plan.resolvedPath
        var sideInfo = stat()
        let missing = [file + "-wal", file + "-shm"].filter { (name: String) in lstat(name, &sideInfo) != 0 }
        // Only a database in WAL mode makes a reader create side files. Reading the header with a descriptor of our
        // own is safe here: with a side file missing, no WAL connection of this process has the file open.
        guard !missing.isEmpty, isInWALMode(file) else { return }
        let walIsEmpty = stat(file + "-wal", &sideInfo) != 0 || sideInfo.st_size == 0
        if walIsEmpty, nobodyWrites(file, mode: info.st_mode, directory: directory) {
            plan.immutable = true
            return
        }
        let user = geteuid()
        guard user == 0 || user == info.st_uid else {
            let names = missing.map { "'\($0)'" }.joined(separator: " and ")
            throw fail(
                SQLITE_CANTOPEN,
                "reading it would create \(names) owned by uid \(user), which its owner (uid \(info.st_uid)) could "
                    + "not write; read it as that user or root, or while its service has it open")
        }
        plan.sideFilesToCreate = missing
    }

    /// Whether the header marks the file as a database in WAL mode (bytes 18 and 19 are 2).
    private static func isInWALMode(_ path: String) -> Bool {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { Glibc.close(descriptor) }
        var versions = [UInt8](repeating: 0, count: 2)
        let count = versions.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, 2, 18) }
        return count == 2 && versions == [2, 2]
    }

    /// Whether no writer of Progression can change the file: the file or its directory has no write permission at
    /// all (writers refuse those, see ``isWritable(_:mode:)``), or the file system is read-only.
    private static func nobodyWrites(_ path: String, mode: mode_t, directory: String) -> Bool {
        if mode & 0o222 == 0 { return true }
        var directoryInfo = stat()
        if stat(directory, &directoryInfo) == 0, directoryInfo.st_mode & 0o222 == 0 { return true }
        var fileSystem = statvfs()
        return statvfs(path, &fileSystem) == 0 && fileSystem.f_flag & UInt(ST_RDONLY) != 0
    }

    /// Creates side files for a reader as SQLite would for the writer: the database's owner and group, its mode with
    /// read and write for the owner (whatever the umask). One that another process created meanwhile is left as it is.
    private static func createSideFiles(_ files: [String], like database: String) throws {
        var info = stat()
        guard stat(database, &info) == 0 else {
            throw SQLiteError(code: SQLITE_CANTOPEN, message: "the database file vanished", path: database)
        }
        let mode = (info.st_mode & 0o666) | 0o600
        for file in files {
            let descriptor = open(file, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
            guard descriptor >= 0 else {
                if errno == EEXIST { continue }
                throw SQLiteError(
                    code: SQLITE_CANTOPEN, message: "cannot create '\(file)': \(String(cString: strerror(errno)))",
                    path: database)
            }
            defer { Glibc.close(descriptor) }
            fchmod(descriptor, mode)
            if geteuid() == 0 { fchown(descriptor, info.st_uid, info.st_gid) }
        }
    }

    /// A `file:` URI opening `path` with `immutable=1` (`%`, `?` and `#` percent-encoded, as SQLite's URIs need).
    private static func immutableURI(_ path: String) -> String {
        var encoded = ""
        for character in path.unicodeScalars {
            switch character {
            case "%": encoded += "%25"
            case "?": encoded += "%3f"
            case "#": encoded += "%23"
            default: encoded.unicodeScalars.append(character)
            }
        }
        // A relative path must not begin with "//", which a URI reads as an authority.
        if !path.hasPrefix("/") { encoded = "./" + encoded }
        return "file:" + encoded + "?immutable=1"
    }

    /// A file or directory is writable when the process may write it and someone may: a file whose mode has no write
    /// bit at all was marked read-only on purpose, which root would otherwise override.
    private static func isWritable(_ path: String, mode: mode_t) -> Bool {
        access(path, W_OK) == 0 && (mode & 0o222) != 0
    }

    private static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }

    /// Reads the 100-byte header, through SQLite's own file handle: the magic string, and the size the header records
    /// against the file's size (a truncated file). A file shorter than a header is left to SQLite (an empty file is
    /// a new database).
    private func checkHeader() throws {
        func fail(_ code: Int32, _ message: String) -> SQLiteError {
            SQLiteError(code: code, message: message, path: path)
        }
        let file = sqlite3_db_filename(handle, "main").map { String(cString: $0) } ?? path
        var info = stat()
        guard stat(file, &info) == 0, info.st_size >= 100 else { return }
        let size = Int64(info.st_size)
        var header = [UInt8](repeating: 0, count: 100)
        guard header.withUnsafeMutableBytes({ readMainFile(into: $0, at: 0) }) == SQLITE_OK else { return }
        let magic = Array("SQLite format 3".utf8) + [0]
        guard Array(header[0..<16]) == magic else {
            throw fail(SQLITE_NOTADB, "file is not a database")
        }
        func bigEndian(_ offset: Int, _ width: Int) -> Int64 {
            header[offset..<offset + width].reduce(0) { $0 << 8 | Int64($1) }
        }
        var pageSize = bigEndian(16, 2)
        if pageSize == 1 { pageSize = 65536 }
        let pageCount = bigEndian(28, 4)
        let changeCounter = bigEndian(24, 4)
        let versionValidFor = bigEndian(92, 4)
        // The in-header size is valid only when written by a version that maintains it. While a WAL file exists, a
        // checkpoint may have been cut short and the WAL still holds the pages, so the file may be shorter.
        var walInfo = stat()
        let hasWAL = stat(file + "-wal", &walInfo) == 0 && walInfo.st_size > 0
        if changeCounter == versionValidFor, pageCount > 0, !hasWAL, size < pageCount * pageSize {
            throw fail(
                SQLITE_CORRUPT,
                "the database file is truncated: \(size) bytes, its header records \(pageCount * pageSize)")
        }
    }

    /// Reads bytes of the main database file through SQLite's file handle (see ``checkFile(path:options:)`` for
    /// why not through a descriptor of our own).
    private func readMainFile(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 {
        var file: UnsafeMutablePointer<sqlite3_file>?
        let code = sqlite3_file_control(handle, "main", SQLITE_FCNTL_FILE_POINTER, &file)
        guard code == SQLITE_OK, let file, let methods = file.pointee.pMethods, let read = methods.pointee.xRead else {
            return SQLITE_ERROR
        }
        return read(file, buffer.baseAddress, Int32(buffer.count), offset)
    }

    // MARK: Statements

    /// Prepares one statement. The SQL must hold exactly one statement.
    package func prepare(_ sql: String, persistent: Bool = false) throws -> SQLiteStatement {
        var statement: OpaquePointer?
        var tail: UnsafePointer<CChar>?
        let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        let code = sql.withCString { sqlite3_prepare_v3(handle, $0, -1, flags, &statement, &tail) }
        guard code == SQLITE_OK else { throw error(code: code, sql: sql) }
        guard let statement else {
            throw SQLiteError(code: SQLITE_MISUSE, message: "no statement in the SQL", sql: sql, path: path)
        }
        return SQLiteStatement(handle: statement, sql: sql, connection: self)
    }

    /// A prepared statement kept for the life of the connection, for SQL that runs often.
    package func cachedStatement(_ sql: String) throws -> SQLiteStatement {
        statementUses &+= 1
        if let cached = statementCache[sql] {
            statementCache[sql] = (cached.statement, statementUses)
            return cached.statement
        }
        let statement = try prepare(sql, persistent: true)
        if statementCache.count >= Self.statementCacheCapacity,
            let oldest = statementCache.min(by: { $0.value.used < $1.value.used })?.key
        {
            statementCache.removeValue(forKey: oldest)
        }
        statementCache[sql] = (statement, statementUses)
        return statement
    }

    /// How many prepared statements the connection keeps now.
    package var cachedStatementCount: Int { statementCache.count }

    /// Runs SQL text that may hold several statements, each in turn (a migration file), walking the tail pointer.
    package func execute(_ sql: String) throws {
        try sql.withCString { start in
            var next: UnsafePointer<CChar>? = start
            while let current = next, current.pointee != 0 {
                var statement: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                let code = sqlite3_prepare_v3(handle, current, -1, 0, &statement, &tail)
                guard code == SQLITE_OK else { throw error(code: code, sql: String(cString: current)) }
                next = tail
                guard let statement else { continue }  // white space or a comment
                defer { sqlite3_finalize(statement) }
                var stepCode: Int32
                repeat { stepCode = sqlite3_step(statement) } while stepCode == SQLITE_ROW
                guard stepCode == SQLITE_DONE else {
                    throw error(code: stepCode, sql: String(cString: sqlite3_sql(statement)))
                }
            }
        }
    }

    /// Runs one statement with parameters.
    package func execute(_ sql: String, _ values: [SQLiteValue]) throws {
        try cachedStatement(sql).execute(values)
    }

    /// Runs a query and maps its rows.
    package func query<Row>(
        _ sql: String, _ values: [SQLiteValue] = [], _ row: (SQLiteStatement) throws -> Row
    ) throws -> [Row] {
        try cachedStatement(sql).query(values, row)
    }

    package func scalarInt(_ sql: String, _ values: [SQLiteValue] = []) throws -> Int64? {
        try query(sql, values) { $0.optionalInt64(at: 0) }.first ?? nil
    }

    package func scalarText(_ sql: String, _ values: [SQLiteValue] = []) throws -> String? {
        try query(sql, values) { $0.optionalText(at: 0) }.first ?? nil
    }

    /// The number of rows changed by the last INSERT, UPDATE or DELETE.
    package var changes: Int { Int(sqlite3_changes64(handle)) }

    package var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Whether a transaction is open on this connection.
    package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    // MARK: Transactions

    /// Runs `body` in a transaction, `BEGIN IMMEDIATE` by default so that the write lock is taken (or the busy timeout
    /// runs out) before any work is done. Commits when `body` returns, rolls back when it throws. Nested calls become
    /// savepoints.
    package func transaction<T>(immediate: Bool = true, _ body: () throws -> T) throws -> T {
        if transactionDepth > 0 {
            return try savepoint(body)
        }
        // Prepared once: a writer runs thousands of these a second.
        try cachedStatement(immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED").execute()
        transactionDepth += 1
        defer { transactionDepth -= 1 }
        let value: T
        do {
            value = try body()
            try cachedStatement("COMMIT").execute()
        } catch {
            if isInTransaction { try? cachedStatement("ROLLBACK").execute() }
            throw error
        }
        return value
    }

    /// Runs `body` in a savepoint: its changes are undone if it throws, without ending the enclosing transaction.
    package func savepoint<T>(_ body: () throws -> T) throws -> T {
        let name = "progression_\(transactionDepth)"
        try execute("SAVEPOINT \(name)")
        transactionDepth += 1
        defer { transactionDepth -= 1 }
        do {
            let value = try body()
            try execute("RELEASE \(name)")
            return value
        } catch {
            try? execute("ROLLBACK TO \(name)")
            try? execute("RELEASE \(name)")
            throw error
        }
    }

    func error(code: Int32, sql: String?) -> SQLiteError {
        let message = String(cString: sqlite3_errmsg(handle))
        let extended = sqlite3_extended_errcode(handle)
        // sqlite3_errmsg describes the latest failure; prefer its extended code when it refines `code`.
        let effective = (extended & 0xFF) == (code & 0xFF) ? extended : code
        return SQLiteError(code: effective, message: message, sql: sql, path: path)
    }
}

@available(*, unavailable)
extension SQLiteConnection: Sendable {}
