import ArgumentParser
import Foundation
#if Console
import Logging
import Progression
import ProgressionConsole
import ProgressionOperator
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
#endif

/// Measures the console against its targets, figures and targets side by side in one run (release builds; a debug
/// build with --quick only checks that every scenario runs):
///
/// - the list page's server time on a database of 1,000,000 roots (target < 100 ms), first page, a page deep in by
///   cursor, and filtered;
/// - the job page of a 10,000-node tree (target < 200 ms);
/// - 100 open pages (Server-Sent Events) on one worker running 1,000 live tasks: the CPU the console adds to the
///   worker (target < 5 % of a core) and how old the newest value of an update is when it arrives, p99 (< 1 s).
struct ConsoleBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "progression-bench console-bench",
        abstract: "Measure the console: list and job pages on a large database, live pages on a busy worker.",
        subcommands: [Run.self, Worker.self], defaultSubcommand: Run.self)

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run every scenario and print the figures.")

        @Flag(help: "Small sizes and short windows: checks that every scenario runs (CI), not the targets.")
        var quick = false

        @Option(help: "Where the large database is built and kept.")
        var directory = ".build/console-bench"

        func run() async throws {
            #if Console
            try await ConsoleBenchRun(quick: quick, directory: directory).run()
            #else
            throw ValidationError("progression-bench was built without the Console trait (swift build --traits Console)")
            #endif
        }
    }

    struct Worker: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The worker of the live scenario (run by `run`).", shouldDisplay: false)

        @Option var db: String
        @Option var jobs: Int
        @Option var children: Int
        @Option(name: .customLong("report-ms")) var reportMilliseconds: Int

        func run() async throws {
            #if Console
            LoggingSystem.bootstrap(StreamLogHandler.standardError)
            try await LiveWorker.run(
                database: db, jobs: jobs, children: children, reportInterval: .milliseconds(reportMilliseconds))
            #endif
        }
    }
}

#if Console
/// One run of the scenarios.
struct ConsoleBenchRun {
    let quick: Bool
    let directory: String

    struct Figure {
        var name: String
        var value: String
        var target: String
        var met: Bool?
    }

    func log(_ text: String) {
        FileHandle.standardError.write(Data("console-bench: \(text)\n".utf8))
    }

    func run() async throws {
        #if DEBUG
        if !quick { log("a debug build: the figures say nothing about the targets (use -c release)") }
        #endif
        var figures: [Figure] = []
        figures += try await pages()
        figures += try await live()
        print("")
        print("figure".padding(toLength: 84, withPad: " ", startingAt: 0) + "value".padding(toLength: 44, withPad: " ", startingAt: 0) + "target")
        for figure in figures {
            let verdict = figure.met.map { $0 ? "  met" : "  MISSED" } ?? ""
            print(
                figure.name.padding(toLength: 84, withPad: " ", startingAt: 0)
                    + figure.value.padding(toLength: 44, withPad: " ", startingAt: 0) + figure.target + verdict)
        }
    }

    // MARK: Pages on a large database

    static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }

    /// Times `count` requests of `path` on one connection after two for warming up; their median and p95.
    func time(_ probe: HTTPProbe, _ path: String, count: Int, accept: String = "text/html") throws -> (median: Double, p95: Double, bytes: Int) {
        var samples: [Double] = []
        var bytes = 0
        for index in 0..<(count + 2) {
            let start = ContinuousClock.now
            let (status, size) = try probe.get(path, accept: accept)
            let elapsed = Self.milliseconds(ContinuousClock.now - start)
            guard status == 200 else { throw HTTPProbe.Failure(description: "\(path): status \(status)") }
            if index >= 2 { samples.append(elapsed) }
            bytes = size
        }
        samples.sort()
        return (samples[samples.count / 2], samples[min(samples.count - 1, Int(Double(samples.count) * 0.95))], bytes)
    }

    func pages() async throws -> [Figure] {
        let roots = quick ? 20_000 : 1_000_000
        let treeNodes = quick ? 1_000 : 10_000
        let database = BenchDatabase(directory: directory, roots: roots, treeNodes: treeNodes)
        try await database.buildIfMissing(log: log)
        var options = SQLiteTaskStore.Configuration()
        options.createIfMissing = false
        options.readOnly = true
        let store = OperatorStore(sqlite: try SQLiteTaskStore(path: database.path, configuration: options))
        var logger = Logger(label: "console-bench")
        // The in-process server is cancelled at the end, which Hummingbird reports as errors.
        logger.logLevel = .critical
        let console = try ProgressionConsole(operatorStore: store, configuration: .init(path: ""), logger: logger)
        let (port, server) = try await serve(console)
        defer { server.cancel() }
        let probe = try HTTPProbe(port: port)
        let count = quick ? 5 : 40
        // A page deep in: the cursor after the root 100,000 places from the newest.
        let deepIndex = roots - min(roots / 2, 100_000)
        let deep = RootCursor(.created(
            milliseconds: BenchDatabase.createdAt(deepIndex), id: BenchDatabase.id(deepIndex), ties: 1)).description
        let listTarget = "< 100 ms"
        var figures: [Figure] = []
        let cases: [(String, String, Bool)] = [
            ("list page, newest 50", "/tasks", true),
            ("list page 2,000 (by cursor)", "/tasks?after=\(deep)", true),
            ("list page, status failed", "/tasks?status=failed", true),
            ("list page, kind report", "/tasks?kind=report", true),
            ("list page, running and paused", "/tasks?status=running,paused", true),
            ("list page, oldest first", "/tasks?order=oldest", true),
            ("list page, name contains (reads every root)", "/tasks?name=job+99999", false),
        ]
        let size = quick ? "20,000" : "1,000,000"
        for (name, path, targeted) in cases {
            let result = try time(probe, path, count: targeted ? count : max(3, count / 8))
            figures.append(Figure(
                name: "\(name), \(size) roots",
                value: String(format: "median %.1f ms, p95 %.1f ms", result.median, result.p95),
                target: targeted ? listTarget : "(no target)", met: targeted ? result.p95 < 100 : nil))
        }
        let job = try time(probe, "/tasks/\(BenchDatabase.treeRoot)", count: count)
        figures.append(Figure(
            name: "job page, \(treeNodes)-node tree (as watch shows it)",
            value: String(format: "median %.1f ms, p95 %.1f ms", job.median, job.p95), target: "< 200 ms",
            met: job.p95 < 200))
        let whole = try time(probe, "/tasks/\(BenchDatabase.treeRoot)?expand=all", count: max(3, count / 4))
        figures.append(Figure(
            name: "job page, every node shown (at most 5,000)",
            value: String(format: "median %.1f ms, p95 %.1f ms", whole.median, whole.p95), target: "(no target)", met: nil))
        let api = try time(probe, "/tasks/\(BenchDatabase.treeRoot)", count: max(3, count / 4), accept: "application/json")
        figures.append(Figure(
            name: "job API, the whole tree as JSON",
            value: String(format: "median %.1f ms, %d KiB", api.median, api.bytes / 1024), target: "(no target)", met: nil))
        let overview = try time(probe, "/", count: max(3, count / 8))
        figures.append(Figure(
            name: "overview page, \(size) roots",
            value: String(format: "median %.1f ms, p95 %.1f ms", overview.median, overview.p95), target: "(no target)", met: nil))
        return figures
    }

    /// Serves `console` on a free port in this process.
    func serve(_ console: ProgressionConsole) async throws -> (Int, Task<Void, any Error>) {
        let url = Mutex<String?>(nil)
        let server = Task { try await console.serve(host: "127.0.0.1", port: 0) { text in url.withLock { $0 = text } } }
        let deadline = ContinuousClock.now + .seconds(30)
        while url.withLock({ $0 }) == nil {
            guard ContinuousClock.now < deadline else { throw HTTPProbe.Failure(description: "the console did not start") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let text = url.withLock { $0 } ?? ""
        let port = Int(text.split(separator: ":").last?.dropLast() ?? "") ?? 0
        return (port, server)
    }

    // MARK: Live pages on a busy worker

    /// User plus system CPU time of process `pid` so far, in seconds (/proc/PID/stat).
    static func cpuSeconds(of pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime 14 and stime 15.
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    func live() async throws -> [Figure] {
        let jobs = quick ? 10 : 100
        let children = 9
        let pagesCount = quick ? 20 : 100
        let window: Duration = quick ? .seconds(3) : .seconds(20)
        let scratch = NSTemporaryDirectory() + "console-bench-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = [
            ConsoleBenchTool.command, "worker", "--db", scratch + "/live.sqlite", "--jobs", "\(jobs)",
            "--children", "\(children)", "--report-ms", "200",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        defer {
            if process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
        }
        guard let line = String(data: output.fileHandleForReading.availableLine(), encoding: .utf8),
            let port = Int(line.split(separator: ":").last?.dropLast() ?? "")
        else { throw HTTPProbe.Failure(description: "the worker printed no URL") }
        let pid = process.processIdentifier
        // Every job running before anything is measured.
        let probe = try HTTPProbe(port: port)
        let settle = ContinuousClock.now + .seconds(60)
        while true {
            if try roots(probe, "/tasks?status=running&limit=500").count >= jobs { break }
            guard ContinuousClock.now < settle else { throw HTTPProbe.Failure(description: "the jobs did not start") }
            try await Task.sleep(for: .milliseconds(200))
        }
        let ids = try roots(probe, "/tasks?status=running&limit=500")
        try await Task.sleep(for: quick ? .seconds(1) : .seconds(5))
        let windowSeconds = Self.milliseconds(window) / 1000
        func cpu(over window: Duration) async throws -> Double {
            let before = Self.cpuSeconds(of: pid)
            try await Task.sleep(for: window)
            return (Self.cpuSeconds(of: pid) - before) / windowSeconds
        }
        let baseline = try await cpu(over: window)
        log(String(format: "worker alone: %.1f %% of a core", baseline * 100))

        // The pages: most on the list, some on jobs, some on the overview.
        let listPages = pagesCount * 6 / 10
        let jobPages = pagesCount * 3 / 10
        var paths = Array(repeating: "/tasks", count: listPages)
        paths += (0..<jobPages).map { "/tasks/\(ids[$0 % ids.count])" }
        paths += Array(repeating: "/", count: pagesCount - listPages - jobPages)
        let latencies = Mutex<[Double]>([])
        let measuring = Mutex(false)
        let connected = Mutex(0)
        // Each page's connection belongs to its thread; this task keeps only the sockets, to end them.
        let sockets = Mutex<[Int32]>([])
        var threads: [Thread] = []
        for path in paths {
            let thread = Thread {
                guard let client = try? HTTPProbe(port: port) else { return }
                sockets.withLock { $0.append(client.descriptor) }
                var first = true
                try? client.events(path) { data in
                    if first {
                        first = false
                        connected.withLock { $0 += 1 }
                    }
                    let received = Date().timeIntervalSince1970 * 1000
                    guard measuring.withLock({ $0 }) else { return true }
                    // The newest report in the update: its step is t=<milliseconds>.
                    var newest = 0.0
                    var rest = Substring(data)
                    while let range = rest.range(of: "\"step\":\"t=") {
                        let digits = rest[range.upperBound...].prefix { $0.isNumber }
                        newest = max(newest, Double(digits) ?? 0)
                        rest = rest[range.upperBound...]
                    }
                    if newest > 0 { latencies.withLock { $0.append(received - newest) } }
                    return true
                }
            }
            thread.start()
            threads.append(thread)
        }
        let connectDeadline = ContinuousClock.now + .seconds(60)
        while connected.withLock({ $0 }) < paths.count {
            guard ContinuousClock.now < connectDeadline else {
                throw HTTPProbe.Failure(description: "only \(connected.withLock { $0 }) of \(paths.count) pages got their first update")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        try await Task.sleep(for: .seconds(1))
        measuring.withLock { $0 = true }
        let loaded = try await cpu(over: window)
        measuring.withLock { $0 = false }
        log(String(format: "worker with %d pages: %.1f %% of a core", paths.count, loaded * 100))
        for socket in sockets.withLock({ $0 }) { HTTPProbe.shutDown(socket) }
        try await Task.sleep(for: .seconds(1))
        let after = try await cpu(over: window)
        log(String(format: "worker alone again: %.1f %% of a core", after * 100))
        let added = (loaded - (baseline + after) / 2) * 100
        let sorted = latencies.withLock { $0 }.sorted()
        guard !sorted.isEmpty else { throw HTTPProbe.Failure(description: "no update arrived while measuring") }
        let p50 = sorted[sorted.count / 2]
        let p99 = sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))]
        let live = "\(jobs * (children + 1)) live tasks, \(paths.count) pages (\(listPages) list, \(jobPages) job, \(paths.count - listPages - jobPages) overview)"
        return [
            Figure(
                name: "worker CPU added by \(live)",
                value: String(format: "%.1f %% of a core (alone %.1f / %.1f %%)", added, baseline * 100, after * 100),
                target: "< 5 %", met: added < 5),
            Figure(
                name: "update latency (newest report → page), \(sorted.count) updates",
                value: String(format: "p50 %.0f ms, p99 %.0f ms", p50, p99), target: "p99 < 1 s", met: p99 < 1000),
        ]
    }

    /// The ids of the roots a JSON listing returns.
    func roots(_ probe: HTTPProbe, _ path: String) throws -> [String] {
        let (status, body) = try probe.fetch(path, accept: "application/json")
        guard status == 200,
            let document = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let tasks = document["tasks"] as? [[String: Any]]
        else { return [] }
        return tasks.compactMap { $0["id"] as? String }
    }
}

extension FileHandle {
    /// The first line written to this pipe (blocking until it comes).
    func availableLine() -> Data {
        var line = Data()
        while true {
            let byte = readData(ofLength: 1)
            if byte.isEmpty || byte == Data([0x0A]) { return line }
            line += byte
        }
    }
}
#endif
