import Foundation
import ProgressionTestSupport
import Testing

/// `progression-bench jobs-loop`, the `jobs_per_s` loop alone for a profiler (docs/performance.md), run as the child
/// process it is: a run says what it measured on one line; a bad argument is one line on stderr and status 2.
struct JobsLoopToolTests {
    @Test(arguments: ["memory", "sqlite"])
    func aRunSaysWhatItMeasuredOnOneLine(store: String) async throws {
        let directory = try TemporaryDirectory()
        let outcome = try await ChildProcess.run(
            "progression-bench", ["jobs-loop", "--store", store, "--jobs", "40", "--concurrency", "4"], in: directory,
            timeout: .seconds(120))
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let lines = outcome.stdout.split(separator: "\n").filter { $0.hasPrefix("jobs-loop:") }
        #expect(lines.count == 1)
        let line = String(lines.first ?? "")
        #expect(line.contains("store=\(store) jobs=40 concurrency=4"))
        for key in ["jobs_per_s=", "cpu_us_per_job=", "context_switches_per_job="] { #expect(line.contains(key)) }
    }

    @Test(arguments: [["--store", "postgres"], ["--jobs", "0"], ["--runs"], ["--fast"]])
    func aBadArgumentIsOneLineOnStderrAndStatusTwo(arguments: [String]) async throws {
        let directory = try TemporaryDirectory()
        let outcome = try await ChildProcess.run("progression-bench", ["jobs-loop"] + arguments, in: directory)
        #expect(outcome.status == 2)
        #expect(outcome.errorLines.count == 1)
        #expect(outcome.errorLines.first?.hasPrefix("jobs-loop: ") == true)
        #expect(outcome.stdout.isEmpty)
    }
}
