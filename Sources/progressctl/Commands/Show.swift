import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Shows a task and the tree below it.
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a task's tree: progress, status, step, attempt, error and times of every node.",
            discussion: """
                For the task asked for it also prints its idempotency key, its input and its result, as indented \
                JSON (at most \(maximumJSONLines) lines each). --json gives every node's fields, with `input` and \
                `result` as JSON values.

                Examples:
                  progressctl show 8k3fq2xa
                  progressctl show 8k3fq2xa/download
                  progressctl show 8k3fq2xa --json
                """)

        /// The most lines of an input or result printed for people.
        static let maximumJSONLines = 100

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The task id, or a unique prefix of it.")
        var id: String

        func run() async throws {
            let store = try options.openStore(readOnly: true)
            let task = try await store.resolveTask(id)
            let nodes = try await store.checked { try await $0.tree(of: task.id) }
            let depths = TaskJSON.depths(of: nodes)
            let failed = nodes.filter { !$0.isRoot && $0.status == .failed }.count
            if options.json {
                try JSONOutput.print(
                    nodes.map { TaskJSON($0, depth: depths[$0.id] ?? 0, failedSteps: $0.isRoot ? failed : 0) })
                return
            }
            for node in nodes {
                let indent = String(repeating: "  ", count: depths[node.id] ?? 0)
                let state = Format.state(node, failedSteps: node.isRoot && node.status == .completed ? failed : 0)
                var head = "\(indent)\(Terminal.paint(node.name.escapedForTerminal, .bold))  \(Format.bar(node.progress))  \(state)"
                if let step = node.step { head += "  step: \(step.escapedForTerminal)" }
                let rates = ProgressRates()
                if let rate = rates.rate(of: node) {
                    head += "  rate \(Format.rate(rate))  left \(Format.timeLeft(rates.timeLeft(of: node)))"
                }
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
                if let wait = Format.wait(node) {
                    times += "  \(wait)"
                } else if let next = node.nextAttemptAt {
                    times += "  \(node.isRoot ? "next attempt" : "wakes") \(Format.time(next))"
                }
                Terminal.output(times)
                if node.id == task.id { printPayload(of: node, indent: indent + "    ") }
                if node.errorType != nil || node.errorDescription != nil {
                    let type = node.errorType.map { "\($0): " } ?? ""
                    let text = "error: \(type)\(node.errorDescription ?? "")".escapedForTerminal
                    Terminal.output("\(indent)    " + Terminal.paint(text, .red))
                }
            }
        }

        /// The idempotency key, input and result of `node`, when it has them.
        private func printPayload(of node: TaskRecord, indent: String) {
            if let key = node.idempotencyKey { Terminal.output("\(indent)idempotency key \(key.escapedForTerminal)") }
            for (label, data) in [("input", node.input), ("result", node.result)] {
                guard let value = JSONValue.stored(data) else { continue }
                Terminal.output("\(indent)\(label):")
                let lines = value.prettyText.split(separator: "\n", omittingEmptySubsequences: false)
                for line in lines.prefix(Self.maximumJSONLines) {
                    Terminal.output("\(indent)  \(String(line).escapedForTerminal)")
                }
                if lines.count > Self.maximumJSONLines {
                    Terminal.output("\(indent)  … \(Format.count(lines.count - Self.maximumJSONLines)) more lines (--json shows all)")
                }
            }
        }
    }
}
