import ArgumentParser
import Foundation
import Progression

extension Progressctl {
    /// Shows a task and the tree below it.
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a task's tree: progress, status, step, attempt, error and times of every node.",
            discussion: """
                Examples:
                  progressctl show 3f2a
                  progressctl show 3f2a --json
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The task id, or a unique prefix of it.")
        var id: String

        func run() async throws {
            let store = try options.openStore(readOnly: true)
            let task = try await store.resolveTask(id)
            let nodes = try await store.checked { try await $0.tree(of: task.id) }
            let depths = Self.depths(of: nodes)
            if options.json {
                try JSONOutput.print(nodes.map { TaskJSON($0, depth: depths[$0.id] ?? 0) })
                return
            }
            for node in nodes {
                let indent = String(repeating: "  ", count: depths[node.id] ?? 0)
                var head = "\(indent)\(Terminal.paint(node.name.escapedForTerminal, .bold))  \(Format.bar(node.progress))  \(Format.status(node.status))"
                if let step = node.step { head += "  step: \(step.escapedForTerminal)" }
                head += "  attempt \(node.attempt)"
                if node.interruptions > 0 { head += "  interrupted \(node.interruptions)×" }
                Terminal.output(head)
                var detail = "\(indent)    id \(node.id.escapedForTerminal)"
                if let kind = node.kind { detail += "  kind \(kind.escapedForTerminal)" }
                if let owner = node.ownerID, node.isRoot { detail += "  owner \(owner.escapedForTerminal)" }
                if let checkpoint = node.checkpoint { detail += "  checkpoint \(Format.bytes(Int64(checkpoint.count)))" }
                Terminal.output(detail)
                var times = "\(indent)    created \(Format.time(node.createdAt))"
                if let started = node.startedAt { times += "  started \(Format.time(started))" }
                times += "  updated \(Format.time(node.updatedAt))"
                if let finished = node.finishedAt { times += "  finished \(Format.time(finished))" }
                if let next = node.nextAttemptAt { times += "  next attempt \(Format.time(next))" }
                Terminal.output(times)
                if node.errorType != nil || node.errorDescription != nil {
                    let type = node.errorType.map { "\($0): " } ?? ""
                    let text = "error: \(type)\(node.errorDescription ?? "")".escapedForTerminal
                    Terminal.output("\(indent)    " + Terminal.paint(text, .red))
                }
            }
        }

        /// Depth of each node below the first (0).
        static func depths(of nodes: [TaskRecord]) -> [String: Int] {
            var depths: [String: Int] = [:]
            for node in nodes {
                depths[node.id] = node.parentID.flatMap { depths[$0] }.map { $0 + 1 } ?? 0
            }
            return depths
        }
    }
}
