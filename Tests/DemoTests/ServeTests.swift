import Foundation
import Progression
import ProgressionSQLite
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
        #expect(try await service.waitForExit(timeout: .seconds(120)) == 0)
        #expect(service.stderr.contains("stopped"))
    }

    /// Issue 35: each folder of the directory is a child job, which any `serve` on the database runs: two services
    /// split one directory, and the job's root sums both. The first holds two folders (its two slots, six seconds
    /// each); folders' jobs are paused as a kind while the second starts, however slowly, so that the first cannot
    /// take them all meanwhile, and resumed once it serves.
    @Test func twoServicesOnOneDatabaseSplitOneDirectoryByFolder() async throws {
        let temp = try TemporaryDirectory()
        let data = temp.url.appendingPathComponent("data")
        let folders = (0..<8).map { "folder-\($0)" }
        for folder in folders {
            let directory = data.appendingPathComponent(folder)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            for index in 0..<4 {
                try Data(String(repeating: "\(folder) \(index)\n", count: 200).utf8)
                    .write(to: directory.appendingPathComponent("f\(index).txt"))
            }
        }
        let db = temp.file("db.sqlite")
        let first = try ChildProcess("progression-demo", ["serve", "--db", db, "--concurrency", "2"], in: temp)
        try await poll("the first service to start") { first.stderr.contains("serving checksum jobs") }
        let input = #"{"directory": "\#(data.path)", "fileDelayMilliseconds": 1500, "parallelFiles": 1}"#
        let submitted = try await ChildProcess.run(
            "progressctl", ["--db", db, "submit", "checksum", "--input", input], in: temp)
        #expect(submitted.status == 0, "\(submitted.stderr)")
        let jobID = submitted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let store = try SQLiteTaskStore(path: db)
        try await poll("the first service to run two folders") {
            try await store.roots(TaskQuery(statuses: [.running], kind: "checksum-folder")).count == 2
        }
        func ctl(_ arguments: String...) async throws {
            let result = try await ChildProcess.run("progressctl", ["--db", db] + arguments, in: temp)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
        }
        try await ctl("pause-kind", "checksum-folder")
        let second = try ChildProcess("progression-demo", ["serve", "--db", db, "--concurrency", "2"], in: temp)
        try await poll("the second service to start") { second.stderr.contains("serving checksum jobs") }
        try await ctl("resume-kind", "checksum-folder")
        try await poll("the job to complete", timeout: .seconds(180)) {
            try await store.task(id: jobID)?.status == .completed
        }
        let root = try #require(try await store.task(id: jobID))
        #expect(root.progress == 1)
        let links = try await store.tree(of: jobID).filter(\.isLink)
        #expect(links.count == 8 && links.allSatisfy { $0.status == .completed && $0.progress == 1 })
        // Which process ran each folder's job: its owner's pid.
        let pids = Dictionary(try await store.owners().map { ($0.id, $0.pid) }, uniquingKeysWith: { first, _ in first })
        var ranBy: [Int32: Int] = [:]
        for link in links {
            let childID = try #require(link.childJobID)
            let child = try #require(try await store.task(id: childID))
            #expect(child.status == .completed && child.parentJobID == jobID)
            if let owner = child.ownerID, let pid = pids[owner] { ranBy[pid, default: 0] += 1 }
        }
        #expect(ranBy[first.pid, default: 0] > 0 && ranBy[second.pid, default: 0] > 0, "folders by pid: \(ranBy)")
        #expect(ranBy.values.reduce(0, +) == 8)
        let manifest = try String(contentsOfFile: data.path + ".manifest.tsv", encoding: .utf8)
        #expect(manifest.split(separator: "\n").count == 33)
        for service in [first, second] {
            service.signal(SIGTERM)
            #expect(try await service.waitForExit(timeout: .seconds(120)) == 0)
        }
        await store.close()
    }

    /// Issue 22, defect 10: the service's log missed "job completed" lines (16 of 3,000) and ran seconds behind, being
    /// fed by the progress stream, which coalesces. Each of 300 quick jobs logs one line, by the time it is completed.
    @Test func everyFinishedJobIsLoggedOnce() async throws {
        let temp = try TemporaryDirectory()
        var lines: [String] = []
        for index in 0..<300 {
            let directory = temp.url.appendingPathComponent("d\(index)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try Data("line \(index)\n".utf8).write(to: directory.appendingPathComponent("f.txt"))
            lines.append(#"{"kind": "checksum", "input": {"directory": "\#(directory.path)"}}"#)
        }
        try Data(lines.joined(separator: "\n").utf8).write(to: temp.url.appendingPathComponent("jobs.jsonl"))
        let db = temp.file("db.sqlite")
        let service = try ChildProcess("progression-demo", ["serve", "--db", db, "--concurrency", "8"], in: temp)
        try await poll("the service to start") { service.stderr.contains("serving checksum jobs") }
        let submitted = try await ChildProcess.run(
            "progressctl", ["--db", db, "submit", "--from", temp.file("jobs.jsonl")], in: temp)
        #expect(submitted.status == 0, "\(submitted.stderr)")
        let ids = Set(submitted.stdout.split(separator: "\n").map(String.init))
        #expect(ids.count == 300)
        let store = try SQLiteTaskStore(path: db)
        try await poll("the jobs to complete", timeout: .seconds(180)) {
            try await store.countRoots(TaskQuery(statuses: [.completed], kind: "checksum")) == 300
        }
        // Each job logs its line before its completion is committed: they are all there now, once each.
        let logged = service.stderr.split(separator: "\n").filter { $0.contains("job completed") }
        #expect(logged.count == 300, "\(logged.count) lines")
        let loggedIDs = Set(ids.filter { id in logged.contains { $0.contains("job=\(id)") } })
        #expect(loggedIDs == ids)
        service.signal(SIGTERM)
        #expect(try await service.waitForExit(timeout: .seconds(120)) == 0)
        await store.close()
    }

    /// Issue 15: SIGTERM in the first moments of `serve` — while it opens its database, before its service group runs —
    /// stops it gracefully (status 0), where the signal's default action used to kill it (143). The database is held
    /// locked so that `serve` stays in its start-up; the signal goes as soon as the process catches SIGTERM.
    @Test func aSIGTERMWhileServeStartsStopsItGracefully() async throws {
        let temp = try TemporaryDirectory()
        let db = temp.file("db.sqlite")
        try await SQLiteTaskStore(path: db).close()
        let lock = try SQLiteConnection(path: db)
        try lock.execute("BEGIN EXCLUSIVE")

        let service = try ChildProcess("progression-demo", ["serve", "--db", db], in: temp)
        try await poll("serve to catch SIGTERM", timeout: .seconds(120)) {
            Self.catches(SIGTERM, pid: service.pid) || !service.isRunning
        }
        #expect(!service.stderr.contains("serving checksum jobs"), "still starting: \(service.stderr)")
        service.signal(SIGTERM)
        try lock.execute("COMMIT")
        #expect(try await service.waitForExit(timeout: .seconds(120)) == 0, "\(service.stderr)")
        #expect(service.stderr.contains("stopped"))
    }

    /// Whether process `pid` has a handler for `signal` (its `SigCgt` mask in /proc).
    static func catches(_ signal: Int32, pid: Int32) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
            let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return mask & (1 << UInt64(signal - 1)) != 0
    }
}
