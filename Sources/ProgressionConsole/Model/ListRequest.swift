#if Console
import Foundation
import Progression
import ProgressionOperator

/// What the list asks for, from its query string: the filters progressctl takes (`status` — repeated or a comma
/// list —, `kind`, `name`, `input`, `field` — `key=value` of the input, repeated —, `since`, `until`: durations like
/// `12h` or ISO-8601 dates), the order (`sort`:
/// `created`, `updated` or `progress`; `order`: `newest` or `oldest`), the page's size (`limit`, 1 to 500) and where
/// it starts (`after`, the cursor of the page before).
package struct ListRequest: Sendable, Hashable {
    package var filter: TaskFilter
    package var sort: TaskQuery.Sort
    /// Oldest (least recently changed, least advanced) first.
    package var reverse: Bool
    package var limit: Int
    package var after: RootCursor?

    /// The most tasks a page shows.
    package static let largestPage = 500
    /// A page's size when none is given.
    package static let defaultPage = 50

    package init(
        filter: TaskFilter = TaskFilter(), sort: TaskQuery.Sort = .created, reverse: Bool = false,
        limit: Int = ListRequest.defaultPage, after: RootCursor? = nil
    ) {
        self.filter = filter
        self.sort = sort
        self.reverse = reverse
        self.limit = limit
        self.after = after
    }

    /// The request in `fields`.
    ///
    /// - Throws: ``ConsoleError`` (400) for a sort, order, limit or cursor that does not parse.
    package init(_ fields: FormFields) throws {
        let statuses = fields.all("status").filter { !$0.isEmpty }
        filter = TaskFilter(
            status: statuses, kind: fields.nonEmpty("kind"), since: fields.nonEmpty("since"),
            until: fields.nonEmpty("until"), name: fields.nonEmpty("name"), input: fields.nonEmpty("input"))
        // progressctl's --input-field: `key=value` or `a.b=value` of the input's JSON (repeated: all must match).
        filter.inputFields = fields.all("field").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if let sort = fields.nonEmpty("sort") {
            guard let value = TaskQuery.Sort(rawValue: sort) else {
                throw ConsoleError.badRequest("invalid sort '\(sort)' (expected created, updated or progress)")
            }
            self.sort = value
        } else {
            sort = .created
        }
        switch fields.nonEmpty("order") {
        case nil, "newest": reverse = false
        case "oldest": reverse = true
        case let other?: throw ConsoleError.badRequest("invalid order '\(other)' (expected newest or oldest)")
        }
        if let limit = fields.nonEmpty("limit") {
            guard let value = Int(limit), (1...Self.largestPage).contains(value) else {
                throw ConsoleError.badRequest("invalid limit '\(limit)' (expected 1 to \(Self.largestPage))")
            }
            self.limit = value
        } else {
            limit = Self.defaultPage
        }
        if let after = fields.nonEmpty("after") {
            guard let cursor = RootCursor(after) else {
                throw ConsoleError.badRequest("invalid page cursor '\(after)'; start again from the first page")
            }
            self.after = cursor
        } else {
            after = nil
        }
    }

    /// The store's query for these filters and this order (its limit the page's size).
    ///
    /// - Throws: ``ConsoleError`` (400) for a status, duration or date that does not parse.
    package func query(now: Date = Date()) throws -> TaskQuery {
        var query = try filter.query(now: now, sinceOption: "since", untilOption: "until")
        query.sort = sort
        query.reverse = reverse
        query.limit = limit
        return query
    }

    /// The filters as query fields (for links and forms), without the order and page.
    package var filterFields: [(String, String)] {
        var fields: [(String, String)] = filter.status.map { ("status", $0) }
        for (name, value) in [("kind", filter.kind), ("name", filter.name), ("input", filter.input),
                              ("since", filter.since), ("until", filter.until)] {
            if let value { fields.append((name, value)) }
        }
        fields += filter.inputFields.map { ("field", $0) }
        return fields
    }

    /// The query string of this request with the page starting `after` (the first page for `nil`).
    package func queryString(after cursor: RootCursor?) -> String {
        var fields = filterFields
        if sort != .created { fields.append(("sort", sort.rawValue)) }
        if reverse { fields.append(("order", "oldest")) }
        if limit != Self.defaultPage { fields.append(("limit", "\(limit)")) }
        if let cursor { fields.append(("after", cursor.description)) }
        return FormFields.query(fields)
    }
}
#endif
