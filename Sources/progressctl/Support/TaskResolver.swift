import Foundation
import Progression

extension SQLiteTaskStore {
    /// The task whose id is `idOrPrefix`, or the only one whose id begins with it.
    ///
    /// - Throws: ``CLIError`` "no task with id 'x'", or one listing the candidates when the prefix is ambiguous.
    func resolveTask(_ idOrPrefix: String) async throws -> TaskRecord {
        try await checked { store in
            if let exact = try await store.task(id: idOrPrefix) { return exact }
            let candidates = idOrPrefix.isEmpty ? [] : try await store.taskIDs(withPrefix: idOrPrefix, limit: 11)
            switch candidates.count {
            case 0:
                throw CLIError("no task with id '\(idOrPrefix)'")
            case 1:
                guard let task = try await store.task(id: candidates[0]) else {
                    throw CLIError("no task with id '\(idOrPrefix)'")
                }
                return task
            default:
                let shown = candidates.prefix(10).joined(separator: ", ")
                let more = candidates.count > 10 ? ", …" : ""
                throw CLIError("id prefix '\(idOrPrefix)' is ambiguous: it matches \(shown)\(more)")
            }
        }
    }
}
