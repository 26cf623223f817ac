import Foundation
import Synchronization

/// The ids Progression gives tasks and owners.
///
/// **Roots** get eight characters of lowercase Crockford base32 (`0-9a-z` without `i l o u`), e.g. `8k3fq2xa`: the
/// value of a per-database sequence (``TaskStoreBackend/reserveIdentifiers(_:)``), so that ids are short enough to
/// type, unique in their database, distinct in their first characters even for thousands of roots created in one
/// second, and increasing, so that new rows land at the end of the primary-key B-tree instead of at random pages.
/// An executor reserves a block of values at a time; `progressctl submit` reserves one.
///
/// **Subtasks** are `<root id>.<n>`, `n` counting the subtasks created under that root (`8k3fq2xa.17`): they sort
/// beside their root and never share a root's prefix with another root. People address them through their root
/// (`8k3fq2xa/folder/file` in progressctl).
///
/// **Owners** get eight random base32 characters. Ids given by callers (`addTask(name:id:)`) and the UUIDs of older
/// databases stay valid.
package enum TaskIdentifier {
    /// Crockford's base32 alphabet, lowercase: no `i`, `l`, `o` or `u`, which people misread.
    static let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
    /// The characters of a root id: 40 bits.
    package static let rootLength = 8

    private static let generator = Mutex(SplitMix64())

    /// The root id for a sequence value: `rootLength` base32 characters (more once the value passes 2⁴⁰).
    package static func root(_ value: Int64) -> String {
        precondition(value >= 0, "sequence values are not negative")
        var digits: [UInt8] = []
        digits.reserveCapacity(rootLength)
        var rest = UInt64(value)
        while rest > 0 || digits.count < rootLength {
            digits.append(alphabet[Int(rest & 31)])
            rest >>= 5
        }
        return String(decoding: digits.reversed(), as: UTF8.self)
    }

    /// The sequence value of a root id made by ``root(_:)``, or `nil` for another id.
    package static func sequenceValue(ofRoot id: String) -> Int64? {
        guard id.utf8.count >= rootLength, id.utf8.count <= 12 else { return nil }
        var value: Int64 = 0
        for byte in id.utf8 {
            guard let digit = alphabet.firstIndex(of: byte) else { return nil }
            value = value << 5 | Int64(digit)
        }
        return value
    }

    /// The id of the `number`th subtask created under `root`.
    package static func child(of root: String, number: Int) -> String {
        "\(root).\(number)"
    }

    /// The subtask number of a child id made by ``child(of:number:)`` under `root`, or `nil`.
    package static func childNumber(_ id: String, root: String) -> Int? {
        guard id.count > root.count + 1, id.hasPrefix(root) else { return nil }
        let rest = id.dropFirst(root.count)
        guard rest.first == "." else { return nil }
        return Int(rest.dropFirst())
    }

    /// Eight random base32 characters (an owner id).
    package static func random() -> String {
        let value = generator.withLock { $0.next() }
        return root(Int64(value >> 24))
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
