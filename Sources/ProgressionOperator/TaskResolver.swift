import Foundation
import Progression

extension OperatorStore {
    /// The task a person means by `reference`:
    /// - an exact id (a root, or a subtask such as `8k3fq2xa.17`);
    /// - a unique prefix of a **root's** id (subtasks share their root's prefix, so they are not candidates);
    /// - `ROOT/NAME`: the subtask of that root (given by id or prefix) named NAME, or whose path of names from the root
    ///   is NAME (`8k3fq2xa/letters//letters/a.txt` as well as `8k3fq2xa/letters/a.txt` when the name is unique).
    ///
    /// - Throws: ``CLIError`` "no task with id 'x'", or one listing the candidates when the reference is ambiguous.
    package func resolveTask(_ reference: String) async throws -> TaskRecord {
        try await checked { store in
            if let exact = try await store.task(id: reference) { return exact }
            if let slash = reference.firstIndex(of: "/") {
                let root = try await store.resolveRoot(String(reference[..<slash]), whole: reference)
                return try await store.resolveStep(String(reference[reference.index(after: slash)...]), in: root)
            }
            return try await store.resolveRoot(reference, whole: reference)
        }
    }

    /// The root whose id is `reference` or begins with it.
    private func resolveRoot(_ reference: String, whole: String) async throws -> TaskRecord {
        if let exact = try await task(id: reference) {
            guard exact.isRoot else {
                throw CLIError("'\(reference.escapedForTerminal)' is a subtask; address subtasks through their root (ROOT/NAME)")
            }
            return exact
        }
        let candidates = reference.isEmpty ? [] : try await taskIDs(withPrefix: reference, rootsOnly: true, limit: 11)
        switch candidates.count {
        case 0:
            throw CLIError("no task with id '\(whole.escapedForTerminal)'")
        case 1:
            guard let task = try await task(id: candidates[0]) else {
                throw CLIError("no task with id '\(whole.escapedForTerminal)'")
            }
            return task
        default:
            let shown = candidates.prefix(10).joined(separator: ", ")
            let more = candidates.count > 10 ? ", …" : ""
            throw CLIError("id prefix '\(reference.escapedForTerminal)' is ambiguous: it matches \(shown)\(more)")
        }
    }

    /// The subtask of `root` named `path`, or whose names from the root, joined by `/`, are `path`.
    private func resolveStep(_ path: String, in root: TaskRecord) async throws -> TaskRecord {
        let tree = try await tree(of: root.id)
        let byID = Dictionary(uniqueKeysWithValues: tree.map { ($0.id, $0) })
        func names(_ node: TaskRecord) -> [String] {
            var names: [String] = []
            var current: TaskRecord? = node
            while let node = current, !node.isRoot {
                names.insert(node.name, at: 0)
                current = node.parentID.flatMap { byID[$0] }
            }
            return names
        }
        var matches = tree.dropFirst().filter { $0.name == path }
        if matches.isEmpty {
            matches = tree.dropFirst().filter { names($0).joined(separator: "/") == path }
        }
        switch matches.count {
        case 0:
            throw CLIError("task '\(root.id)' (\(root.name.escapedForTerminal)) has no subtask '\(path.escapedForTerminal)'")
        case 1:
            return matches[0]
        default:
            throw CLIError(
                "task '\(root.id)' has \(matches.count) subtasks named '\(path.escapedForTerminal)': "
                    + matches.prefix(10).map(\.id).joined(separator: ", "))
        }
    }
}
