import ArgumentParser
import Foundation
import Progression

/// The filters that choose roots: `list`, and `cancel`, `retry`, `remove`, `pause` and `resume` without an id.
struct TaskFilterOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Only these statuses (repeat, or a comma list): pending, running, paused, completed, failed, cancelled.", valueName: "status"))
    var status: [String] = []

    @Option(name: .long, help: "Only this job kind.")
    var kind: String?

    @Option(name: .long, help: ArgumentHelp("Only tasks created within a duration (30m, 12h, 7d) or since an ISO-8601 date.", valueName: "duration|date"))
    var since: String?

    @Option(name: .long, help: ArgumentHelp("Only tasks created before a duration ago (12h: more than 12 hours ago) or before an ISO-8601 date.", valueName: "duration|date"))
    var until: String?

    @Option(name: .long, help: ArgumentHelp("Only tasks whose name contains this text (ASCII letters in any case).", valueName: "text"))
    var name: String?

    /// Whether any filter is given.
    var isEmpty: Bool { status.isEmpty && kind == nil && since == nil && until == nil && name == nil }

    /// The filters as a query (limit and offset left at their defaults), `now` the time durations count back from.
    ///
    /// - Throws: ``CLIError`` (a usage error) for a status, duration or date that does not parse, or a `--since`
    ///   later than `--until`.
    func query(defaultStatuses: Set<TaskStatus>? = nil, now: Date = Date()) throws -> TaskQuery {
        let createdSince = try since.map { try InputParsing.since($0, option: "--since", now: now) }
        let createdUntil = try until.map { try InputParsing.since($0, option: "--until", now: now) }
        if let createdSince, let createdUntil, createdSince > createdUntil {
            throw CLIError.usage("--since is later than --until: no task can match")
        }
        return TaskQuery(
            statuses: try InputParsing.statuses(status) ?? defaultStatuses, kind: kind, createdSince: createdSince,
            createdUntil: createdUntil, nameContains: name)
    }
}
