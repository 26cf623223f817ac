import Foundation
import Synchronization

/// A root's code: it returns its result, encoded (a job's `Codable` output), or `nil`.
typealias RootBody = @Sendable (any TaskContext) async throws -> Data?

/// A registered job kind: its default options, its limit across the fleet, and the code that runs an encoded input
/// and returns its encoded result.
struct RegisteredKind: Sendable {
    var options: TaskOptions
    var maxConcurrent: Int?
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

    /// The kinds with a limit across the fleet: their jobs start only through claims, which count them.
    var limited: Set<String> {
        kinds.withLock { Set($0.filter { $0.value.maxConcurrent != nil }.keys) }
    }

    /// The code that runs a stored root: its kind's, given its input; `nil` for a closure task or an unknown kind.
    func body(for record: TaskRecord) -> RootBody? {
        guard let name = record.kind, let kind = kind(name) else { return nil }
        let input = record.input ?? Data("null".utf8)
        return { context in try await kind.run(input, context) }
    }
}
