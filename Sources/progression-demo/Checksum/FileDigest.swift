import Foundation

/// What the demo computes for one file, in one pass over its bytes: an FNV-1a 64 checksum and `wc`'s counts.
///
/// The state can be stopped after any chunk, stored as a checkpoint and continued later: feeding the same bytes in
/// any chunking gives the same result.
///
/// ```swift
/// var digest = FileDigest()
/// digest.update(Array("hello world\n".utf8))
/// digest.lines     // 1
/// digest.words     // 2
/// digest.checksum  // "782e1488cd5a68b7"
/// ```
struct FileDigest: Codable, Sendable, Hashable {
    static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    static let prime: UInt64 = 0x0000_0100_0000_01b3

    /// Bytes fed so far: where reading continues.
    var bytes: Int64 = 0
    var lines: Int64 = 0
    var words: Int64 = 0
    /// The FNV-1a 64 state.
    var hash: UInt64 = Self.offsetBasis
    /// Whether the last byte fed was part of a word (a word may span chunks).
    var inWord = false

    /// The checksum as 16 hexadecimal digits.
    var checksum: String {
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Feeds the next bytes of the file.
    mutating func update(_ buffer: UnsafeRawBufferPointer) {
        var hash = hash
        var lines = lines
        var words = words
        var inWord = inWord
        for byte in buffer {
            hash = (hash ^ UInt64(byte)) &* Self.prime
            // Whitespace as `wc` (C locale) sees it: space, \t, \n, \v, \f, \r.
            let isSpace = byte == 0x20 || (byte >= 0x09 && byte <= 0x0d)
            if byte == 0x0a { lines &+= 1 }
            if !isSpace && !inWord { words &+= 1 }
            inWord = !isSpace
        }
        self.hash = hash
        self.lines = lines
        self.words = words
        self.inWord = inWord
        bytes += Int64(buffer.count)
    }

    /// Feeds bytes from an array (tests, small inputs).
    mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }
}
