import Foundation
import ProgressionTestSupport
import Testing

/// What the demo says about a missing directory and about files it cannot read.
struct BadInputTests {
    @Test func aMissingDataDirectoryIsOneLineOnStderrAndAFailure() async throws {
        let temp = try TemporaryDirectory()
        let result = try await ChildProcess.run(
            "progression-demo", ["run", "--db", temp.file("db.sqlite"), "--data", temp.file("nowhere")], in: temp)
        #expect(result.status != 0)
        #expect(result.stderr == "progression-demo: error: the data directory '\(temp.file("nowhere"))' does not exist\n")
        #expect(result.stdout.isEmpty)
    }

    /// Root reads any file whatever its mode, so the unreadable entries are a dangling link and a FIFO.
    @Test func unreadableFilesFailTheirStepsAreNamedAndTheJobGoesOn() async throws {
        let temp = try TemporaryDirectory()
        let data = temp.url.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data.appendingPathComponent("sub"), withIntermediateDirectories: true)
        try Data("one two\nthree\n".utf8).write(to: data.appendingPathComponent("good.txt"))
        try FileManager.default.createSymbolicLink(
            atPath: data.appendingPathComponent("sub/dangling.txt").path, withDestinationPath: temp.file("missing"))
        #expect(mkfifo(data.appendingPathComponent("pipe").path, 0o644) == 0)

        let result = try await ChildProcess.run(
            "progression-demo", ["run", "--db", temp.file("db.sqlite"), "--data", data.path], in: temp)
        #expect(result.status == 1)
        #expect(result.stdout.contains("Failed: 2 files could not be read"))
        #expect(result.stdout.contains("sub/dangling.txt: cannot read 'sub/dangling.txt': No such file or directory"))
        #expect(result.stdout.contains("pipe: cannot read 'pipe': not a regular file"))
        #expect(result.stderr.contains("2 files could not be read: pipe, sub/dangling.txt"))
        let manifest = try String(contentsOfFile: temp.file("data.manifest.tsv"), encoding: .utf8)
        #expect(manifest.contains("good.txt\t14\t2\t3\t"))
        #expect(manifest.contains("sub/dangling.txt\t-\t-\t-\tERROR cannot read 'sub/dangling.txt'"))
    }
}
