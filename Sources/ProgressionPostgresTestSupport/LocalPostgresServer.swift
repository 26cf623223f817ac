#if PostgreSQL
import Foundation
import Progression
import ProgressionPostgres

#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL server on this machine, for the tests, the crash and chaos tests and the bench: `initdb` makes
/// a cluster in a temporary directory, `pg_ctl` starts it listening on a Unix socket in that directory (and on TCP
/// only at the addresses given), and a watchdog process stops it and deletes the directory once the process that
/// started it is gone, however that process ends. When the process runs as root, the server runs as the `postgres`
/// user (`runuser`), as PostgreSQL refuses to run as root. It is not part of the `ProgressionPostgres` product.
///
/// What the resilience tests do to it: ``restart(_:)`` (`pg_ctl restart -m fast|immediate`), ``stop(_:)`` and
/// ``start()`` around an outage, ``terminateBackends(applicationName:)`` (`pg_terminate_backend`).
///
/// The server's binaries are found with `pg_config --bindir`, else in `/usr/lib/postgresql/*/bin`. A machine without
/// them gets an error that says what to install, never a skipped test.
package final class LocalPostgresServer: Sendable {
    /// The temporary directory: the cluster in `data/`, the socket, the log.
    package let directory: String
    /// The superuser the clients log in as (trusted on the socket).
    package let username = "progression"
    /// The database created for the clients.
    package let database = "progression"
    /// The socket's port number (its file name): the TCP port when the server listens on TCP.
    package let port: Int
    /// The TCP port when the server listens on TCP addresses.
    package let tcpPort: Int
    /// The addresses it listens on over TCP (none: the socket only).
    package let tcpAddresses: [String]
    /// The server's settings, as given to `postgres -c` (for the output of tools that measure).
    package let settings: [String]
    private let bin: String
    private let runAs: [String]

    /// The socket file.
    package var socketPath: String { directory + "/.s.PGSQL.\(port)" }

    /// The URL of a schema of the server's database.
    package func url(schema: String = "progression") -> String {
        "postgres://\(username)@/\(database)?host=\(directory)&schema=\(schema)"
    }

    /// A store configuration for a schema of the server's database.
    package func configuration(schema: String) -> PostgresTaskStore.Configuration {
        var configuration = PostgresTaskStore.Configuration(
            unixSocketPath: socketPath, username: username, database: database)
        configuration.schema = schema
        // Generous: a test whose subject is not a deadline must not fail because a shared machine stalled (12 s
        // without a line of output in a parallel run here, when every call of the default 10 s failed). Tests of
        // deadlines set their own.
        configuration.callTimeout = .seconds(60)
        return configuration
    }

    /// The server of this process, started by the first caller: one per process, shared by its tests (each test uses a
    /// schema of its own).
    package static func shared() throws -> LocalPostgresServer {
        try sharedServer.get()
    }

    private static let sharedServer = Result { try LocalPostgresServer(durable: false) }

    /// A URL over TCP to `address` (one of ``tcpAddresses``).
    package func tcpURL(address: String, schema: String = "progression") -> String {
        "postgres://\(username)@\(address):\(tcpPort)/\(database)?schema=\(schema)&sslmode=disable"
    }

    /// How a server is stopped (`pg_ctl -m`).
    package enum StopMode: String, Sendable, CaseIterable {
        /// Clients are disconnected, transactions rolled back, a checkpoint is written.
        case fast
        /// Every server process is killed at once: a crash, recovered from the log on the next start.
        case immediate
    }

    /// Starts a server.
    ///
    /// - Parameters:
    ///   - durable: `true` keeps PostgreSQL's durability settings (`fsync=on`, `synchronous_commit=on`), as a
    ///     benchmark needs; `false` turns fsync off, for tests that kill processes (the server's included) but never
    ///     the machine.
    ///   - stock: with `durable`, only what a throwaway server needs is set (its socket, its port, no logging
    ///     collector): PostgreSQL's defaults otherwise, as `initdb` writes them (what a benchmark compares against).
    ///   - tcpAddresses: addresses to listen on over TCP too (`tcpPort`), trusted from any client (for tests only).
    ///   - tcpPort: the TCP port.
    /// - Throws: ``LocalPostgresServer/Failure`` saying what is missing or what failed, with the server's log.
    package init(durable: Bool, stock: Bool = false, tcpAddresses: [String] = [], tcpPort: Int = 55432) throws {
        self.tcpAddresses = tcpAddresses
        self.tcpPort = tcpPort
        port = tcpAddresses.isEmpty ? 5432 : tcpPort
        bin = try Self.binaries()
        var template = Array((NSTemporaryDirectory() + "progression-pg-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw Failure("cannot create a temporary directory: \(String(cString: strerror(errno)))")
        }
        directory = String(cString: made)
        if geteuid() == 0 {
            guard let account = getpwnam("postgres") else {
                throw Failure(
                    "the tests run as root and PostgreSQL refuses to: a 'postgres' user is needed to run the server "
                        + "(Debian: apt-get install postgresql creates it)")
            }
            guard chown(directory, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else {
                throw Failure("cannot give '\(directory)' to the postgres user: \(String(cString: strerror(errno)))")
            }
            runAs = ["/usr/sbin/runuser", "-u", "postgres", "--"]
        } else {
            runAs = []
        }
        // The socket's port and the TCP port are one setting: the socket file is named after the TCP port when there is
        // one.
        let listening = tcpAddresses.isEmpty ? "listen_addresses=''" : "listen_addresses='\(tcpAddresses.joined(separator: ","))'"
        var settings = [
            listening, "unix_socket_directories='\(directory)'", "port=\(port)",
            "logging_collector=off",
        ]
        if !(durable && stock) {
            settings += ["max_connections=1000", "shared_buffers=256MB", "max_wal_size=4GB"]
        }
        // Not durable: a crash of the machine may lose commits (no fsync), a crash of the server may not: a commit
        // waits for its log record to be written to the OS (synchronous_commit), which keeps it through
        // `pg_ctl stop -m immediate` and a killed postmaster.
        settings += durable ? ["synchronous_commit=on", "fsync=on"] : ["fsync=off", "synchronous_commit=on", "full_page_writes=off"]
        self.settings = settings
        chmod(directory, 0o700)
        let data = directory + "/data"
        try run(
            bin + "/initdb",
            ["-D", data, "-U", username, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-instructions"]
                + (durable ? [] : ["--no-sync"]))
        if !tcpAddresses.isEmpty {
            // Any TCP client is trusted: a throwaway server of a test, on addresses the test chose.
            let hba = "host all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n"
            guard let handle = FileHandle(forWritingAtPath: data + "/pg_hba.conf") else {
                throw Failure("cannot open \(data)/pg_hba.conf")
            }
            handle.seekToEndOfFile()
            handle.write(Data(hba.utf8))
            try? handle.close()
        }
        try run(
            bin + "/pg_ctl",
            ["-D", data, "-l", directory + "/server.log", "-w", "-t", "60", "-o", settings.map { "-c " + $0 }.joined(separator: " "), "start"])
        startWatchdog()
        try run(bin + "/createdb", ["-h", directory, "-p", "\(port)", "-U", username, database])
    }

    /// Restarts the server (`pg_ctl restart`, same settings) and waits until it accepts connections again.
    package func restart(_ mode: StopMode) throws {
        try run(
            bin + "/pg_ctl", ["-D", directory + "/data", "-l", directory + "/server.log", "-m", mode.rawValue, "-w", "-t", "60", "restart"])
    }

    /// Stops the server (`pg_ctl stop`); ``start()`` starts it again.
    package func stop(_ mode: StopMode) throws {
        try run(bin + "/pg_ctl", ["-D", directory + "/data", "-m", mode.rawValue, "-w", "-t", "60", "stop"])
    }

    /// Starts the server stopped by ``stop(_:)``, with its settings, and waits until it accepts connections.
    package func start() throws {
        try run(
            bin + "/pg_ctl",
            ["-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "60", "-o", settings.map { "-c " + $0 }.joined(separator: " "), "start"])
    }

    /// Terminates the server processes of the clients that gave this `application_name` (a store's
    /// ``PostgresTaskStore/Configuration/applicationName``): `pg_terminate_backend`, as an operator or a proxy would
    /// cut them. Returns how many were terminated.
    @discardableResult
    package func terminateBackends(applicationName: String = "progression", fraction: Double = 1) throws -> Int {
        let output = try sql(
            """
            SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE application_name = '\(applicationName)' AND pid <> pg_backend_pid() AND random() < \(fraction)
            """)
        return Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// Runs one SQL statement with psql on the socket and returns its unaligned output.
    package func sql(_ statement: String) throws -> String {
        try run(
            bin + "/psql",
            ["-h", directory, "-p", "\(port)", "-U", username, "-d", database, "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-c", statement])
    }

    /// Stops the server now (the watchdog would when this process ends) and deletes its directory.
    package func stop() {
        _ = try? run(bin + "/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The server's log, for failure messages.
    package var log: String {
        (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? ""
    }

    /// A failure to start the server.
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }

    /// The folder of `initdb` and `pg_ctl`.
    private static func binaries() throws -> String {
        var candidates: [String] = []
        if let output = try? capture("/bin/sh", ["-c", "pg_config --bindir 2>/dev/null"]) {
            candidates.append(output.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        candidates += versions.sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }.map { "/usr/lib/postgresql/\($0)/bin" }
        for candidate in candidates where !candidate.isEmpty {
            if FileManager.default.isExecutableFile(atPath: candidate + "/initdb"),
                FileManager.default.isExecutableFile(atPath: candidate + "/pg_ctl")
            {
                return candidate
            }
        }
        throw Failure(
            "the PostgreSQL tests need a PostgreSQL server's programs (initdb, pg_ctl) and none was found "
                + "(looked in `pg_config --bindir` and /usr/lib/postgresql/*/bin): install them "
                + "(Debian: apt-get install postgresql; .ci/run does)")
    }

    /// Runs a server program (as the postgres user when this process is root) and waits for it; throws with its
    /// output on failure.
    @discardableResult
    private func run(_ program: String, _ arguments: [String]) throws -> String {
        let command = runAs + [program] + arguments
        // A file, not a pipe: the server that `pg_ctl start` leaves running would hold a pipe open.
        let outputPath = directory + "/command-\(UUID().uuidString).out"
        defer { unlink(outputPath) }
        let pid = try Self.spawn(command, output: outputPath)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // WIFEXITED and WEXITSTATUS, which Swift does not import.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw Failure("\(command.joined(separator: " ")) failed (wait status \(status)):\n\(text)\n\(log.suffix(4_000))")
        }
        return text
    }

    /// A detached shell that waits for this process to end, then stops the server and deletes its directory.
    private func startWatchdog() {
        let script = """
            while [ -d /proc/\(getpid()) ]; do sleep 1; done
            '\(bin)/pg_ctl' -D '\(directory)/data' -m immediate -w stop >/dev/null 2>&1
            rm -rf '\(directory)'
            """
        _ = try? Self.spawn(["/usr/bin/setsid"] + runAs + ["/bin/sh", "-c", script], output: "/dev/null")
    }

    /// Starts `command` with its output in the file at `output` (created or truncated) and no input. Spawned
    /// directly rather than through Foundation's `Process`, whose wait never ends when the program leaves a daemon
    /// behind (`pg_ctl start`).
    ///
    /// The child gets no other descriptor of this process: the watchdog lives as long as the test process, and the
    /// server as long as the tests, so a pipe's end they inherited from a test running beside (one that closes its
    /// writing end to tell its child to stop) would never close, and that child, and the test waiting for it, would
    /// wait for ever (seen: a prune test's reader, whose stdin's writing end the watchdog held).
    private static func spawn(_ command: [String], output: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o666)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        _ = CLibrary.addCloseFrom(&actions, 3)
        let arguments = command.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, command[0], &actions, nil, arguments, environ)
        guard result == 0 else {
            throw Failure("cannot run \(command[0]): \(String(cString: strerror(result)))")
        }
        return pid
    }

    private static func capture(_ program: String, _ arguments: [String]) throws -> String {
        // Through ``spawn(_:output:)`` (a file, no inherited descriptor), as ``run(_:_:)`` runs the server's programs.
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("progression-capture-\(UUID().uuidString).out").path
        defer { unlink(outputPath) }
        let pid = try spawn([program] + arguments, output: outputPath)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }
}

/// Calls of the C library that Glibc's Swift module leaves out (declared only for `_GNU_SOURCE`), looked up by name in
/// the C library this process has loaded (glibc 2.34 or later).
private enum CLibrary {
    static let addCloseFrom = function(
        "posix_spawn_file_actions_addclosefrom_np",
        as: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)

    private static func function<T>(_ name: String, as type: T.Type) -> T {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), name) else { fatalError("\(name) is not in the C library") }
        return unsafeBitCast(symbol, to: type)
    }
}

/// The server's slow calls (initdb, pg_ctl, psql: seconds on a loaded machine) for async callers, on a thread of
/// their own: a test process's cooperative pool has as many threads as the machine has cores (two here), and a call
/// that waits for a program on one of them holds up every other test running then (a starved test once waited over
/// 20 s for a poll, another 60 s for a one-second call).
extension LocalPostgresServer {
    /// Runs `body` on a thread of its own and waits for it without holding a thread of the cooperative pool.
    package static func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result(catching: body)) }.start()
        }
    }

    /// A new server (``init(durable:stock:tcpAddresses:tcpPort:)``), made off the cooperative pool.
    package static func make(
        durable: Bool, stock: Bool = false, tcpAddresses: [String] = [], tcpPort: Int = 55432
    ) async throws -> LocalPostgresServer {
        try await offThePool {
            try LocalPostgresServer(durable: durable, stock: stock, tcpAddresses: tcpAddresses, tcpPort: tcpPort)
        }
    }

    /// ``shared()``, started off the cooperative pool.
    package static func shared() async throws -> LocalPostgresServer {
        try await offThePool { try shared() }
    }

    /// ``restart(_:)``, off the cooperative pool.
    package func restart(_ mode: StopMode) async throws {
        try await Self.offThePool { try self.restart(mode) }
    }

    /// ``stop(_:)``, off the cooperative pool.
    package func stop(_ mode: StopMode) async throws {
        try await Self.offThePool { try self.stop(mode) }
    }

    /// ``start()``, off the cooperative pool.
    package func start() async throws {
        try await Self.offThePool { try self.start() }
    }

    /// ``terminateBackends(applicationName:fraction:)``, off the cooperative pool.
    @discardableResult
    package func terminateBackends(applicationName: String = "progression", fraction: Double = 1) async throws -> Int {
        try await Self.offThePool { try self.terminateBackends(applicationName: applicationName, fraction: fraction) }
    }

    /// ``stop()`` on a thread of its own, not waited for: for a test's `defer`, which cannot wait without holding a
    /// thread of the cooperative pool while `pg_ctl` runs (seconds on a loaded machine). A test process that ends first
    /// leaves the rest to the server's watchdog.
    package func discard() {
        Thread { self.stop() }.start()
    }

    /// ``sql(_:)``, off the cooperative pool.
    package func sql(_ statement: String) async throws -> String {
        try await Self.offThePool { try self.sql(statement) }
    }
}
#endif
