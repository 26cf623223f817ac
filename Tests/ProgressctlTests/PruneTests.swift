import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// `prune --dry-run`, the checkpoint after a prune, and `--vacuum` giving the space back (issue 14).
@Suite struct PruneTests {
    /// The size of a file, 0 when there is none.
    func size(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? NSNumber)?.int64Value ?? 0
    }

    /// `count` roots that finished ten days ago, each with a checkpoint of `checkpointBytes`, and one fresh one.
    func fixture(count: Int, checkpointBytes: Int = 0) async throws -> Fixture {
        let fixture = try Fixture()
        let old = Date().addingTimeInterval(-10 * 86_400)
        var records: [TaskRecord] = []
        for index in 0..<count {
            records.append(
                TaskRecord(
                    id: String(format: "old-%05d", index), name: "old \(index)", kind: "import",
                    input: Data(#"{"n":\#(index)}"#.utf8), status: index.isMultiple(of: 2) ? .completed : .failed,
                    checkpoint: checkpointBytes > 0 ? Data(repeating: UInt8(index % 251), count: checkpointBytes) : nil,
                    createdAt: old, startedAt: old, finishedAt: old))
            if records.count == 500 {
                try await fixture.store.insert(records, events: [])
                records.removeAll()
            }
        }
        try await fixture.store.insert(records, events: [])
        try await fixture.root("fresh", status: .completed, createdAt: Date(), finishedAt: Date())
        return fixture
    }

    @Test func aDryRunCountsAndWritesNothing() async throws {
        let fixture = try await fixture(count: 6)
        let before = fixture.bytes()
        let result = try await fixture.run(["prune", "--older-than", "7d", "--dry-run"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("would prune 6 tasks finished before "), "\(result.stdout)")
        let failedOnly = try await fixture.run(["prune", "--older-than", "7d", "--status", "failed", "--dry-run", "--vacuum", "--json"])
        struct PruneDocument: Decodable { var deleted: Int; var tasks: Int; var dryRun: Bool; var vacuumed: Bool }
        let document = try decodeJSON(PruneDocument.self, from: failedOnly.stdout)
        #expect(document.deleted == 3 && document.tasks == 3 && document.dryRun && !document.vacuumed)
        #expect(fixture.bytes() == before, "the database file and its WAL are as they were")
        #expect(try await fixture.store.countRoots(TaskQuery()) == 7)
    }

    @Test func aPruneTruncatesTheWriteAheadLog() async throws {
        let fixture = try await fixture(count: 300, checkpointBytes: 2048)
        #expect(size(fixture.path + "-wal") > 0, "the fixture's writes are in the WAL")
        let result = try await fixture.run(["prune", "--older-than", "7d"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("pruned 300 tasks finished before "), "\(result.stdout)")
        #expect(result.stdout.contains("; database "))
        #expect(size(fixture.path + "-wal") == 0, "a TRUNCATE checkpoint follows a real prune")
        #expect(try await fixture.store.roots(TaskQuery()).map(\.id) == ["fresh"])
    }

    /// Issue 20: a prune whose checkpoint met another process's read transaction exited 1, though the prune was
    /// committed. It succeeds, says the log was not truncated, and deleted what it said.
    @Test func aPruneWhoseCheckpointMeetsAReaderSucceedsAndSaysSo() async throws {
        let fixture = try await fixture(count: 50, checkpointBytes: 1024)
        // Another process (Python's sqlite3 over the same libsqlite3) holds a read transaction: no checkpoint can
        // truncate the log past its snapshot. It holds it until a file appears (not until its stdin closes: a child
        // that another test spawns meanwhile may inherit the pipe's writing end and keep it open), and for at most
        // five minutes, should this process die first.
        let ready = fixture.directory.file("reader-ready")
        let release = fixture.directory.file("reader-release")
        let reader = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "python3", "-c",
                """
                import os, sqlite3, sys, time
                c = sqlite3.connect(sys.argv[1], isolation_level=None)
                c.execute('BEGIN')
                c.execute('SELECT count(*) FROM tasks').fetchall()
                open(sys.argv[2], 'w').close()
                end = time.monotonic() + 300
                while not os.path.exists(sys.argv[3]) and time.monotonic() < end:
                    time.sleep(0.01)
                """,
                fixture.path, ready, release,
            ], output: .files(in: fixture.directory.path))
        defer { if reader.isRunning { reader.signal(SIGKILL) } }
        try await poll("the reader to hold its transaction", timeout: .seconds(120)) {
            FileManager.default.fileExists(atPath: ready) || !reader.isRunning
        }
        #expect(reader.isRunning, "the reader ended early: \(reader.stderr)")
        let result = try await fixture.run(["prune", "--older-than", "7d"], timeout: .seconds(60))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("pruned 50 tasks finished before "), "\(result.stdout)")
        #expect(result.stderr.contains("the write-ahead log was not truncated"), "\(result.stderr)")
        #expect(try await fixture.store.roots(TaskQuery()).map(\.id) == ["fresh"])
        #expect(FileManager.default.createFile(atPath: release, contents: nil))
        #expect(try await reader.waitForExit(timeout: .seconds(120)) == 0, "\(reader.stderr)")
    }

    @Test func vacuumShrinksTheFileAndItsLog() async throws {
        let fixture = try await fixture(count: 2000, checkpointBytes: 4096)
        try await fixture.store.maintain(.passiveCheckpoint)
        let fileBefore = size(fixture.path)
        let totalBefore = fileBefore + size(fixture.path + "-wal")
        #expect(fileBefore > 8_000_000, "2,000 checkpoints of 4 KiB: \(fileBefore) bytes")

        let result = try await fixture.run(["prune", "--older-than", "7d", "--vacuum", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        struct PruneDocument: Decodable { var deleted: Int; var vacuumed: Bool; var bytesBefore: Int64; var bytesAfter: Int64 }
        let document = try decodeJSON(PruneDocument.self, from: result.stdout)
        #expect(document.deleted == 2000 && document.vacuumed)
        #expect(document.bytesBefore == totalBefore && document.bytesAfter < totalBefore / 10)

        let fileAfter = size(fixture.path)
        #expect(fileAfter < fileBefore / 10, "the file shrank from \(fileBefore) to \(fileAfter) bytes")
        #expect(size(fixture.path + "-wal") == 0, "and its WAL is empty")
        #expect(try await fixture.store.roots(TaskQuery()).map(\.id) == ["fresh"], "the store still reads the file")
    }
}
