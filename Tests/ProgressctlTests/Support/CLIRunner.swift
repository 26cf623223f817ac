import Foundation
import Synchronization
import Progression
import Testing

/// What one run of the built `progressctl` binary did.
struct CLIResult: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String

    /// stderr's lines, without empty ones.
    var errorLines: [String] { stderr.split(separator: "\n").map(String.init) }
}

/// Runs the built `progressctl` binary as a child process.
enum CLI {
    /// The binary next to the test bundle (`.build/<triple>/debug/progressctl`), or `$PROGRESSCTL_BINARY`.
    static let binary: URL? = {
        if let path = ProcessInfo.processInfo.environment["PROGRESSCTL_BINARY"] {
            return URL(fileURLWithPath: path)
        }
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent(),
        ]
        for directory in candidates {
            let url = directory.appendingPathComponent("progressctl")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return nil
    }()

    static func requireBinary() throws -> URL {
        try #require(
            binary,
            "progressctl binary not found next to the test bundle (\(CommandLine.arguments[0])); run `swift build` or set PROGRESSCTL_BINARY")
    }

    /// Starts the binary with `arguments`; stdout and stderr go to files in `directory`, stdin reads `input` (or
    /// nothing).
    static func start(
        _ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:],
        input: Data? = nil
    ) throws -> RunningCLI {
        let process = Process()
        process.executableURL = try requireBinary()
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["PROGRESSION_DB"] = nil
        env["TERM"] = "dumb"
        env.merge(environment) { _, new in new }
        process.environment = env
        let name = UUID().uuidString
        let out = directory.file("\(name).out")
        let err = directory.file("\(name).err")
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        if let input {
            let path = directory.file("\(name).in")
            _ = FileManager.default.createFile(atPath: path, contents: input)
            process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        let exit = ExitWaiter()
        process.terminationHandler = { exit.finish($0.terminationStatus) }
        try process.run()
        return RunningCLI(process: process, stdoutPath: out, stderrPath: err, exit: exit)
    }

    /// Runs the binary to its end (at most `timeout`).
    static func run(
        _ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:],
        input: Data? = nil, timeout: Duration = .seconds(20)
    ) async throws -> CLIResult {
        try await start(arguments, in: directory, environment: environment, input: input).result(timeout: timeout)
    }
}

/// A child process in progress.
///
/// `@unchecked Sendable`: `Process` is not `Sendable`, but after `run()` this value only reads the process's
/// immutable arguments and calls `terminate()`, which sends a signal to a pid and is safe from any thread; the exit
/// status crosses threads through `ExitWaiter`, which synchronises it with a mutex.
struct RunningCLI: @unchecked Sendable {
    let process: Process
    let stdoutPath: String
    let stderrPath: String
    let exit: ExitWaiter

    var stdoutSoFar: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }

    /// Waits for the process to end; kills it and fails after `timeout`.
    func result(timeout: Duration = .seconds(20)) async throws -> CLIResult {
        let status = await exit.wait(timeout: timeout)
        guard let status else {
            process.terminate()
            Issue.record("progressctl \(process.arguments ?? []) did not end within \(timeout)")
            throw CancellationError()
        }
        return CLIResult(
            status: status, stdout: stdoutSoFar,
            stderr: (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "")
    }
}

/// Delivers a process's exit status to async waiters without blocking a thread.
final class ExitWaiter: Sendable {
    private let state = Mutex<Int32?>(nil)

    func finish(_ status: Int32) {
        state.withLock { $0 = status }
    }

    /// The exit status, or `nil` when the process still runs after `timeout`.
    func wait(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = state.withLock({ $0 }) { return status }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return state.withLock { $0 }
    }
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
func eventually(timeout: Duration = .seconds(10), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}
