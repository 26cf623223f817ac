#if PostgreSQL
import Foundation
import ProgressionTestSupport

/// A built executable of the package (`progression-demo`, `progressctl`) playing one "host" (its `$PROGRESSION_HOST`),
/// its stdout and stderr going to one file that tests read while it runs.
extension ChildProcess {
    /// Starts `name arguments…` as host `host` in `directory`, its stdout and stderr in one file there.
    convenience init(_ name: String, _ arguments: [String], host: String, in directory: TemporaryDirectory) throws {
        try self.init(
            Self.binary(name), arguments, output: .combined(in: directory.path), workingDirectory: directory.path,
            environment: ["PROGRESSION_HOST": host, "PROGRESSION_DB": nil])
    }

    /// Runs `name arguments…` as host `host` to its end (at most `timeout`); returns its status and output.
    static func run(
        _ name: String, _ arguments: [String], host: String, in directory: TemporaryDirectory,
        timeout: Duration = .seconds(60)
    ) async throws -> (status: Int32, output: String) {
        let outcome = try await ChildProcess(name, arguments, host: host, in: directory).outcome(timeout: timeout)
        return (outcome.status, outcome.stdout)
    }

    /// What it printed so far, on stdout and stderr.
    var output: String { stdout }

    /// Stops it for good (SIGCONT first, in case it was stopped) and waits (at most 10 s) for it.
    func terminate() async {
        guard isRunning else { return }
        signal(SIGCONT)
        signal(SIGKILL)
        _ = try? await waitForExit(timeout: .seconds(120))
    }
}
#endif
