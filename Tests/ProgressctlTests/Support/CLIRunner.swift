import Foundation
import ProgressionTestSupport
import Testing

/// Runs the built `progressctl` binary as a child process: with `PROGRESSION_DB` unset and `TERM=dumb`, its output in
/// files of the test's directory.
enum CLI {
    /// The binary next to the test bundle (`.build/<triple>/debug/progressctl`), or `$PROGRESSCTL_BINARY`.
    static let binary: URL? = {
        if let path = ProcessInfo.processInfo.environment["PROGRESSCTL_BINARY"] {
            return URL(fileURLWithPath: path)
        }
        return try? ChildProcess.binary("progressctl")
    }()

    static func requireBinary() throws -> URL {
        try #require(
            binary,
            "progressctl binary not found next to the test bundle (\(CommandLine.arguments[0])); run `swift build` or set PROGRESSCTL_BINARY")
    }

    /// The environment changes of every run: no database from this process's environment, no terminal.
    static let environment: [String: String?] = ["PROGRESSION_DB": nil, "TERM": "dumb"]

    /// Starts the binary with `arguments`; stdout and stderr go to files in `directory`, stdin reads `input` (or
    /// nothing).
    static func start(
        _ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:],
        input: Data? = nil
    ) throws -> ChildProcess {
        try ChildProcess(
            try requireBinary(), arguments, output: .files(in: directory.path),
            environment: Self.environment.merging(environment.mapValues { $0 }) { _, new in new },
            input: input.map { .data($0) } ?? .nothing)
    }

    /// Runs the binary to its end (at most `timeout`). The default is generous: one run takes well under a second,
    /// but under a loaded `swift test --parallel` (PostgreSQL servers starting beside it) one `stats` once took over
    /// 20 s; a hang still fails.
    static func run(
        _ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:],
        input: Data? = nil, timeout: Duration = .seconds(60)
    ) async throws -> ChildProcess.Outcome {
        try await start(arguments, in: directory, environment: environment, input: input).outcome(timeout: timeout)
    }
}
