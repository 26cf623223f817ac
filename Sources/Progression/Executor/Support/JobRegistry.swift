import Foundation
import Synchronization

/// A registered job kind: its default options and the code that runs an encoded input.
struct RegisteredKind: Sendable {
    var options: TaskOptions
    var run: @Sendable (Data, any TaskContext) async throws -> Void
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

    /// Every kind's registered options.
    var options: [String: TaskOptions] {
        kinds.withLock { $0.mapValues(\.options) }
    }

    /// The code that runs a stored root: its kind's, given its input; `nil` for a closure task or an unknown kind.
    func body(for record: TaskRecord) -> (@Sendable (any TaskContext) async throws -> Void)? {
        guard let name = record.kind, let kind = kind(name) else { return nil }
        let input = record.input ?? Data("null".utf8)
        return { context in try await kind.run(input, context) }
    }
}
