import Foundation
import Progression
import ProgressionTestSupport

/// The crash-test worker (`progression-bench crash-test worker`) running as a child process: the process recovery tests
/// kill. Its stdout is dropped; its stderr is this process's, in the test log.
struct WorkerProcess: Sendable {
    let process: ChildProcess

    /// Starts `progression-bench crash-test worker --db … --ledger … <arguments>`.
    init(db: String, ledger: String, _ arguments: [String]) throws {
        process = try ChildProcess(
            ChildProcess.binary("progression-bench"),
            ["crash-test", "worker", "--db", db, "--ledger", ledger] + arguments,
            output: .handles(stdout: .nullDevice, stderr: .standardError))
    }

    var pid: Int32 { process.pid }

    func kill(_ signal: Int32 = SIGKILL) {
        process.signal(signal)
    }

    /// Waits for the process to exit and returns its status (a signal's number for a killed process). After
    /// `timeout` the process is killed and the wait fails.
    @discardableResult
    func waitForExit(timeout: Duration = .seconds(60)) async throws -> Int32 {
        try await process.waitForExit(timeout: timeout)
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
