import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// `progression-demo serve` with a job submitted by `progressctl submit`, and a graceful stop.
struct ServeTests {
    @Test func serveRunsAJobSubmittedByProgressctlAndStopsOnSIGTERM() async throws {
        let temp = try TemporaryDirectory()
        let data = temp.url.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        for index in 0..<5 {
            try Data(String(repeating: "line \(index)\n", count: 1000).utf8)
                .write(to: data.appendingPathComponent("f\(index).txt"))
        }
        let db = temp.file("db.sqlite")
        let service = try ChildProcess("progression-demo", ["serve", "--db", db, "--concurrency", "2"], in: temp)
        try await poll("the service to start") { service.stderr.contains("serving checksum jobs") }

        let input = #"{"directory": "\#(data.path)"}"#
        let submitted = try await ChildProcess.run(
            "progressctl", ["--db", db, "submit", "checksum", "--input", input], in: temp)
        #expect(submitted.status == 0, "\(submitted.stderr)")
        let jobID = submitted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let store = try SQLiteTaskStore(path: db)
        try await poll("the submitted job to complete") {
            try await store.task(id: jobID)?.status == .completed
        }
        let manifest = try String(contentsOfFile: data.path + ".manifest.tsv", encoding: .utf8)
        #expect(manifest.split(separator: "\n").count == 6)
        try await poll("the completion to be logged") { service.stderr.contains("job completed") }

        service.signal(SIGTERM)
        #expect(try await service.waitForExit(timeout: .seconds(20)) == 0)
        #expect(service.stderr.contains("stopped"))
    }
}
