import CSQLite
import Foundation
import Logging

/// `progression-bench`: the benchmark of issue 7. Runs every scenario with its baseline in this one process, then
/// prints a table (or, with `--json`, one JSON object). Exits non-zero only when a scenario fails or a figure is not
/// finite and positive; missed targets are shown, not fatal.
///
/// ```
/// swift run -c release progression-bench            # the full run, < 10 minutes
/// swift run -c release progression-bench --quick    # the CI smoke run, < 1 minute
/// swift run -c release progression-bench --only reports_per_s_1task,writer --json
/// swift run progression-bench crash-test run --kills 20 --jobs 50   # a test tool (``Tools``), in any build
/// ```
@main
enum ProgressionBench {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if let tool = Tools.named(in: arguments) {
            await tool(Array(arguments.dropFirst()))
            exit(0)
        }
        // The executors' logs go to stderr, warnings only: stdout is the table or the JSON object.
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
        let options: BenchOptions
        do {
            options = try BenchOptions(arguments: arguments)
        } catch let error as BenchOptionError {
            if let message = error.message { standardError("progression-bench: \(message)") }
            standardError(BenchOptions.usage)
            exit(error.message == nil ? 0 : 64)
        } catch {
            exit(64)
        }
        #if DEBUG
        standardError(
            """
            ************************************************************************************
            progression-bench is a DEBUG build: its numbers mean nothing.
            Run it as: swift run -c release progression-bench
            ************************************************************************************
            """)
        if !options.allowDebug { exit(2) }
        #endif

        if let child = options.child {
            do {
                switch child {
                case "rss": try await ResidentMemory.runChild(tasks: max(1, options.childTasks), concurrency: options.childConcurrency)
                default: throw BenchFailure("unknown child '\(child)'")
                }
                exit(0)
            } catch {
                standardError("progression-bench child \(child): \(error)")
                exit(1)
            }
        }

        let context = BenchContext(options: options)
        var report = BenchReport()
        report.meta = meta(options)
        let scenarios = Scenario.all.filter { $0.isSelected(by: options.only) }
        guard !scenarios.isEmpty else {
            standardError("progression-bench: --only selects no scenario (names: \(Scenario.all.map(\.name)))")
            exit(64)
        }
        let total = ContinuousClock.now
        for scenario in scenarios {
            standardError("▶ \(scenario.name)")
            let start = ContinuousClock.now
            do {
                report.add(try await scenario.run(context))
            } catch {
                standardError("  FAILED: \(error)")
                report.fail(scenario.name, error)
            }
            report.timed(scenario.name, seconds: (ContinuousClock.now - start).inSeconds)
        }
        addCombinedRatio(to: &report)
        report.meta["total_seconds"] = String(format1: (ContinuousClock.now - total).inSeconds, decimals: 1)

        if options.json {
            do {
                standardError(report.table())
                print(try report.json())
            } catch {
                standardError("progression-bench: cannot write JSON: \(error)")
                exit(1)
            }
        } else {
            print(report.table())
        }
        exit(report.isSound ? 0 : 1)
    }

    /// `ratio_sqlite_vs_memory`: the smaller of the two report ratios (the one that must hold ≥ 0.8).
    static func addCombinedRatio(to report: inout BenchReport) {
        let keys: Set = ["ratio_sqlite_vs_memory_1task", "ratio_sqlite_vs_memory_100tasks"]
        let ratios = report.figures.filter { keys.contains($0.key) }.compactMap(\.value)
        guard let lowest = ratios.min() else { return }
        report.add([
            Figure(
                "ratio_sqlite_vs_memory", lowest, unit: "ratio", target: .atLeast(0.8),
                note: "min of the report ratios measured in this run (\(ratios.count))")
        ])
    }

    static func meta(_ options: BenchOptions) -> [String: String] {
        let info = ProcessInfo.processInfo
        return [
            "mode": options.quick ? "quick" : "full",
            "date": ISO8601DateFormatter().string(from: Date()),
            "cpus": String(info.activeProcessorCount),
            "memory_gb": String(format1: Double(info.physicalMemory) / 1_073_741_824, decimals: 1),
            "host": info.hostName,
            "sqlite": String(cString: sqlite3_libversion()),
            "repetitions": String(options.sizes.repetitions),
        ]
    }

    static func standardError(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}
