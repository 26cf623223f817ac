import Foundation

/// Where the generated sample lives, and making it once: `.build/progression-demo/sample-<N>mb` when run from a
/// package checkout (as `swift run` does), else the same below the temporary directory. A finished data set is
/// reused; one is written to a `.partial` folder first and renamed when complete, so a killed generation is redone.
enum SampleDataSet {
    static func directory(megabytes: Int) -> URL {
        let workingDirectory = FileManager.default.currentDirectoryPath
        var isDirectory: ObjCBool = false
        let base: URL
        if FileManager.default.fileExists(atPath: workingDirectory + "/.build", isDirectory: &isDirectory),
            isDirectory.boolValue
        {
            base = URL(fileURLWithPath: workingDirectory + "/.build/progression-demo")
        } else {
            base = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("progression-demo")
        }
        return base.appendingPathComponent("sample-\(megabytes)mb")
    }

    /// The sample's directory, generated first when missing.
    static func ensure(megabytes: Int, progress: (Int, Int) -> Void) throws -> (directory: URL, generated: Bool) {
        let directory = directory(megabytes: megabytes)
        if FileManager.default.fileExists(atPath: directory.path) { return (directory, false) }
        let partial = directory.deletingLastPathComponent().appendingPathComponent(
            directory.lastPathComponent + ".partial-\(ProcessInfo.processInfo.processIdentifier)")
        try? FileManager.default.removeItem(at: partial)
        try SampleDataGenerator(megabytes: megabytes).write(to: partial, progress: progress)
        do {
            try FileManager.default.moveItem(at: partial, to: directory)
        } catch {
            // Another process finished first: use its copy.
            try? FileManager.default.removeItem(at: partial)
            guard FileManager.default.fileExists(atPath: directory.path) else { throw error }
        }
        return (directory, true)
    }
}
