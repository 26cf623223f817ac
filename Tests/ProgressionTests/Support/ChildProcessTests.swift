import Foundation
import ProgressionTestSupport
import Testing

/// The test support's child processes.
struct ChildProcessTests {
    /// A child still running when the test lets go of it is killed: a failed test leaves no worker behind.
    @Test func aChildLetGoWhileRunningIsKilled() async throws {
        var child: ChildProcess? = try ChildProcess(URL(fileURLWithPath: "/bin/sleep"), ["600"], output: .discarded)
        let pid = try #require(child?.pid)
        #expect(kill(pid, 0) == 0, "it runs")
        child = nil
        try await poll("the child to be gone", timeout: .seconds(30)) {
            // Gone, or a zombie not yet reaped.
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
            return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
        }
    }
}
