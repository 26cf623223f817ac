import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// A reader of stdout that goes away (`progressctl list | head -1`, `progression-demo serve 2>&1 | tee log` then
/// Ctrl-C) does not kill progressctl or the demo with SIGPIPE (issue 14).
@Suite struct BrokenPipeTests {
    /// Starts a child whose stdout (and stderr, with `stderrToo`) go to a pipe whose reading end this process closes
    /// at once: the reader that exited.
    static func pipedChild(_ binary: URL, _ arguments: [String], stderrToo: Bool) throws -> ChildProcess {
        let pipe = try ChildProcess.pipe()
        let child = try ChildProcess(
            binary, arguments,
            output: .handles(stdout: pipe.writing, stderr: stderrToo ? pipe.writing : .nullDevice),
            environment: ["PROGRESSION_DB": nil])
        try pipe.reading.close()
        try? pipe.writing.close()
        return child
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
            let child = try Self.pipedChild(try CLI.requireBinary(), ["--db", fixture.path] + command, stderrToo: false)
            #expect(try await child.waitForEnd(timeout: .seconds(120)) == .exited(0), "\(command)")
        }
    }

    @Test func theDemoServiceOutlivesABrokenPipeAndStopsOnCtrlC() async throws {
        let directory = try TemporaryDirectory()
        let database = directory.file("demo.sqlite")
        let demo = try CLI.requireBinary().deletingLastPathComponent().appendingPathComponent("progression-demo")
        try #require(FileManager.default.isExecutableFile(atPath: demo.path), "progression-demo is built with the tests")
        // Its log goes to the pipe whose reader is gone: the first line meets EPIPE.
        let service = try Self.pipedChild(demo, ["serve", "--db", database, "--concurrency", "1"], stderrToo: true)
        defer { if service.isRunning { service.signal(SIGTERM) } }
        let started = try await eventually(timeout: .seconds(120)) {
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
        let completed = try await eventually(timeout: .seconds(120)) {
            try await store.task(id: jobID)?.status == .completed
        }
        #expect(completed, "the service ran the job")
        #expect(service.isRunning, "a broken pipe does not kill the service")
        service.signal(SIGINT)
        #expect(try await service.waitForEnd(timeout: .seconds(120)) == .exited(0), "Ctrl-C stops it gracefully")
    }
}
