import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// `progression-demo run`, killed half way and started again, against an uninterrupted run of the same data.
struct RunResumeTests {
    @Test func killedRunResumesSkipsFinishedFilesAndWritesTheSameManifest() async throws {
        let temp = try TemporaryDirectory()
        // The same generated data in two folders: one run uninterrupted, one killed with SIGKILL and started again.
        let generated = try await ChildProcess.run(
            "progression-demo", ["generate", "--output", temp.file("straight"), "--size-mb", "40"], in: temp)
        #expect(generated.status == 0, "\(generated.stderr)")
        try FileManager.default.copyItem(atPath: temp.file("straight"), toPath: temp.file("killed"))
        let fileCount = try FileManager.default.subpathsOfDirectory(atPath: temp.file("killed"))
            .filter { $0.hasSuffix(".txt") }.count
        #expect(fileCount >= 8)

        let straight = try await ChildProcess.run(
            "progression-demo", ["run", "--db", temp.file("straight.sqlite"), "--data", temp.file("straight")],
            in: temp)
        #expect(straight.status == 0, "\(straight.stderr)")

        // Slowed down (2 s before each file, two files at a time: about 14 s in all) so that it can be killed between
        // files even when the machine is so busy running other tests that this one's polls come late (at 600 ms a
        // file, a loaded CI run's poll came after the last file).
        let db = temp.file("killed.sqlite")
        let first = try ChildProcess(
            "progression-demo", ["run", "--db", db, "--data", temp.file("killed"), "--file-delay-ms", "2000"],
            in: temp)
        try await poll("the job's submission") { first.stdout.contains("Job ") }
        let store = try SQLiteTaskStore(path: db)
        var completedBeforeKill = 0
        try await poll("some file steps to complete") {
            guard let job = try await store.roots(TaskQuery(kind: "checksum")).first else { return false }
            let files = try await DemoJobTree.read(job.id, from: store).filter { $0.name.hasSuffix(".txt") }
            completedBeforeKill = files.filter { $0.status == .completed }.count
            return completedBeforeKill >= 2
        }
        first.signal(SIGKILL)
        #expect(try await first.waitForExit(timeout: .seconds(60)) == SIGKILL)
        #expect(completedBeforeKill < fileCount)

        let second = try await ChildProcess.run(
            "progression-demo", ["run", "--db", db, "--data", temp.file("killed")], in: temp)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout.contains("Resuming job"))
        let skipped = try #require(
            second.stdout.firstMatch(of: /skipped (\d+) of (\d+) files/).map { (Int($0.1)!, Int($0.2)!) })
        #expect(skipped.0 >= 1)
        #expect(skipped.0 >= completedBeforeKill)
        #expect(skipped.0 < skipped.1)
        #expect(skipped.1 == fileCount)

        let expected = try String(contentsOfFile: temp.file("straight.manifest.tsv"), encoding: .utf8)
        let resumed = try String(contentsOfFile: temp.file("killed.manifest.tsv"), encoding: .utf8)
        #expect(resumed == expected)
        #expect(expected.split(separator: "\n").count == fileCount + 1)
    }

    /// Issue 22, defect 9: `run --data data` stored `data`, so a worker resuming the job in another directory read
    /// that directory's files. The stored input is absolute and canonical.
    @Test func aRelativeDataPathIsStoredAbsoluteAndCanonical() async throws {
        let temp = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: temp.file("real"), withIntermediateDirectories: true)
        try Data("hello world\n".utf8).write(to: temp.url.appendingPathComponent("real/a.txt"))
        try FileManager.default.createSymbolicLink(atPath: temp.file("data"), withDestinationPath: temp.file("real"))
        let result = try await ChildProcess.run(
            "progression-demo", ["run", "--db", "db.sqlite", "--data", "./data/", "--manifest", "out.tsv"], in: temp)
        #expect(result.status == 0, "\(result.stderr)")
        let store = try SQLiteTaskStore(path: temp.file("db.sqlite"))
        let root = try #require(try await store.roots(TaskQuery(kind: "checksum")).first)
        let stored = try #require(try await store.task(id: root.id)?.input)
        struct Input: Decodable {
            var directory: String
            var manifest: String?
        }
        let input = try JSONDecoder().decode(Input.self, from: stored)
        let real = URL(fileURLWithPath: temp.file("real")).resolvingSymlinksInPath().path
        #expect(input.directory == real)
        #expect(input.manifest == URL(fileURLWithPath: temp.file("out.tsv")).resolvingSymlinksInPath().path)
        await store.close()
    }

    @Test func aSecondRunAfterCompletionStartsANewJob() async throws {
        let temp = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: temp.file("data"), withIntermediateDirectories: true)
        try Data("hello world\n".utf8).write(to: temp.url.appendingPathComponent("data/a.txt"))
        let arguments = ["run", "--db", temp.file("db.sqlite"), "--data", temp.file("data")]
        let first = try await ChildProcess.run("progression-demo", arguments, in: temp)
        let second = try await ChildProcess.run("progression-demo", arguments, in: temp)
        #expect(first.status == 0 && second.status == 0, "\(first.stderr) \(second.stderr)")
        #expect(!second.stdout.contains("Resuming"))
        let manifest = try String(contentsOfFile: temp.file("data.manifest.tsv"), encoding: .utf8)
        #expect(manifest == "# path\tbytes\tlines\twords\tfnv1a64\na.txt\t12\t1\t2\t782e1488cd5a68b7\n")
        let store = try SQLiteTaskStore(path: temp.file("db.sqlite"))
        #expect(try await store.roots(TaskQuery(kind: "checksum")).count == 2)
    }
}
