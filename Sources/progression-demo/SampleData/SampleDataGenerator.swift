import Foundation

/// Writes the demo's sample data set: text files of pseudo-random words in a few folders, the same bytes on every
/// machine for a given size (a seeded SplitMix64 generator), so that manifests can be compared.
///
/// ```swift
/// let generator = SampleDataGenerator(megabytes: 8)
/// try generator.write(to: URL(fileURLWithPath: "/tmp/sample")) { written, total in … }
/// ```
struct SampleDataGenerator: Sendable {
    /// The folders files are spread over.
    static let folders = ["letters", "logs", "notes", "poems", "reports", "stories"]
    static let singular = ["letter", "log", "note", "poem", "report", "story"]
    static let vocabulary: [[UInt8]] = """
        the of and to in is that it was for on are as with his they at be this from have or by one had not but what \
        all were when we there can an your which their said if do will each about how up out them then she many some \
        so these would other into has more her two like him see time could no make than first been its who now people \
        my made over did down only way find use may water long little very after words called just where most know \
        progress task queue batch resume crash step checkpoint lease owner worker journal ledger manifest checksum
        """.split(separator: " ").map { Array($0.utf8) }

    /// The data set's total size in megabytes (10⁶ bytes).
    var megabytes: Int
    var seed: UInt64 = 0x5eed_2024

    /// The files to write: relative path and size, spread over ``folders`` with sizes from 64 kB to 12 MB.
    func plan() -> [(path: String, bytes: Int)] {
        var random = SplitMix64(seed: seed)
        var files: [(String, Int)] = []
        var remaining = max(megabytes, 1) * 1_000_000
        var counters = [Int](repeating: 0, count: Self.folders.count)
        while remaining > 0 {
            let folder = Int(random.next() % UInt64(Self.folders.count))
            // Mostly small files, some large ones that take several checkpoints.
            let size = random.next() % 4 == 0
                ? 4_000_000 + Int(random.next() % 8_000_000)
                : 64_000 + Int(random.next() % 1_900_000)
            let bytes = min(size, remaining)
            counters[folder] += 1
            let name = Self.folders[folder] + "/" + Self.singular[folder] + "-"
                + String(format: "%04d", counters[folder]) + ".txt"
            files.append((name, bytes))
            remaining -= bytes
        }
        return files
    }

    /// Writes every file of ``plan()`` below `directory` (created), reporting bytes written after each file.
    func write(to directory: URL, progress: (Int, Int) -> Void = { _, _ in }) throws {
        let files = plan()
        let total = files.reduce(0) { $0 + $1.bytes }
        var written = 0
        for folder in Self.folders {
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        for (index, file) in files.enumerated() {
            var random = SplitMix64(seed: seed &+ UInt64(index) &* 0x9e37_79b9_7f4a_7c15)
            let data = Self.text(bytes: file.bytes, random: &random)
            try data.write(to: directory.appendingPathComponent(file.path))
            written += file.bytes
            progress(written, total)
        }
    }

    /// `bytes` bytes of lines of words, ending with a newline.
    static func text(bytes: Int, random: inout SplitMix64) -> Data {
        var data = Data(count: bytes)
        data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in
            var position = 0
            var wordsLeftInLine = 0
            while position < bytes {
                let draw = random.next()
                if wordsLeftInLine == 0 {
                    wordsLeftInLine = 3 + Int(draw >> 59)  // 3...34 words
                    if position > 0 {
                        buffer[position - 1] = 0x0a
                    }
                }
                let word = vocabulary[Int(draw % UInt64(vocabulary.count))]
                let count = min(word.count, bytes - position)
                word.withUnsafeBytes { source in
                    buffer.baseAddress!.advanced(by: position).copyMemory(from: source.baseAddress!, byteCount: count)
                }
                position += count
                if position < bytes {
                    buffer[position] = 0x20
                    position += 1
                }
                wordsLeftInLine -= 1
            }
            if bytes > 0 { buffer[bytes - 1] = 0x0a }
        }
        return data
    }
}

/// A small, fast, seedable pseudo-random generator (SplitMix64): the same seed gives the same numbers everywhere.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var value = state
        value = (value ^ (value >> 30)) &* 0xbf58_476d_1ce4_e5b9
        value = (value ^ (value >> 27)) &* 0x94d0_49bb_1331_11eb
        return value ^ (value >> 31)
    }
}
