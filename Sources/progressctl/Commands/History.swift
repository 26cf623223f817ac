import ArgumentParser
import Foundation
import Progression

extension Progressctl {
    /// Prints the event timeline of a task and the nodes below it.
    struct History: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the history of a task and its subtree, oldest first.",
            discussion: """
                Examples:
                  progressctl history 3f2a
                  progressctl history 3f2a --json
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The task id, or a unique prefix of it.")
        var id: String

        /// An event as `--json` shows it.
        struct EventJSON: Codable {
            var sequence: Int64?
            var taskID: String
            var taskName: String?
            var kind: String
            var at: Date
            var attempt: Int
            var progress: Double?
            var message: String?
            var errorType: String?
        }

        func run() async throws {
            let store = try options.openStore(readOnly: true)
            let task = try await store.resolveTask(id)
            let nodes = try await store.checked { try await $0.tree(of: task.id) }
            let names = Dictionary(nodes.map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
            var events: [TaskEvent] = []
            var cursor: Int64? = nil
            while true {
                let page = try await store.checked { try await $0.events(of: task.id, after: cursor, limit: 1000) }
                events += page
                guard page.count == 1000, let last = page.last?.sequence else { break }
                cursor = last
            }
            if options.json {
                try JSONOutput.print(events.map {
                    EventJSON(sequence: $0.sequence, taskID: $0.taskID, taskName: names[$0.taskID], kind: $0.kind.rawValue,
                              at: $0.at, attempt: $0.attempt, progress: $0.progress, message: $0.message, errorType: $0.errorType)
                })
                return
            }
            let rows = events.map { event -> [String] in
                var text = event.message ?? ""
                if let type = event.errorType { text = "\(type): \(text)" }
                let kind = event.kind == .failed ? Terminal.paint(event.kind.rawValue, .red) : event.kind.rawValue
                return [Format.time(event.at), (names[event.taskID] ?? event.taskID).escapedForTerminal, kind,
                        "\(event.attempt)", Format.percent(event.progress), text.escapedForTerminal]
            }
            for line in Format.table(header: ["TIME", "TASK", "EVENT", "ATTEMPT", "PROGRESS", "MESSAGE"], rows: rows) {
                Terminal.output(line)
            }
        }
    }
}
