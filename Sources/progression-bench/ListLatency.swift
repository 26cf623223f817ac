import Foundation
import Progression

/// Listing the newest 50 roots of a database of 1,000,000 tasks and 10,000,000 events (``ListDatabase``).
///
/// `store_list_ms_1m`: open a `SQLiteTaskStore` on the file and run `roots(TaskQuery(limit: 50))` (open + query),
/// median of 5. `cli_list_ms_1m`: spawn `progressctl list --limit 50 --db FILE`, median of 7, beside `cli_help_ms`,
/// the spawn of `progressctl --help` (see ``cliList(database:shape:log:)``).
///
/// The quick run reuses the full database when it was built already, and otherwise builds a small one (its size is
/// in the figure's note and in `meta`).
enum ListLatency {
    static let trials = 5

    static let scenario = Scenario(
        name: "list", keys: ["store_list_ms_1m", "store_list_first_ms_1m", "cli_list_ms_1m", "cli_help_ms"]
    ) { context in
        let sizes = context.sizes
        let directory = context.options.dataDirectory
        let full = ListDatabase(
            directory: directory, tasks: BenchSizes.full.listTasks, eventsPerTask: BenchSizes.full.listEventsPerTask)
        let database =
            context.options.quick && !full.exists
            ? ListDatabase(directory: directory, tasks: sizes.listTasks, eventsPerTask: sizes.listEventsPerTask)
            : full
        if !database.exists {
            context.log("building \(database.path) (once; reused by later runs)")
        }
        let (built, buildTime) = try await Measurement.time { try await database.buildIfMissing(log: context.log) }
        if built { context.log("built in \(String(format1: buildTime.inSeconds, decimals: 1)) s") }
        let shape =
            "\(FigureFormat.number(Double(database.tasks))) tasks, "
            + "\(FigureFormat.number(Double(database.tasks * database.eventsPerTask))) events"

        var times: [Double] = []
        for _ in 0..<trials {
            let (roots, elapsed) = try await Measurement.time { () async throws -> [TaskRecord] in
                let store = try SQLiteTaskStore(path: database.path)
                let roots = try await store.roots(TaskQuery(limit: 50))
                await store.close()
                return roots
            }
            guard roots.count == 50 else { throw BenchFailure("listing returned \(roots.count) roots, not 50") }
            times.append(elapsed.inMilliseconds)
        }
        context.log("store list: \(times.map { String(format1: $0, decimals: 2) }) ms")
        var figures = [
            Figure(
                "store_list_ms_1m", Measurement.median(times), unit: "ms", target: .below(100),
                note: "open SQLiteTaskStore + roots(limit: 50), \(shape), median of \(trials)"),
            Figure(
                "store_list_first_ms_1m", times[0], unit: "ms",
                note: "the first of those (after the build or a previous run; page cache warm)"),
        ]
        figures += try cliList(database: database, shape: shape, log: context.log)
        return figures
    }

    /// Spawns of `progressctl` timed per figure: more than the store's trials, since a spawn is noisier.
    static let cliTrials = 7

    /// `cli_list_ms_1m`: spawns `progressctl list --limit 50 --db FILE` next to this binary, wall time until it
    /// exited, median of ``cliTrials``; `cli_help_ms`: the same for `progressctl --help` (process start, dynamic
    /// linking and Swift runtime start-up, argument parsing; no database), runs alternated with the list runs so
    /// both see the same machine. The difference is what the listing itself costs in the child. Pending when
    /// `progressctl` was not built (build the whole package: `swift build -c release`).
    static func cliList(database: ListDatabase, shape: String, log: (String) -> Void) throws -> [Figure] {
        let target = Target.below(100)
        guard let binary = progressctlBinary() else {
            return [
                .pending(
                    "cli_list_ms_1m", unit: "ms", target: target,
                    reason: "no progressctl next to this binary: build the whole package (swift build -c release)"),
                .pending("cli_help_ms", unit: "ms", target: nil, reason: "no progressctl next to this binary"),
            ]
        }
        var list: [Double] = []
        var help: [Double] = []
        func spawn(_ arguments: [String]) throws -> Double {
            let start = ContinuousClock.now
            let (status, output) = try run(binary, arguments, database: database)
            let elapsed = ContinuousClock.now - start
            guard status == 0 else {
                throw BenchFailure("progressctl \(arguments.joined(separator: " ")) exited \(status): \(output.prefix(300))")
            }
            return elapsed.inMilliseconds
        }
        let listArguments = ["list", "--limit", "50", "--db", database.path]
        _ = try spawn(listArguments)  // warm-up: the binary's pages and the database's first pages
        for trial in 0..<cliTrials {
            if trial % 2 == 0 {
                list.append(try spawn(listArguments))
                help.append(try spawn(["--help"]))
            } else {
                help.append(try spawn(["--help"]))
                list.append(try spawn(listArguments))
            }
        }
        log("progressctl list: \(list.map { String(format1: $0, decimals: 1) }) ms")
        log("progressctl --help: \(help.map { String(format1: $0, decimals: 1) }) ms")
        let listMedian = Measurement.median(list)
        let helpMedian = Measurement.median(help)
        return [
            Figure(
                "cli_list_ms_1m", listMedian, unit: "ms", target: target,
                note: "spawn progressctl list --limit 50 until it exits, \(shape), median of \(cliTrials) "
                    + "(process start ≈ cli_help_ms, the rest ≈ \(String(format1: listMedian - helpMedian, decimals: 1)) ms)"),
            Figure(
                "cli_help_ms", helpMedian, unit: "ms",
                note: "spawn progressctl --help until it exits (the process-start baseline), median of \(cliTrials)"),
        ]
    }

    /// `progressctl` in this binary's directory, if it is the real tool (its help lists a `list` command).
    static func progressctlBinary() -> String? {
        let own = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let candidate = (own as NSString).deletingLastPathComponent + "/progressctl"
        guard FileManager.default.isExecutableFile(atPath: candidate),
            let (status, help) = try? run(candidate, ["--help"], database: nil), status == 0,
            help.contains("list")
        else { return nil }
        return candidate
    }

    /// Runs a binary and returns its exit status and its stdout and stderr together.
    static func run(_ binary: String, _ arguments: [String], database: ListDatabase?) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        if let database { environment["PROGRESSION_DB"] = database.path }
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
