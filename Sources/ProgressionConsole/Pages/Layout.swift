#if Console
import Foundation
import Progression
import ProgressionOperator

/// The frame of every page: head (the stylesheet and script of ``ConsoleAssets``, no inline script or style), the
/// navigation with the access mode, a notice, the content and the live-update line.
package enum Layout {
    /// A whole page.
    ///
    /// - Parameters:
    ///   - live: the URL the page's script opens as an event stream (the page's own, asked for
    ///     `text/event-stream`), or `nil` for a page that does not update itself.
    ///   - view: which of the script's renderers handles the updates (`list`, `job`, `overview`).
    ///   - data: more `data-` attributes of the body for the script.
    package static func page(
        _ title: String, context: PageContext, live: String? = nil, view: String? = nil,
        data: [(String, String)] = [], content: HTML
    ) -> HTML {
        var attributes: [HTML] = []
        if let live { attributes.append(" data-live=\"\(live)\"") }
        if let view { attributes.append(" data-view=\"\(view)\"") }
        for (name, value) in data { attributes.append(" data-\(name)=\"\(value)\"") }
        let assets = ConsoleAssets.version
        return """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(title) · Progression</title>
            <link rel="icon" href="\(context.link("/assets/icon.svg"))">
            <link rel="stylesheet" href="\(context.link("/assets/console.css?v=" + assets))">
            <script src="\(context.link("/assets/console.js?v=" + assets))" defer></script>
            </head>
            <body\(attributes)>
            <header>
            <a class="brand" href="\(context.link("/"))">Progression</a>
            <nav><a href="\(context.link("/"))">Overview</a><a href="\(context.link("/tasks"))">Tasks</a></nav>
            \(accessLine(context))
            </header>
            <main>
            \(notice(context.notice))\(content)
            </main>
            <footer>\(live == nil ? HTML.empty : "<span id=\"live-state\" class=\"live-state\">live updates: connecting…</span>")</footer>
            </body>
            </html>

            """
    }

    /// Read-only, or signing in and out.
    static func accessLine(_ context: PageContext) -> HTML {
        switch context.access {
        case .readOnly:
            return "<span class=\"access read-only\" title=\"Started without a token: nothing can be changed here.\">read-only</span>"
        case .signedOut:
            return "<a class=\"access\" href=\"\(context.link("/login"))\">sign in to change tasks</a>"
        case .signedIn:
            return """
                <form class="access" method="post" action="\(context.link("/logout"))">\(csrfField(context))\
                <button type="submit">sign out</button></form>
                """
        }
    }

    static func notice(_ notice: PageContext.Notice?) -> HTML {
        guard let notice else { return .empty }
        return "<p class=\"notice\(notice.isError ? " error" : "")\" role=\"status\">\(notice.text)</p>\n"
    }

    /// The hidden field every form that posts carries.
    package static func csrfField(_ context: PageContext) -> HTML {
        "<input type=\"hidden\" name=\"csrf\" value=\"\(context.csrf)\">"
    }

    /// A task's progress as a bar and a percent, for people.
    package static func bar(_ row: LiveRowJSON) -> HTML {
        let value = row.status == "completed" ? 1 : row.progress
        let bar: HTML =
            value.map { "<progress max=\"1\" value=\"\(String(format: "%.4f", $0))\"></progress>" }
            ?? "<progress max=\"1\"></progress>"
        return "\(bar)<span class=\"percent\">\(row.percent)</span>"
    }

    /// A status as a coloured label (`label`: how people read it, `scheduled` for a pending job that waits for a time).
    package static func status(_ status: String, label: String? = nil) -> HTML {
        "<span class=\"status \(status)\(label == "stalled" ? " stalled" : "")\">\(label ?? status)</span>"
    }

    /// A row's status, and its failed steps when it has any.
    package static func status(_ row: LiveRowJSON) -> HTML {
        let failed: HTML =
            row.failedSteps > 0
            ? " <span class=\"failed-steps\">\(Format.count(row.failedSteps)) failed step\(row.failedSteps == 1 ? "" : "s")</span>"
            : .empty
        return "\(status(row.status, label: row.label))\(failed)"
    }

    /// An action as a button says it: `Pause`, `Run now`.
    package static func label(_ action: ControlRequest.Action) -> String {
        action == .runNow ? "Run now" : action.rawValue.capitalized
    }

    /// A JSON value for people: indented, at most `limit` characters (then cut, saying so).
    package static func json(_ value: JSONValue?, limit: Int = 65_536) -> HTML {
        guard let value else { return "<p class=\"none\">none</p>" }
        let text = value.prettyText
        guard text.count > limit else { return "<pre class=\"json\">\(lines: text)</pre>" }
        return """
            <pre class="json">\(lines: String(text.prefix(limit)))</pre><p class="none">… \(Format.count(text.count - limit)) more \
            characters (the JSON API gives all of it)</p>
            """
    }
}
#endif
