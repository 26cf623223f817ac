import Foundation
import Progression
import ProgressionTestSupport
import Synchronization
import Testing

/// The crash-test worker (`progression-crash-test worker`) running as a child process: the process recovery tests
/// kill.
final class WorkerProcess: Sendable {
    private let process: Process
    private let exitStatus = ExitStatus()

    /// The exit status once known, and who waits for it.
    final class ExitStatus: Sendable {
        let state = Mutex<(status: Int32?, waiters: [CheckedContinuation<Int32, Never>])>((nil, []))
    }

    /// The built binary, next to the test bundle.
    static func binary() throws -> URL {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent(),
        ]
        for directory in candidates {
            let url = directory.appendingPathComponent("progression-crash-test")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw TestFailure("no progression-crash-test binary next to \(CommandLine.arguments[0])")
    }

    /// Starts `progression-crash-test worker --db … --ledger … <arguments>`.
    init(db: String, ledger: String, _ arguments: [String]) throws {
        process = Process()
        process.executableURL = try Self.binary()
        process.arguments = ["worker", "--db", db, "--ledger", ledger] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        process.terminationHandler = { [exitStatus] process in
            let waiters = exitStatus.state.withLock { state in
                state.status = process.terminationStatus
                defer { state.waiters.removeAll() }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: process.terminationStatus) }
        }
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    func kill(_ signal: Int32 = SIGKILL) {
        Foundation.kill(process.processIdentifier, signal)
    }

    /// Waits for the process to exit and returns its status (a signal's number for a killed process). After
    /// `timeout` the process is killed and the wait fails.
    @discardableResult
    func waitForExit(timeout: Duration = .seconds(60)) async throws -> Int32 {
        do {
            return try await within(timeout, "worker \(pid) to exit") { [exitStatus] in
                await withCheckedContinuation { continuation in
                    let status = exitStatus.state.withLock { state in
                        if state.status == nil { state.waiters.append(continuation) }
                        return state.status
                    }
                    if let status { continuation.resume(returning: status) }
                }
            }
        } catch {
            kill(SIGKILL)
            throw error
        }
    }
}

/// Reads a worker's ledger file.
struct LedgerFile {
    let path: String

    var lines: [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func count(_ line: String) -> Int { lines.filter { $0 == line }.count }

    func contains(prefix: String) -> Bool { lines.contains { $0.hasPrefix(prefix) } }
}
