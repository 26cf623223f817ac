import ArgumentParser
import Foundation
import Progression

extension Progressctl {
    /// Lists root tasks, newest first.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List tasks (roots), newest first.",
            discussion: """
                Examples:
                  progressctl list
                  progressctl list --status failed --status cancelled --kind import
                  progressctl list --status running,paused --since 30m --limit 10
                  progressctl list --since 2026-01-31 --json
                """)

        @OptionGroup var options: GlobalOptions

        @Option(name: .long, help: ArgumentHelp("Only these statuses (repeat, or a comma list): pending, running, paused, completed, failed, cancelled.", valueName: "status"))
        var status: [String] = []

        @Option(name: .long, help: "Only this job kind.")
        var kind: String?

        @Option(name: .long, help: ArgumentHelp("Only tasks created within a duration (30m, 12h, 7d) or since an ISO-8601 date.", valueName: "duration|date"))
        var since: String?

        @Option(name: .long, parsing: .unconditional, help: "At most this many tasks.")
        var limit: Int = 50

        @Option(name: .long, parsing: .unconditional, help: "Skip this many tasks first.")
        var offset: Int = 0

        func run() async throws {
            let statuses = try InputParsing.statuses(status)
            let createdSince = try since.map { try InputParsing.since($0, option: "--since") }
            guard limit >= 0 else { throw CLIError.usage("--limit must be 0 or more") }
            guard offset >= 0 else { throw CLIError.usage("--offset must be 0 or more") }
            let store = try options.openStore(readOnly: true)
            let roots = try await store.checked {
                try await $0.roots(TaskQuery(statuses: statuses, kind: kind, createdSince: createdSince, limit: limit, offset: offset))
            }
            if options.json {
                try JSONOutput.print(roots.map { TaskJSON($0) })
                return
            }
            if roots.isEmpty {
                Terminal.standardError("no tasks")
                return
            }
            let rows = roots.map { task in
                [
                    task.id.escapedForTerminal, task.name.escapedForTerminal, task.kind?.escapedForTerminal ?? "-",
                    Format.status(task.status), Format.bar(task.progress, width: 10),
                    task.step?.escapedForTerminal ?? "-", "\(task.attempt)", Format.time(task.updatedAt),
                ]
            }
            for line in Format.table(
                header: ["ID", "NAME", "KIND", "STATUS", "PROGRESS", "STEP", "ATTEMPT", "UPDATED"], rows: rows)
            {
                Terminal.output(line)
            }
        }
    }
}
