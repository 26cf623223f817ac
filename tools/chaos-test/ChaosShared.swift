import ArgumentParser
import Foundation
import Progression

#if canImport(Glibc)
import Glibc
#endif

/// The input of a chaos job: `steps` steps of `substeps` substeps each, `milliseconds` of work per substep.
struct ChaosInput: Codable, Sendable {
    var steps = 3
    var substeps = 2
    var milliseconds = 60
}

/// An append-only file of what the workers' code did, one line each, written with `O_APPEND` in one `write`: whole
/// lines survive any kill. `begin K` when a substep's code starts, `committed K` once its push returned (its end was
/// committed), `owner PID ID` when a worker starts.
struct Ledger: Sendable {
    let path: String

    func append(_ line: String) {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o666)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }

    func lines() -> [Substring] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n")
    }

    /// Substeps begun again after their end was committed (by any worker), and substeps begun more than once
    /// before (an uncommitted run that another worker or a later run redid: allowed).
    func reruns() -> (afterCommit: [String], uncommitted: Int) {
        var committed: Set<Substring> = []
        var begins: [Substring: Int] = [:]
        var afterCommit: [String] = []
        for line in lines() {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { continue }
            switch parts[0] {
            case "begin":
                if committed.contains(parts[1]) { afterCommit.append(String(parts[1])) }
                begins[parts[1], default: 0] += 1
            case "committed":
                committed.insert(parts[1])
            default:
                break
            }
        }
        let repeated = begins.values.reduce(0) { $0 + max(0, $1 - 1) }
        return (afterCommit, repeated - afterCommit.count)
    }

    /// The owner ids of the workers, by process id.
    func owners() -> [Int32: String] {
        var owners: [Int32: String] = [:]
        for line in lines() where line.hasPrefix("owner ") {
            let parts = line.split(separator: " ")
            if parts.count == 3, let pid = Int32(parts[1]) { owners[pid] = String(parts[2]) }
        }
        return owners
    }
}

/// A failure of the chaos test's setup, in words.
struct ChaosFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Random numbers from a seed (SplitMix64): the same seed gives the same run of disturbances.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Writes a line to stderr.
func report(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
