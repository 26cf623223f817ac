import Foundation

/// The JSON coders of a job's input, output, steps' results and checkpoints, made once: each job used to make an
/// encoder and a decoder of its own, about 1,700 instructions (0.85 % of a job on the in-memory store; callgrind,
/// docs/performance.md). Foundation's coders are `Sendable` and keep no state between calls; their options are never
/// changed here.
enum JobCoding {
    static let encoder = JSONEncoder()
    static let decoder = JSONDecoder()
}
