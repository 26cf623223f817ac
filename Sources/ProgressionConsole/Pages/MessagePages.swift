#if Console
import Foundation
import HTTPTypes
import Progression
import ProgressionOperator

/// A change of every root the filters choose: the dry run's preview with a button to go ahead, and the result.
package enum BulkPage {
    /// The most changes listed on the page (the JSON API lists all).
    static let listed = 200

    package static func render(
        _ summary: TaskControl.Summary, request: ListRequest, force: Bool, context: PageContext
    ) -> HTML {
        let action = summary.action
        let verb = summary.dryRun ? "would \(action)" : pastTense(action)
        let back = context.link("/tasks") + TaskListPage.querySuffix(request.filterFields)
        let changes = summary.changes.prefix(listed).map { change -> HTML in
            """
            <tr><td class="id"><a href="\(context.taskLink(change.id))">\(change.id)</a></td><td>\(change.name)</td>\
            <td>\(change.via == "owner" ? "owner \(change.ownerID ?? "")" : "direct")</td><td>\(change.outcome)</td></tr>
            """
        }
        let refused = summary.refused.prefix(listed).map { refusal -> HTML in
            "<li><a href=\"\(context.taskLink(refusal.id))\">\(refusal.id)</a>: \(refusal.message)</li>"
        }
        var confirm: HTML = .empty
        if summary.dryRun && summary.changed > 0 && context.canChange {
            confirm = """
                <form class="bulk" method="post" action="\(back)">\(Layout.csrfField(context))\
                <input type="hidden" name="action" value="\(action)"><input type="hidden" name="yes" value="1">\
                \(force ? HTML("<input type=\"hidden\" name=\"force\" value=\"1\">") : HTML.empty)\
                <button type="submit" id="confirm" class="danger">\(action.capitalized) \(Format.tasks(summary.changed)) now</button> \
                <a href="\(back)">cancel</a></form>
                """
        }
        let content: HTML = """
            <h1>\(action.capitalized) by filter\(summary.dryRun ? " — preview" : "")</h1>
            <p class="summary" id="summary">\(verb) \(Format.count(summary.changed)) of \(Format.tasks(summary.matched))\
            \(summary.refused.isEmpty ? HTML.empty : HTML(" (\(Format.count(summary.refused.count)) refused)"))</p>
            \(confirm)
            \(changes.isEmpty ? HTML.empty : "<table><thead><tr><th>ID</th><th>Name</th><th>How</th><th>Outcome</th></tr></thead><tbody>\(changes)</tbody></table>")
            \(refused.isEmpty ? HTML.empty : "<h2>Refused</h2><ul class=\"refused\">\(refused)</ul>")
            \(summary.changes.count > listed ? "<p class=\"none\">the first \(listed) are listed</p>" : HTML.empty)
            <p><a href="\(back)">back to the tasks</a></p>
            """
        return Layout.page("\(action.capitalized) by filter", context: context, content: content)
    }

    static func pastTense(_ action: String) -> String {
        ControlRequest.Action(rawValue: action)?.pastTense ?? action
    }
}

/// Signing in with the token.
package enum LoginPage {
    package static func render(next: String, context: PageContext, failed: Bool = false) -> HTML {
        let content: HTML = """
            <h1>Sign in</h1>
            \(failed ? "<p class=\"notice error\" role=\"status\">That is not the console's token.</p>" : HTML.empty)
            <form class="login" method="post" action="\(context.link("/login"))">\(Layout.csrfField(context))\
            <input type="hidden" name="next" value="\(next)">
            <label>The console's token <input type="password" name="token" autocomplete="current-password" autofocus></label>
            <button type="submit">Sign in</button>
            </form>
            <p class="facts">The token is the one the console was started with (--token or $PROGRESSION_CONSOLE_TOKEN). \
            Reading needs none.</p>
            """
        return Layout.page("Sign in", context: context, content: content)
    }
}

/// A request the console does not serve: the status and one sentence, never more.
package enum ErrorPage {
    package static func render(_ error: ConsoleError, context: PageContext) -> HTML {
        let content: HTML = """
            <h1>\(error.status.code) \(error.status.reasonPhrase)</h1>
            <p class="error-text" id="error">\(error.message)</p>
            <p><a href="\(context.link("/"))">overview</a> · <a href="\(context.link("/tasks"))">tasks</a></p>
            """
        return Layout.page("\(error.status.code) \(error.status.reasonPhrase)", context: context, content: content)
    }
}
#endif
