import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

extension Progressctl {
    /// Prints the event timeline of a task and the nodes below it.
    struct History: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the history of a task and its subtree, oldest first.",
            discussion: """
                Filters: --task narrows it to one subtask of the tree and the nodes below it (its name, its path of \
                names from the root, or its id), --event to some kinds of event, --since to the recent ones; --tail \
                keeps the last N of what remains (still printed oldest first).

                Event kinds: \(TaskEvent.Kind.allCases.map(\.rawValue).joined(separator: ", ")).

                Examples:
                  progressctl history 8k3fq2xa
                  progressctl history 8k3fq2xa --tail 20
                  progressctl history 8k3fq2xa --event failed --event retried --since 1d
                  progressctl history 8k3fq2xa --task download --json
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The task id, or a unique prefix of it (or ROOT/NAME for a subtask).")
        var id: String

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Only the last N events.", valueName: "n"))
        var tail: Int?

        @Option(name: .long, help: ArgumentHelp("Only events within a duration (30m, 12h, 7d) or since an ISO-8601 date.", valueName: "duration|date"))
        var since: String?

        @Option(name: .customLong("event"), help: ArgumentHelp("Only events of this kind (repeat, or a comma list).", valueName: "kind"))
        var events: [String] = []

        @Option(name: .long, help: ArgumentHelp("Only this subtask of the tree (a name, a path of names, or an id) and the nodes below it.", valueName: "task"))
        var task: String?

        func run() async throws {
            if let tail, tail < 0 { throw CLIError.usage("--tail must be 0 or more") }
            let kinds = try Self.kinds(events)
            let eventsSince = try since.map { try InputParsing.since($0, option: "--since") }
            let store = try options.openStore(readOnly: true)
            var top = try await store.resolveTask(id)
            if let task { top = try await Self.resolve(task, in: top, store: store) }
            let nodes = try await store.checked { [top] in try await $0.tree(of: top.id) }
            let names = Dictionary(nodes.map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
            var query = EventQuery(taskID: top.id, since: eventsSince, kinds: kinds)
            var history: [TaskEvent] = []
            if let tail {
                query.limit = tail
                query.tail = true
                history = try await store.checked { [query] in try await $0.events(query) }
            } else {
                while true {
                    let page = try await store.checked { [query] in try await $0.events(query) }
                    history += page
                    guard page.count == query.limit, let last = page.last?.sequence else { break }
                    query.after = last
                }
            }
            if options.json {
                try JSONOutput.print(history.map { EventJSON($0, names: names) })
                return
            }
            let rows = history.map { event -> [String] in
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

        /// Event kinds from repeated `--event` options, each possibly a comma list; `nil` when none is given.
        static func kinds(_ values: [String]) throws -> Set<TaskEvent.Kind>? {
            guard !values.isEmpty else { return nil }
            var kinds = Set<TaskEvent.Kind>()
            for name in values.flatMap({ $0.split(separator: ",") }).map({ $0.trimmingCharacters(in: .whitespaces) })
            where !name.isEmpty {
                guard let kind = TaskEvent.Kind(rawValue: name.lowercased()) else {
                    throw CLIError.usage(
                        "invalid event kind '\(name)' (expected one of: \(TaskEvent.Kind.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
                kinds.insert(kind)
            }
            return kinds
        }

        /// The subtask of `top`'s tree that `reference` names: a task id in the tree, else a name or path of names
        /// below the tree's root.
        static func resolve(_ reference: String, in top: TaskRecord, store: OperatorStore) async throws -> TaskRecord {
            if let exact = try await store.checked({ try await $0.task(id: reference) }) {
                guard exact.rootID == top.rootID else {
                    throw CLIError("task '\(reference.escapedForTerminal)' is not part of '\(top.rootID)'")
                }
                return exact
            }
            return try await store.resolveTask("\(top.rootID)/\(reference)")
        }
    }
}
