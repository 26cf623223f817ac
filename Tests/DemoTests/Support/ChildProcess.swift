import Foundation
import Synchronization

/// A built executable of the package (`progression-demo`, `progressctl`) running as a child process, its stdout and
/// stderr going to files that tests read while it runs.
final class ChildProcess: Sendable {
    private let process: Process
    private let exitState = ExitState()

    /// The exit status once known, and who waits for it.
    final class ExitState: Sendable {
        let state = Mutex<(status: Int32?, waiters: [CheckedContinuation<Int32, Never>])>((nil, []))
    }
    let stdoutPath: String
    let stderrPath: String

    /// A binary next to the test bundle.
    static func binary(_ name: String) throws -> URL {
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

    /// Starts `name arguments…` in `directory`, writing its output to files there.
    init(_ name: String, _ arguments: [String], in directory: URL, environment: [String: String] = [:]) throws {
        process = Process()
        process.executableURL = try Self.binary(name)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        process.environment = env
        let tag = "\(name)-\(UUID().uuidString.prefix(8))"
        stdoutPath = directory.appendingPathComponent("\(tag).out").path
        stderrPath = directory.appendingPathComponent("\(tag).err").path
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        process.standardInput = FileHandle.nullDevice
        process.terminationHandler = { [exitState] process in
            let waiters = exitState.state.withLock { state in
                state.status = process.terminationStatus
                defer { state.waiters.removeAll() }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: process.terminationStatus) }
        }
        try process.run()
    }

    /// Runs `name arguments…` to its end.
    static func run(
        _ name: String, _ arguments: [String], in directory: URL, timeout: Duration = .seconds(60)
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let child = try ChildProcess(name, arguments, in: directory)
        let status = await child.waitForExit(timeout: timeout)
        return (status, child.stdout, child.stderr)
    }

    var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    func kill(_ signal: Int32) {
        Foundation.kill(process.processIdentifier, signal)
    }

    /// Waits for the process to exit and returns its status (the signal's number for a killed process); terminates
    /// it after `timeout`.
    @discardableResult
    func waitForExit(timeout: Duration = .seconds(60)) async -> Int32 {
        let timer = Task { [process] in
            try await Task.sleep(for: timeout)
            process.terminate()
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let status = exitState.state.withLock { state in
                if state.status == nil { state.waiters.append(continuation) }
                return state.status
            }
            if let status { continuation.resume(returning: status) }
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` every 20 ms until it holds; throws after `timeout`.
func poll(
    _ what: String, timeout: Duration = .seconds(30), _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TestFailure("timed out waiting for \(what)") }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// A fresh temporary directory, removed by `cleanUp()`.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("demo-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func cleanUp() {
        try? FileManager.default.removeItem(at: url)
    }
}
