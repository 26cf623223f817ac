import Foundation

/// `progression-bench jobs-loop`: the `jobs_per_s` loop alone (``SubmitThroughput/jobs(count:concurrency:store:configure:)``),
/// for a profiler: a run of it under `valgrind --tool=callgrind` (or `perf record`) measures the executor's cost of a
/// job on one store without the rest of the scenario. The difference of two runs of different sizes, divided by the
/// difference in jobs, leaves out what a run does once (docs/performance.md, "Where a job's time goes").
///
/// ```sh
/// progression-bench jobs-loop --store memory --jobs 20000 [--concurrency 8] [--runs 1]
/// ```
enum JobsLoopTool {
    static let command = "jobs-loop"

    static func main(_ arguments: [String]) async {
        var store = StoreKind.memory
        var jobs = 20_000
        var concurrency = 8
        var runs = 1
        var rest = arguments[...]
        func fail(_ message: String) -> Never {
            FileHandle.standardError.write(Data("jobs-loop: \(message)\n".utf8))
            exit(2)
        }
        func number(_ name: String) -> Int {
            guard let text = rest.popFirst(), let value = Int(text), value > 0 else {
                fail("\(name) takes a whole number above 0")
            }
            return value
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--store":
                guard let text = rest.popFirst(), let kind = StoreKind(rawValue: text) else {
                    fail("--store takes memory or sqlite")
                }
                store = kind
            case "--jobs": jobs = number("--jobs")
            case "--concurrency": concurrency = number("--concurrency")
            case "--runs": runs = number("--runs")
            default: fail("unknown argument '\(argument)' (usage: jobs-loop [--store memory|sqlite] [--jobs N] [--concurrency N] [--runs N])")
            }
        }
        for _ in 0..<runs {
            let switchesBefore = ProcessTimes.contextSwitches()
            do {
                let run = try await SubmitThroughput.jobs(count: jobs, concurrency: concurrency, store: store)
                let switches = Double(ProcessTimes.contextSwitches() - switchesBefore) / Double(jobs)
                print(
                    "jobs-loop: store=\(store.rawValue) jobs=\(jobs) concurrency=\(concurrency) "
                        + "jobs_per_s=\(String(format1: run.perSecond, decimals: 0)) "
                        + "cpu_us_per_job=\(String(format1: run.cpuPerJob.inMicroseconds, decimals: 1)) "
                        + "context_switches_per_job=\(String(format1: switches, decimals: 2))")
            } catch {
                fail("\(error)")
            }
        }
    }
}
