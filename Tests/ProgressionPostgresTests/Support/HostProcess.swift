#if PostgreSQL
import Foundation
import Synchronization

/// A built executable of the package (`progression-demo`, `progressctl`) running as a child process that plays one
/// "host" (its `$PROGRESSION_HOST`), its output going to files that tests read while it runs.
final class HostProcess: Sendable {
    private let process: Process
    private let status = ExitStatus()

    /// The exit status once known, and who waits for it.
    final class ExitStatus: Sendable {
        let state = Mutex<(code: Int32?, waiters: [CheckedContinuation<Int32, Never>])>((nil, []))

        func withLock<T>(_ body: (inout (code: Int32?, waiters: [CheckedContinuation<Int32, Never>])) -> T) -> T {
            state.withLock { body(&$0) }
        }
    }
    let outputPath: String

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
        throw HostTestFailure("no \(name) binary next to \(CommandLine.arguments[0])")
    }

    /// Starts `name arguments…` as host `host`, its stdout and stderr in one file of `directory`.
    init(_ name: String, _ arguments: [String], host: String, in directory: URL) throws {
        process = Process()
        process.executableURL = try Self.binary(name)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        var environment = ProcessInfo.processInfo.environment
        environment["PROGRESSION_HOST"] = host
        environment["PROGRESSION_DB"] = nil
        process.environment = environment
        outputPath = directory.appendingPathComponent("\(name)-\(host)-\(UUID().uuidString.prefix(6)).log").path
        FileManager.default.createFile(atPath: outputPath, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        process.terminationHandler = { [status] process in
            let waiters = status.withLock { state in
                state.code = process.terminationStatus
                defer { state.waiters.removeAll() }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: process.terminationStatus) }
        }
        try process.run()
    }

    /// Runs `name arguments…` as host `host` to its end (at most `timeout`); returns its status and output.
    static func run(
        _ name: String, _ arguments: [String], host: String, in directory: URL, timeout: Duration = .seconds(60)
    ) async throws -> (status: Int32, output: String) {
        let child = try HostProcess(name, arguments, host: host, in: directory)
        guard let code = await child.waitForExit(timeout: timeout) else {
            child.signal(SIGKILL)
            throw HostTestFailure("\(name) \(arguments.joined(separator: " ")) did not end within \(timeout)")
        }
        return (code, child.output)
    }

    var pid: Int32 { process.processIdentifier }

    /// What it printed so far.
    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Its exit status, or `nil` when it still runs after `timeout`.
    func waitForExit(timeout: Duration) async -> Int32? {
        await withTaskGroup(of: Int32?.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let code = self.status.withLock { state -> Int32? in
                        if state.code == nil { state.waiters.append(continuation) }
                        return state.code
                    }
                    if let code { continuation.resume(returning: code) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            if first == nil {
                // Wake the waiter so the group can end; the process may still run.
                let waiters = status.withLock { state in
                    defer { state.waiters.removeAll() }
                    return state.waiters
                }
                for waiter in waiters { waiter.resume(returning: -1) }
            }
            group.cancelAll()
            return first
        }
    }

    /// Stops it for good (SIGCONT first, in case it was stopped) and waits for it.
    func terminate() async {
        guard status.withLock({ $0.code }) == nil else { return }
        signal(SIGCONT)
        signal(SIGKILL)
        _ = await waitForExit(timeout: .seconds(10))
    }
}

/// A test's failure with a message.
struct HostTestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` every 50 ms until it holds; fails after `timeout`.
func poll(
    _ what: String, timeout: Duration = .seconds(60), _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return }
        guard ContinuousClock.now < deadline else { throw HostTestFailure("timed out waiting for \(what)") }
        try await Task.sleep(for: .milliseconds(50))
    }
}

/// A temporary directory, deleted by `cleanUp()`.
struct ScratchDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("progression-pg-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func cleanUp() { try? FileManager.default.removeItem(at: url) }
}
#endif
