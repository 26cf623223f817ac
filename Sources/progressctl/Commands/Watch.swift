import ArgumentParser
import Foundation
import Progression

extension Progressctl {
    /// Follows tasks live until they finish.
    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Follow tasks live until they finish (or Ctrl-C).",
            discussion: """
                Polls the database about ten times a second and does no work while nothing changed. On a terminal \
                the tree is redrawn in place; otherwise one line is printed per change: id, status, percent, step. \
                Without an id it follows every pending, running or paused task, and tasks that start meanwhile. \
                Exits 0 when every watched task completed, 1 when one failed or was cancelled.

                Examples:
                  progressctl watch
                  progressctl watch 3f2a
                  progressctl watch 3f2a | tee progress.log
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The task id, or a unique prefix of it (default: every unfinished task).")
        var id: String?

        @Option(name: .long, help: ArgumentHelp("Seconds between polls.", valueName: "seconds"))
        var interval: Double = 0.1

        func run() async throws {
            guard interval > 0, interval.isFinite else { throw CLIError.usage("--interval must be more than 0 seconds") }
            let store = try options.openStore(readOnly: true)
            var watched: [String] = []
            if let id { watched = [try await store.resolveTask(id).id] }
            let redraw = Terminal.isInteractive && !options.json
            var lastCounter: Int64? = nil
            var lastLines = 0
            var printed: [String: String] = [:]
            while true {
                let counter = try await store.checked { try await $0.changeCounter() }
                if counter != lastCounter {
                    lastCounter = counter
                    if id == nil {
                        // Every unfinished root, and the ones already watched (to show how they ended).
                        let unfinished = try await store.checked {
                            try await $0.roots(TaskQuery(statuses: [.pending, .running, .paused], limit: 1000))
                        }
                        for root in unfinished.reversed() where !watched.contains(root.id) { watched.append(root.id) }
                    }
                    var trees: [[TaskRecord]] = []
                    for rootID in watched {
                        let tree = try await store.checked { try await $0.tree(of: rootID) }
                        if !tree.isEmpty { trees.append(tree) }
                    }
                    if trees.isEmpty {
                        if id != nil { throw CLIError("task '\(watched.first ?? "")' was removed") }
                        Terminal.standardError("nothing to watch: no pending, running or paused tasks")
                        return
                    }
                    let finished = trees.allSatisfy { $0[0].status.isFinished }
                    if redraw {
                        let lines = Self.frame(trees)
                        var text = lastLines > 0 ? "\u{1B}[\(lastLines)A\u{1B}[J" : ""
                        text += lines.joined(separator: "\n") + "\n"
                        Terminal.write(text)
                        lastLines = lines.count
                    } else {
                        for node in trees.joined() {
                            let line = Self.changeLine(node, json: options.json)
                            let state = "\(node.status)|\(Format.percent(node.progress))|\(node.step ?? "")"
                            if printed[node.id] != state {
                                printed[node.id] = state
                                Terminal.output(line)
                            }
                        }
                    }
                    if finished {
                        let failed = trees.filter { $0[0].status != .completed }
                        guard failed.isEmpty else {
                            throw CLIError(failed.map { "task '\($0[0].id)' \($0[0].status)" }.joined(separator: ", "))
                        }
                        return
                    }
                }
                try await Task.sleep(for: .milliseconds(Int64(interval * 1000)))
            }
        }

        /// One line per node for a redraw: indented name, bar, status, step.
        static func frame(_ trees: [[TaskRecord]]) -> [String] {
            var lines: [String] = []
            var rows: [[String]] = []
            for tree in trees {
                let depths = Show.depths(of: tree)
                for node in tree {
                    let indent = String(repeating: "  ", count: depths[node.id] ?? 0)
                    rows.append([indent + node.name, Format.bar(node.progress), Format.status(node.status),
                                 node.step ?? "", node.isRoot ? node.id : ""])
                }
            }
            lines += Format.table(header: ["TASK", "PROGRESS", "STATUS", "STEP", "ID"], rows: rows)
            lines.append(Terminal.paint("updated \(Format.time(Date())) — Ctrl-C to stop", .dim))
            return lines
        }

        /// A change as one line: `id status percent step`, or a JSON object per line with `--json`.
        static func changeLine(_ node: TaskRecord, json: Bool) -> String {
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                encoder.dateEncodingStrategy = .iso8601
                let data = (try? encoder.encode(TaskJSON(node))) ?? Data("{}".utf8)
                return String(decoding: data, as: UTF8.self)
            }
            return [node.id, node.status.rawValue, Format.percent(node.progress), node.step ?? "-"].joined(separator: " ")
        }
    }
}
