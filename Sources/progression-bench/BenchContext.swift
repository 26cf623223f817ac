import Foundation

/// What every scenario gets: the sizes of this run, the data directory, and a log on stderr.
struct BenchContext: Sendable {
    let options: BenchOptions
    var sizes: BenchSizes { options.sizes }

    /// Writes a progress line to stderr (stdout is kept for the table or the JSON object).
    func log(_ message: String) {
        FileHandle.standardError.write(Data(("  " + message + "\n").utf8))
    }
}
