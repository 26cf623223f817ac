import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Shows a task and the tree below it.
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a task's tree across the fleet: progress, status, step, attempt, error and times of every node.",
            discussion: """
                For the task asked for it also prints its idempotency key, the version of its kind's code it began \
                under (when its kind declares one), its input and its result, as indented \
                JSON (at most \(maximumJSONLines) lines each). --json gives every node's fields, with `input` and \
                `result` as JSON values.

                A child job that the job started is a job of its own, run by any worker: its link in the tree says \
                which (id, kind, status, the worker and its host), and below it come the steps of each child job that \
                ran and has not finished (at most \(JobTreeView.expandLimit); a last line counts the others). A job \
                also lists what it waits for, the jobs it runs after and those that run after it, with their \
                status, and the signals sent to it; a child job names its parent.

                Examples:
                  progressctl show 8k3fq2xa
                  progressctl show 8k3fq2xa/download
                  progressctl show 8k3fq2xa --json
                """)

        /// The most lines of an input or result printed for people.
        static let maximumJSONLines = 100
        /// The most characters of a signal's payload printed for people.
        static let maximumPayloadCharacters = 200

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The task id, or a unique prefix of it.")
        var id: String

        func run() async throws {
            let store = try options.openStore(readOnly: true)
            let task = try await store.resolveTask(id)
            guard let view = try await store.jobTreeView(of: task.id) else {
                throw CLIError("no task with id '\(task.id.escapedForTerminal)' (it was removed)")
            }
            if options.json {
                try JSONOutput.print(view.json())
                return
            }
            let failed = view.failedSteps
            let rates = ProgressRates()
            for entry in view.entries {
                // A child job's own root: its link's lines say what it is.
                if entry.role == .childRoot { continue }
                let node = entry.record
                let indent = String(repeating: "  ", count: entry.depth)
                let state = Format.state(node, failedSteps: node.id == task.id && node.status == .completed ? failed : 0)
                var head = "\(indent)\(Terminal.paint(node.name.escapedForTerminal, .bold))  \(Format.bar(node.progress))  \(state)"
                if let step = node.step { head += "  step: \(step.escapedForTerminal)" }
                if let rate = rates.rate(of: node) {
                    head += "  rate \(Format.rate(rate))  left \(Format.timeLeft(rates.timeLeft(of: node)))"
                }
                head += "  attempt \(node.attempt)"
                if node.interruptions > 0 { head += "  interrupted \(node.interruptions)×" }
                Terminal.output(head)
                var detail = "\(indent)    id \(node.id.escapedForTerminal)"
                if let kind = node.kind { detail += "  kind \(kind.escapedForTerminal)" }
                if let owner = node.ownerID, node.isRoot { detail += "  owner \(Self.worker(owner, in: view))" }
                if let checkpoint = node.checkpoint { detail += "  checkpoint \(Format.bytes(Int64(checkpoint.count)))" }
                if node.id == task.id, let parentID = node.parentJobID {
                    detail += "  child job of \(parentID.escapedForTerminal)"
                    if let parent = view.parentJob { detail += " (\(parent.name.escapedForTerminal), \(parent.displayStatus))" }
                }
                Terminal.output(detail)
                if case .link(let child, _) = entry.role, let childID = node.childJobID {
                    Terminal.output("\(indent)    " + Self.childLine(childID, child: child, in: view))
                }
                var times = "\(indent)    created \(Format.time(node.createdAt))"
                if let started = node.startedAt { times += "  started \(Format.time(started))" }
                times += "  updated \(Format.time(node.updatedAt))"
                if let finished = node.finishedAt { times += "  finished \(Format.time(finished))" }
                if let wait = Format.wait(node) {
                    times += "  \(wait.escapedForTerminal)"
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
            if view.notExpanded > 0 {
                Terminal.output(
                    Terminal.paint(
                        "… \(Format.count(view.notExpanded)) more unfinished child job\(view.notExpanded == 1 ? "" : "s") "
                            + "not expanded (at most \(JobTreeView.expandLimit) are): progressctl show CHILD shows each", .dim))
            }
            printRelations(of: view)
        }

        /// `w1 on host-a (pid 4242)`, or the owner's id alone when it is not recorded.
        static func worker(_ ownerID: String, in view: JobTreeView) -> String {
            guard let owner = view.owners[ownerID] else { return ownerID.escapedForTerminal }
            return "\(owner.id) on \(owner.host) (pid \(owner.pid))".escapedForTerminal
        }

        /// What a link stands for: `child job 3xjggyz2 (part) running on worker w1 on host-a (pid 4242)`.
        static func childLine(_ childID: String, child: TaskRecord?, in view: JobTreeView) -> String {
            guard let child else { return "child job \(childID.escapedForTerminal) (removed)" }
            var line = "child job \(child.id.escapedForTerminal)"
            if let kind = child.kind { line += " (\(kind.escapedForTerminal))" }
            line += " \(Format.state(child))"
            if let owner = child.ownerID {
                line += child.status.isFinished ? ", ran on worker " : " on worker "
                line += worker(owner, in: view)
            } else if !child.status.isFinished {
                line += ", held by no worker"
            }
            return line
        }

        /// The job's dependencies, dependents and signals, each under its heading when there are any.
        private func printRelations(of view: JobTreeView) {
            func related(_ heading: String, _ jobs: [JobTreeView.Related]?) {
                guard let jobs, !jobs.isEmpty else { return }
                Terminal.output(Terminal.paint(heading, .bold))
                let rows = jobs.map { related -> [String] in
                    [
                        related.id.escapedForTerminal, related.job?.name.escapedForTerminal ?? "(removed)",
                        related.job?.kind?.escapedForTerminal ?? "-", related.job.map { Format.state($0) } ?? "-",
                        "if it fails: \(related.dependency.onFailure.rawValue)",
                    ]
                }
                for line in Format.table(header: ["ID", "NAME", "KIND", "STATUS", "POLICY"], rows: rows) {
                    Terminal.output("  " + line)
                }
            }
            related("runs after:", view.dependencies)
            related("jobs that run after it:", view.dependents)
            guard let signals = view.signals, !signals.isEmpty else { return }
            Terminal.output(Terminal.paint("signals:", .bold))
            let rows = signals.map { signal -> [String] in
                let taken = signal.consumedBy.map { "taken by \($0) at \(Format.time(signal.consumedAt))" } ?? "waiting to be taken"
                var payload = JSONValue.stored(signal.payload).map(\.compactText) ?? "-"
                if payload.count > Self.maximumPayloadCharacters {
                    payload = payload.prefix(Self.maximumPayloadCharacters) + "… (--json shows all)"
                }
                return [signal.name.escapedForTerminal, Format.time(signal.sentAt), taken.escapedForTerminal, payload]
            }
            for line in Format.table(header: ["NAME", "SENT", "TAKEN", "PAYLOAD"], rows: rows) {
                Terminal.output("  " + line)
            }
        }

        /// The idempotency key, version, input and result of `node`, when it has them.
        private func printPayload(of node: TaskRecord, indent: String) {
            if let key = node.idempotencyKey { Terminal.output("\(indent)idempotency key \(key.escapedForTerminal)") }
            if let version = node.version { Terminal.output("\(indent)began under version \(version.escapedForTerminal)") }
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
