import Foundation
import Progression

/// The filters that choose roots, as an operator gives them: progressctl's `--status`, `--kind`, `--since`, `--until`
/// `--name` and `--input` (``TaskFilterOptions``), and the console's list form. One reading of them for both.
package struct TaskFilter: Sendable, Hashable {
    /// Statuses, each possibly a comma list (`failed,running`); empty for any.
    package var status: [String] = []
    package var kind: String?
    /// A duration (`30m`, `12h`, `7d`) or an ISO-8601 date.
    package var since: String?
    /// A duration (`12h`: more than 12 hours ago) or an ISO-8601 date.
    package var until: String?
    /// Text the name contains (ASCII letters in any case).
    package var name: String?
    /// Text the input's JSON contains, exactly.
    package var input: String?
    /// Values of the input's JSON, `key=value` or `a.b=value` (see ``InputFilter``), all of which must match.
    package var inputFields: [String] = []

    package init(
        status: [String] = [], kind: String? = nil, since: String? = nil, until: String? = nil, name: String? = nil,
        input: String? = nil
    ) {
        self.status = status
        self.kind = kind
        self.since = since
        self.until = until
        self.name = name
        self.input = input
    }

    /// Whether any filter is given.
    package var isEmpty: Bool {
        status.isEmpty && kind == nil && since == nil && until == nil && name == nil && input == nil
            && inputFields.isEmpty
    }

    /// The filters as a query (limit and offset left at their defaults), `now` the time durations count back from.
    /// Messages name the options `sinceOption` and `untilOption`.
    ///
    /// - Throws: ``CLIError`` (a usage error) for a status, duration or date that does not parse, or a `since` later
    ///   than `until`.
    package func query(
        defaultStatuses: Set<TaskStatus>? = nil, now: Date = Date(), sinceOption: String = "--since",
        untilOption: String = "--until"
    ) throws -> TaskQuery {
        let createdSince = try since.map { try InputParsing.since($0, option: sinceOption, now: now) }
        let createdUntil = try until.map { try InputParsing.since($0, option: untilOption, now: now) }
        if let createdSince, let createdUntil, createdSince > createdUntil {
            throw CLIError.usage("\(sinceOption) is later than \(untilOption): no task can match")
        }
        let fields: [InputFilter]
        do {
            fields = try inputFields.map { try InputFilter($0) }
        } catch {
            throw CLIError.usage("\(error)")
        }
        return TaskQuery(
            statuses: try InputParsing.statuses(status) ?? defaultStatuses, kind: kind, createdSince: createdSince,
            createdUntil: createdUntil, nameContains: name, inputContains: input, input: fields)
    }
}
