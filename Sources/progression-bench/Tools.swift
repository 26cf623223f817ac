import ProgressionChaosTest
import ProgressionConsoleBench
import ProgressionCrashTest
import ProgressionFaultTest
import ProgressionFleetTest

/// The test tools `progression-bench` runs when its first argument names one: `progression-bench crash-test run`.
/// They are library targets rather than executables of their own, which SwiftPM would list as products of the package
/// to everyone who depends on it (issue 36).
enum Tools {
    /// Each tool's command and entry, which takes the arguments after the command.
    static let all: [(command: String, main: @Sendable ([String]) async -> Void)] = [
        (CrashTestTool.command, CrashTestTool.main),
        (FaultTestTool.command, FaultTestTool.main),
        (FleetTestTool.command, FleetTestTool.main),
        (ChaosTestTool.command, ChaosTestTool.main),
        (ConsoleBenchTool.command, ConsoleBenchTool.main),
        (JobsLoopTool.command, JobsLoopTool.main),
    ]

    /// The tool named by the first of `arguments` (those after the program's name), if one is.
    static func named(in arguments: [String]) -> (@Sendable ([String]) async -> Void)? {
        guard let first = arguments.first else { return nil }
        return all.first { $0.command == first }?.main
    }
}
