import Foundation

/// The JSON coders of a job's input, output, steps' results and checkpoints, made once: each job used to make an
/// encoder and a decoder of its own, about 9 % of a job's instructions on the in-memory store (callgrind, issue 38's
/// measure in docs/performance.md). Foundation's coders are `Sendable` and keep no state between calls; their options
/// are never changed here.
enum JobCoding {
    static let encoder = JSONEncoder()
    static let decoder = JSONDecoder()
}
