import ArgumentParser
import Foundation
import Progression
import ProgressionOperator

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

    @Option(name: .long, help: ArgumentHelp("Only jobs whose input (its JSON text) contains this text, exactly (case and all).", valueName: "text"))
    var input: String?

    @Option(name: .customLong("input-field"), help: ArgumentHelp("Only jobs whose input has this value at this key (repeat for more): customer=42, order.id=A7 (strings, numbers, true, false, null).", valueName: "key=value"))
    var inputFields: [String] = []

    /// The filters as the operator library reads them.
    var filter: TaskFilter {
        var filter = TaskFilter(status: status, kind: kind, since: since, until: until, name: name, input: input)
        filter.inputFields = inputFields
        return filter
    }

    /// Whether any filter is given.
    var isEmpty: Bool { filter.isEmpty }

    /// The filters as a query (limit and offset left at their defaults), `now` the time durations count back from.
    ///
    /// - Throws: ``CLIError`` (a usage error) for a status, duration or date that does not parse, or a `--since`
    ///   later than `--until`.
    func query(defaultStatuses: Set<TaskStatus>? = nil, now: Date = Date()) throws -> TaskQuery {
        try filter.query(defaultStatuses: defaultStatuses, now: now)
    }
}
