import Foundation
import Synchronization

/// A program running as a child process of a test: one of the package's built executables (`progressctl`,
/// `progression-demo`, `progression-bench`, found next to the test bundle by ``binary(_:)``) or a program of the
/// system. Its stdout and stderr go to files that the test reads while it runs; every wait for its end has a deadline.
///
/// ```swift
/// let directory = try TemporaryDirectory()
/// let service = try ChildProcess("progression-demo", ["serve", "--db", directory.file("db.sqlite")], in: directory)
/// try await poll("the service to start") { service.stderr.contains("serving checksum jobs") }
/// service.signal(SIGTERM)
/// #expect(try await service.waitForExit(timeout: .seconds(20)) == 0)
/// ```
public final class ChildProcess: Sendable {
    /// Where the child's stdout and stderr go.
    public enum Output {
        /// Two new files in the directory at this path, read by ``stdout`` and ``stderr``.
        case files(in: String)
        /// One new file in the directory at this path for both, read by ``stdout`` (``stderr`` is empty).
        case combined(in: String)
        /// These handles (a pipe's end, a terminal); nothing is kept. The caller keeps and closes them.
        case handles(stdout: FileHandle, stderr: FileHandle)
        /// `/dev/null` for both.
        case discarded
    }

    /// What the child reads on stdin.
    public enum Input {
        /// Nothing: `/dev/null`.
        case nothing
        /// These bytes, from a file written next to the output files (or in the system's temporary directory).
        case data(Data)
        /// This handle (a pipe's end, a terminal). The caller keeps and closes it.
        case handle(FileHandle)
    }

    /// How a child process ended.
    public enum Ending: Equatable, Sendable {
        /// It exited with this status.
        case exited(Int32)
        /// The signal with this number killed it.
        case killed(Int32)

        /// The exit status, or the signal's number for a killed process (as `Process.terminationStatus`).
        public var status: Int32 {
            switch self {
            case .exited(let status), .killed(let status): status
            }
        }
    }

    /// What a child process did: how it ended and what it wrote.
    public struct Outcome: Sendable {
        /// The exit status, or the signal's number for a killed process.
        public var status: Int32
        /// What it wrote to stdout (with ``Output/combined(in:)``, to stdout and stderr).
        public var stdout: String
        /// What it wrote to stderr.
        public var stderr: String

        /// An outcome with these values.
        public init(status: Int32, stdout: String, stderr: String) {
            self.status = status
            self.stdout = stdout
            self.stderr = stderr
        }

        /// stderr's lines, without empty ones.
        public var errorLines: [String] { stderr.split(separator: "\n").map(String.init) }
    }

    /// The ending once known, and who waits for it.
    private final class ExitState: Sendable {
        let state = Mutex<(ending: Ending?, waiters: [CheckedContinuation<Ending, Never>])>((nil, []))

        func finish(_ ending: Ending) {
            let waiters = state.withLock { state in
                state.ending = ending
                defer { state.waiters.removeAll() }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: ending) }
        }

        func wait() async -> Ending {
            await withCheckedContinuation { continuation in
                let ending = state.withLock { state in
                    if state.ending == nil { state.waiters.append(continuation) }
                    return state.ending
                }
                if let ending { continuation.resume(returning: ending) }
            }
        }
    }

    private let process: Process
    private let exit = ExitState()
    /// The command, for messages: the executable's name and the arguments.
    private let command: String

    /// A child still running when its test lets go of it is killed: a test that fails while its workers run (a
    /// timed-out wait throws past their stop) would otherwise leave them running after the test run, taking the
    /// machine's cores from the tests after it (CI had three fleet workers running 40 minutes after their test).
    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// The file that receives stdout (both streams with ``Output/combined(in:)``), or `nil` when none does.
    public let stdoutPath: String?
    /// The file that receives stderr, or `nil` when none does.
    public let stderrPath: String?

    /// A pipe whose ends no child inherits (`O_CLOEXEC`): only a child given an end as its stdin, stdout or stderr
    /// has it. A child that another test spawns meanwhile would otherwise hold a copy of each end for as long as it
    /// lives, so that closing this process's writing end would not end its reader's input, nor closing the reading
    /// end break its writer's pipe. (`Foundation.Pipe` makes inheritable ends.)
    ///
    /// - Throws: ``TestFailure`` when the system refuses (no descriptors left).
    public static func pipe() throws -> (reading: FileHandle, writing: FileHandle) {
        var ends: [Int32] = [-1, -1]
        guard pipe2(&ends, O_CLOEXEC) == 0 else { throw TestFailure("pipe2: \(String(cString: strerror(errno)))") }
        return (FileHandle(fileDescriptor: ends[0], closeOnDealloc: true),
                FileHandle(fileDescriptor: ends[1], closeOnDealloc: true))
    }

    /// A built executable of the package: the file `name` next to the test bundle (`.build/<triple>/debug/name`).
    ///
    /// - Throws: ``TestFailure`` when there is none (the test target does not depend on the executable's target).
    public static func binary(_ name: String) throws -> URL {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent(),
        ]
        for directory in candidates {
            let url = directory.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw TestFailure("no \(name) binary next to \(CommandLine.arguments[0])")
    }

    /// Starts `executable arguments…`.
    ///
    /// - Parameters:
    ///   - executable: The program, e.g. ``binary(_:)``'s URL or `/usr/bin/env`.
    ///   - arguments: Its arguments.
    ///   - output: Where its stdout and stderr go.
    ///   - workingDirectory: Its working directory; `nil` for this process's.
    ///   - environment: Changes to this process's environment: a value to set, `nil` to remove a variable.
    ///   - input: What it reads on stdin.
    /// - Throws: The file system's error for the output files, or `Process`'s when the program cannot start.
    public init(
        _ executable: URL, _ arguments: [String], output: Output, workingDirectory: String? = nil,
        environment: [String: String?] = [:], input: Input = .nothing
    ) throws {
        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let workingDirectory { process.currentDirectoryURL = URL(fileURLWithPath: workingDirectory) }
        var variables = ProcessInfo.processInfo.environment
        for (name, value) in environment { variables[name] = value }
        process.environment = variables
        command = ([executable.lastPathComponent] + arguments).joined(separator: " ")

        let tag = "\(executable.lastPathComponent)-\(UUID().uuidString.prefix(8))"
        var opened: [FileHandle] = []
        defer { for handle in opened { try? handle.close() } }
        func create(_ path: String, contents: Data? = nil) throws -> String {
            guard FileManager.default.createFile(atPath: path, contents: contents) else {
                throw TestFailure("cannot create \(path)")
            }
            return path
        }
        func writing(_ path: String) throws -> FileHandle {
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            opened.append(handle)
            return handle
        }
        var inputDirectory: String?
        switch output {
        case .files(let directory):
            let out = try create(directory + "/\(tag).out")
            let err = try create(directory + "/\(tag).err")
            process.standardOutput = try writing(out)
            process.standardError = try writing(err)
            stdoutPath = out
            stderrPath = err
            inputDirectory = directory
        case .combined(let directory):
            let log = try create(directory + "/\(tag).log")
            let handle = try writing(log)
            process.standardOutput = handle
            process.standardError = handle
            stdoutPath = log
            stderrPath = nil
            inputDirectory = directory
        case .handles(let stdout, let stderr):
            process.standardOutput = stdout
            process.standardError = stderr
            stdoutPath = nil
            stderrPath = nil
        case .discarded:
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            stdoutPath = nil
            stderrPath = nil
        }
        var temporaryInput: String?
        defer { if let temporaryInput { try? FileManager.default.removeItem(atPath: temporaryInput) } }
        switch input {
        case .nothing:
            process.standardInput = FileHandle.nullDevice
        case .data(let data):
            let path: String
            if let inputDirectory {
                path = try create(inputDirectory + "/\(tag).in", contents: data)
            } else {
                path = try create(FileManager.default.temporaryDirectory.path + "/\(tag).in", contents: data)
                temporaryInput = path
            }
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            opened.append(handle)
            process.standardInput = handle
        case .handle(let handle):
            process.standardInput = handle
        }
        process.terminationHandler = { [exit] process in
            exit.finish(
                process.terminationReason == .uncaughtSignal
                    ? .killed(process.terminationStatus) : .exited(process.terminationStatus))
        }
        try process.run()
    }

    /// Starts the package's executable `name` (see ``binary(_:)``) with `arguments` in `directory`, its stdout and
    /// stderr going to files there.
    ///
    /// - Parameters:
    ///   - name: The executable's name, e.g. `progression-demo`.
    ///   - arguments: Its arguments.
    ///   - directory: Its working directory, which also receives its output files.
    ///   - environment: Changes to this process's environment: a value to set, `nil` to remove a variable.
    /// - Throws: ``TestFailure`` when the binary is missing, or the error of starting it.
    public convenience init(
        _ name: String, _ arguments: [String], in directory: TemporaryDirectory,
        environment: [String: String?] = [:]
    ) throws {
        try self.init(
            Self.binary(name), arguments, output: .files(in: directory.path), workingDirectory: directory.path,
            environment: environment)
    }

    /// Runs the package's executable `name` with `arguments` in `directory` to its end.
    ///
    /// ```swift
    /// let result = try await ChildProcess.run("progressctl", ["--db", db, "list"], in: directory)
    /// #expect(result.status == 0, "\(result.stderr)")
    /// ```
    ///
    /// - Parameters:
    ///   - name: The executable's name, e.g. `progression-demo`.
    ///   - arguments: Its arguments.
    ///   - directory: Its working directory, which also receives its output files.
    ///   - environment: Changes to this process's environment: a value to set, `nil` to remove a variable.
    ///   - timeout: How long it may run; then it is killed.
    /// - Throws: ``TestFailure`` when the binary is missing or the process did not end within `timeout`.
    public static func run(
        _ name: String, _ arguments: [String], in directory: TemporaryDirectory,
        environment: [String: String?] = [:], timeout: Duration = .seconds(60)
    ) async throws -> Outcome {
        try await ChildProcess(name, arguments, in: directory, environment: environment).outcome(timeout: timeout)
    }

    /// The process's id.
    public var pid: Int32 { process.processIdentifier }

    /// How it ended, or `nil` while it runs.
    public var ending: Ending? { exit.state.withLock { $0.ending } }

    /// Whether it still runs (its end has not been seen yet).
    public var isRunning: Bool { ending == nil }

    /// What it wrote to stdout so far (with ``Output/combined(in:)``, to stdout and stderr); empty without a file.
    public var stdout: String { stdoutPath.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? "" }

    /// What it wrote to stderr so far; empty without a file.
    public var stderr: String { stderrPath.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? "" }

    /// Sends `signal` to the process.
    public func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the process to end and returns how.
    ///
    /// - Parameter timeout: How long to wait; then the process is killed with `SIGKILL`.
    /// - Throws: ``TestFailure`` when it did not end within `timeout`.
    public func waitForEnd(timeout: Duration) async throws -> Ending {
        do {
            return try await within(timeout, "\(command) to end") { [exit] in await exit.wait() }
        } catch {
            signal(SIGKILL)
            throw error
        }
    }

    /// Waits for the process to end and returns its exit status (the signal's number for a killed process).
    ///
    /// - Parameter timeout: How long to wait; then the process is killed with `SIGKILL`.
    /// - Throws: ``TestFailure`` when it did not end within `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration) async throws -> Int32 {
        try await waitForEnd(timeout: timeout).status
    }

    /// Waits for the process to end and returns its status and output.
    ///
    /// - Parameter timeout: How long to wait; then the process is killed with `SIGKILL`.
    /// - Throws: ``TestFailure`` when it did not end within `timeout`.
    public func outcome(timeout: Duration) async throws -> Outcome {
        let status = try await waitForExit(timeout: timeout)
        return Outcome(status: status, stdout: stdout, stderr: stderr)
    }
}

/// `pipe2(2)`, which Glibc's Swift module leaves out (it is declared only for `_GNU_SOURCE`): looked up by name in the
/// C library this process has loaded.
private let pipe2 = unsafeBitCast(
    dlsym(dlopen(nil, RTLD_NOW), "pipe2"), to: (@convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32).self)
