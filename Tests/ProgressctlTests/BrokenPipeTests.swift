import Foundation
import Progression
import Synchronization
import Testing

/// A reader of stdout that goes away (`progressctl list | head -1`, `progression-demo serve 2>&1 | tee log` then
/// Ctrl-C) does not kill progressctl or the demo with SIGPIPE (issue 14).
@Suite struct BrokenPipeTests {
    /// How a child process ended: its exit status, or the signal that killed it.
    enum Ending: Equatable, Sendable {
        case exited(Int32)
        case killed(Int32)
    }

    /// A child whose stdout and stderr go to a pipe whose reading end this process closes at once: the reader that
    /// exited.
    ///
    /// `@unchecked Sendable`: `Process` is not `Sendable`, but after `run()` this value only reads the process's
    /// immutable pid and sends signals to it; the ending crosses threads through a mutex.
    final class PipedChild: @unchecked Sendable {
        let process = Process()
        private let ending = EndingBox()

        final class EndingBox: Sendable {
            let state = Mutex<Ending?>(nil)
        }

        init(_ binary: URL, _ arguments: [String], stderrToo: Bool) throws {
            process.executableURL = binary
            process.arguments = arguments
            var environment = ProcessInfo.processInfo.environment
            environment["PROGRESSION_DB"] = nil
            process.environment = environment
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = stderrToo ? pipe : FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            process.terminationHandler = { [ending] process in
                let end: Ending =
                    process.terminationReason == .uncaughtSignal
                    ? .killed(process.terminationStatus) : .exited(process.terminationStatus)
                ending.state.withLock { $0 = end }
            }
            try process.run()
            try pipe.fileHandleForReading.close()
            try? pipe.fileHandleForWriting.close()
        }

        var isRunning: Bool { ending.state.withLock { $0 } == nil }

        /// How it ended, or `nil` when it still runs after `timeout` (it is killed then).
        func end(timeout: Duration = .seconds(20)) async -> Ending? {
            _ = await eventually(timeout: timeout) { !isRunning }
            if isRunning { process.terminate() }
            return ending.state.withLock { $0 }
        }
    }

    @Test func progressctlStopsQuietlyWhenItsReaderIsGone() async throws {
        let fixture = try Fixture()
        var records: [TaskRecord] = []
        for index in 0..<3_000 {
            records.append(TaskRecord(id: String(format: "t%05d", index), name: "task \(index)", kind: "import",
                                      status: .completed, createdAt: fixture.start, finishedAt: fixture.start))
        }
        try await fixture.store.insert(records, events: [])
        for command in [["list", "--limit", "3000"], ["list", "--limit", "3000", "--json"]] {
            let child = try PipedChild(try CLI.requireBinary(), ["--db", fixture.path] + command, stderrToo: false)
            #expect(await child.end() == .exited(0), "\(command)")
        }
    }

    @Test func theDemoServiceOutlivesABrokenPipeAndStopsOnCtrlC() async throws {
        let directory = try TemporaryDirectory()
        let database = directory.file("demo.sqlite")
        let demo = try CLI.requireBinary().deletingLastPathComponent().appendingPathComponent("progression-demo")
        try #require(FileManager.default.isExecutableFile(atPath: demo.path), "progression-demo is built with the tests")
        // Its log goes to the pipe whose reader is gone: the first line meets EPIPE.
        let service = try PipedChild(demo, ["serve", "--db", database, "--concurrency", "1"], stderrToo: true)
        defer { if service.isRunning { service.process.terminate() } }
        let started = try await eventually(timeout: .seconds(20)) {
            guard FileManager.default.fileExists(atPath: database) else { return false }
            var configuration = SQLiteTaskStore.Configuration()
            configuration.readOnly = true
            guard let store = try? SQLiteTaskStore(path: database, configuration: configuration) else { return false }
            return try await store.owners().contains { $0.liveness().isAlive }
        }
        #expect(started, "the service registered itself")
        // A job it runs to the end while each of its log lines meets EPIPE: SIGPIPE would have killed it at the first.
        let data = directory.file("data")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: data + "/a.txt"))
        let submitted = try await CLI.run(
            ["--db", database, "submit", "checksum", "--input", #"{"directory": "\#(data)"}"#], in: directory)
        #expect(submitted.status == 0, "\(submitted.stderr)")
        let jobID = submitted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let store = try SQLiteTaskStore(path: database)
        let completed = try await eventually(timeout: .seconds(20)) {
            try await store.task(id: jobID)?.status == .completed
        }
        #expect(completed, "the service ran the job")
        #expect(service.isRunning, "a broken pipe does not kill the service")
        kill(service.process.processIdentifier, SIGINT)
        #expect(await service.end() == .exited(0), "Ctrl-C stops it gracefully")
    }
}
