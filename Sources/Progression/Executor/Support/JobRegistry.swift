import Foundation
import Synchronization

/// A root's code: it returns its result, encoded (a job's `Codable` output), or `nil`.
typealias RootBody = @Sendable (any TaskContext) async throws -> Data?

/// A registered job kind: its default options, its limit across the fleet, and the code that runs an encoded input
/// and returns its encoded result.
struct RegisteredKind: Sendable {
    var options: TaskOptions
    var maxConcurrent: Int?
    /// The version of its code (``JobVersion``); `nil`: it continues any job.
    var version: JobVersion?
    var run: @Sendable (Data, any TaskContext) async throws -> Data?
}

/// The job kinds an executor knows: shared by the executor (submit), recovery (rehydration) and retries.
final class JobRegistry: Sendable {
    private let kinds = Mutex<[String: RegisteredKind]>([:])

    /// Registers a kind.
    ///
    /// - Throws: ``ProgressionError/kindAlreadyRegistered(_:)`` when the kind is registered already: its code is not
    ///   replaced.
    func register(_ name: String, _ kind: RegisteredKind) throws {
        try kinds.withLock { kinds throws(ProgressionError) in
            guard kinds[name] == nil else { throw ProgressionError.kindAlreadyRegistered(name) }
            kinds[name] = kind
        }
    }

    func kind(_ name: String) -> RegisteredKind? {
        kinds.withLock { $0[name] }
    }

    var names: Set<String> {
        kinds.withLock { Set($0.keys) }
    }

    /// Every kind as the store keeps it.
    var stored: [String: StoredKind] {
        kinds.withLock { $0.mapValues { StoredKind(options: $0.options, maxConcurrent: $0.maxConcurrent) } }
    }

    /// The kinds that declare a version, with it: claims record it on the jobs they take and leave those it cannot
    /// continue (``JobVersion/Otherwise/leave``).
    var versions: [String: JobVersion] {
        kinds.withLock { $0.compactMapValues(\.version) }
    }

    /// The kinds with a limit across the fleet: their jobs start only through claims, which count them.
    var limited: Set<String> {
        kinds.withLock { Set($0.filter { $0.value.maxConcurrent != nil }.keys) }
    }

    /// The code that runs a stored root: its kind's, given its input; `nil` for a closure task or an unknown kind. A
    /// job that a version the kind's code cannot continue began fails with ``IncompatibleJobVersionError`` before any
    /// of it runs (claims leave such jobs when the kind says ``JobVersion/Otherwise/leave``: this meets those the kind
    /// fails, and is the last guard for the others).
    func body(for record: TaskRecord) -> RootBody? {
        guard let name = record.kind, let kind = kind(name) else { return nil }
        if let version = kind.version, !version.canContinue(record.version) {
            let error = IncompatibleJobVersionError(
                kind: name, jobVersion: record.version ?? "", workerVersion: version)
            return { _ in throw error }
        }
        let input = record.input ?? Data("null".utf8)
        return { context in try await kind.run(input, context) }
    }
}
