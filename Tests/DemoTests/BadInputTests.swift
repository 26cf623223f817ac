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

    /// Issue 35: a job whose manifest path names something other than a regular file (as root, `/dev/null` became a
    /// regular file) fails before reading anything, saying why, and leaves that path as it was. A pipe and a directory
    /// stand for `/dev/null` here (the same check: anything but a regular file); the job is not retried.
    @Test(arguments: ["pipe", "directory"])
    func aManifestPathThatIsNotARegularFileIsRefusedAndLeftAsItWas(what: String) async throws {
        let temp = try TemporaryDirectory()
        let data = temp.url.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try Data("one two\n".utf8).write(to: data.appendingPathComponent("a.txt"))
        let target = temp.file("target")
        if what == "pipe" {
            #expect(mkfifo(target, 0o644) == 0)
        } else {
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
        }
        let result = try await ChildProcess.run(
            "progression-demo", ["run", "--db", temp.file("db.sqlite"), "--data", data.path, "--manifest", target],
            in: temp)
        #expect(result.status == 1)
        #expect(result.stderr.contains("the manifest path '\(target)' is a \(what), not a regular file"), "\(result.stderr)")
        var info = stat()
        #expect(lstat(target, &info) == 0)
        #expect((info.st_mode & S_IFMT) == (what == "pipe" ? S_IFIFO : S_IFDIR))
    }
}
