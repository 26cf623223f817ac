import Foundation

/// What every scenario gets: the sizes of this run, the data directory, and a log on stderr.
struct BenchContext: Sendable {
    let options: BenchOptions
    var sizes: BenchSizes { options.sizes }

    /// Whether a scenario of `keys` measures `key` in this run: every key, unless `--only` names some of them and not
    /// this one.
    func runs(_ key: String, among keys: [String]) -> Bool {
        let named = keys.filter(options.only.contains)
        return named.isEmpty || named.contains(key)
    }

    /// Writes a progress line to stderr (stdout is kept for the table or the JSON object).
    func log(_ message: String) {
        FileHandle.standardError.write(Data(("  " + message + "\n").utf8))
    }
}
