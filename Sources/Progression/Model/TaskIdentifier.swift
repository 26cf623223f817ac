import Foundation
import Synchronization

/// Generates task ids: UUID version 7 strings (RFC 9562), which begin with the creation time in milliseconds, so that
/// new rows land at the end of the primary-key B-tree instead of at random pages, and sort by age.
///
/// The random bits come from a generator seeded once from the system's entropy, not from a system call per id.
enum TaskIdentifier {
    private static let generator = Mutex(SplitMix64())

    /// A new lowercase UUIDv7 string, e.g. `0193a6b2-5f3e-7c1a-9b2d-4e8f0a1b2c3d`.
    static func make(at date: Date = Date()) -> String {
        let milliseconds = UInt64(max(0, date.timeIntervalSince1970 * 1000))
        let (high, low) = generator.withLock { ($0.next(), $0.next()) }
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - index))) }
        for index in 6..<16 {
            let word = index < 11 ? high : low
            bytes[index] = UInt8(truncatingIfNeeded: word >> (8 * (index % 8)))
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x70  // version 7
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // variant 10
        let hex = bytes.map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }.joined()
        let characters = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(characters[$0]) }.joined(separator: "-")
    }
}

/// SplitMix64: a small, fast generator; reproducible for a seed (the crash test's kill times, the stress test's
/// random control), or seeded from the system's entropy.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    package init(seed: UInt64) {
        state = seed
    }

    package init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
