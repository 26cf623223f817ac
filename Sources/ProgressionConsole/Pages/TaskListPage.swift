#if Console
import Foundation
import Progression
import ProgressionOperator

/// `GET /tasks`: the filters, a page of roots with live bars, the pages before and after, and (signed in) a change
/// of every root the filters choose.
package enum TaskListPage {
    package static func render(
        _ request: ListRequest, page: RootPage, rows: [LiveRowJSON], total: Int, kinds: [String], context: PageContext
    ) -> HTML {
        let here = context.link("/tasks")
        var links: [HTML] = []
        if request.after != nil {
            links.append("<a href=\"\(here + "?" + request.queryString(after: nil))\">first page</a>")
        }
        if let next = page.next {
            links.append("<a class=\"next\" href=\"\(here + "?" + request.queryString(after: next))\">next page</a>")
        }
        let query = request.queryString(after: request.after)
        let content: HTML = """
            <h1>Tasks</h1>
            \(filters(request, kinds: kinds, context: context))
            \(table(rows, context: context, id: "tasks"))
            <p class="pages"><span id="footer">\(ConsoleReader.footer(shown: rows.count, total: total))</span> \
            \(HTML.joined(links, separator: " · "))</p>
            \(bulkForm(request, context: context))
            """
        return Layout.page(
            "Tasks", context: context, live: here + (query.isEmpty ? "" : "?" + query), view: "list",
            content: content)
    }

    /// The filter form (a GET of this page).
    static func filters(_ request: ListRequest, kinds: [String], context: PageContext) -> HTML {
        let chosen = Set(request.filter.status.flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } })
        let statuses = TaskStatus.allCases.map { status -> HTML in
            """
            <label class="check"><input type="checkbox" name="status" value="\(status.rawValue)"\
            \(chosen.contains(status.rawValue) ? HTML(" checked") : HTML.empty)> \(status.rawValue)</label>
            """
        }
        func option(_ value: String, _ label: String, selected: Bool) -> HTML {
            "<option value=\"\(value)\"\(selected ? HTML(" selected") : HTML.empty)>\(label)</option>"
        }
        let kindOptions = kinds.map { HTML("<option value=\"\($0)\"></option>") }
        return """
            <form class="filters" method="get" action="\(context.link("/tasks"))">
            <fieldset><legend>Status</legend>\(statuses)</fieldset>
            <label>Kind <input name="kind" list="kinds" value="\(request.filter.kind ?? "")"></label>
            <datalist id="kinds">\(kindOptions)</datalist>
            <label>Name contains <input name="name" value="\(request.filter.name ?? "")"></label>
            <label>Input contains <input name="input" value="\(request.filter.input ?? "")" placeholder="&quot;file&quot;:&quot;a.csv&quot;"></label>
            <label>Input field <input name="field" value="\(request.filter.inputFields.first ?? "")" placeholder="customer.id=42"></label>
            <label>Created since <input name="since" value="\(request.filter.since ?? "")" placeholder="12h or 2026-01-31"></label>
            <label>Created before <input name="until" value="\(request.filter.until ?? "")" placeholder="1h or 2026-02-01"></label>
            <label>Sort <select name="sort">\(option("created", "created", selected: request.sort == .created))\
            \(option("updated", "updated", selected: request.sort == .updated))\
            \(option("progress", "progress", selected: request.sort == .progress))</select></label>
            <label>Order <select name="order">\(option("newest", "newest / most first", selected: !request.reverse))\
            \(option("oldest", "oldest / least first", selected: request.reverse))</select></label>
            <button type="submit">Filter</button> <a href="\(context.link("/tasks"))">clear</a>
            </form>
            """
    }

    /// The table of roots; the script rebuilds its body from the live rows.
    package static func table(_ rows: [LiveRowJSON], context: PageContext, id: String) -> HTML {
        let body = rows.map { row(_: $0, context: context) }
        return """
            <table class="tasks" id="\(id)" data-base="\(context.link("/tasks/"))"><thead><tr><th>ID</th><th>Name</th>\
            <th>Kind</th><th>Status</th><th>Progress</th><th>Rate</th><th>Left</th><th>Step</th><th>Attempt</th>\
            <th>Updated</th></tr></thead>
            <tbody>\(body)</tbody></table>
            \(rows.isEmpty ? "<p class=\"none\" id=\"\(id)-empty\">no tasks</p>" : HTML.empty)
            """
    }

    static func row(_ row: LiveRowJSON, context: PageContext) -> HTML {
        """
        <tr data-id="\(row.id)"><td class="id"><a href="\(context.taskLink(row.id))">\(row.id)</a></td>\
        <td class="name"><a href="\(context.taskLink(row.id))">\(row.name)</a></td><td>\(row.kind ?? "-")</td>\
        <td class="state">\(Layout.status(row))</td><td class="bar">\(Layout.bar(row))</td><td class="rate">\(row.rate)</td>\
        <td class="left">\(row.left)</td><td class="step">\(row.step ?? "-")</td>\
        <td class="number">\(row.attempt)</td><td class="time">\(row.updated)</td></tr>
        """
    }

    /// A change of every root the filters choose: first a dry run (``BulkPage``), then a confirmation.
    static func bulkForm(_ request: ListRequest, context: PageContext) -> HTML {
        guard context.canChange else { return .empty }
        let actions = ControlRequest.Action.allCases.map { action -> HTML in
            "<option value=\"\(action.rawValue)\">\(Layout.label(action).lowercased())</option>"
        }
        return """
            <form class="bulk" method="post" action="\(context.link("/tasks") + querySuffix(request.filterFields))">
            \(Layout.csrfField(context))<input type="hidden" name="dryRun" value="1">
            <label>Change every task these filters choose: <select name="action">\(actions)</select></label>
            <label class="check"><input type="checkbox" name="force" value="1"> remove unfinished ones too (cancel first)</label>
            <button type="submit">Preview</button>
            </form>
            """
    }

    static func querySuffix(_ fields: [(String, String)]) -> String {
        fields.isEmpty ? "" : "?" + FormFields.query(fields)
    }
}
#endif
