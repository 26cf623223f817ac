#if Console
import Foundation
import Progression
import ProgressionOperator

/// `GET /`: counts by status and kind, roots completed and failed per minute over the last hour, the executors and
/// the running jobs.
package enum OverviewPage {
    package static func render(_ overview: OverviewJSON, context: PageContext, now: Date = Date()) -> HTML {
        let stats = overview.stats
        let statuses = TaskStatus.allCases.map { status -> HTML in
            let count = stats.byStatus[status.rawValue] ?? 0
            let href = context.link("/tasks?" + FormFields.query([("status", status.rawValue)]))
            return """
                <a class="count \(status.rawValue)" href="\(href)"><span class="number" data-status="\(status.rawValue)">\
                \(Format.count(count))</span><span class="label">\(status.rawValue)</span></a>
                """
        }
        let kinds = stats.byKind.sorted { $0.key < $1.key }.map { kind, count -> HTML in
            let link: HTML =
                kind == "(closure)"
                ? "\(kind)" : "<a href=\"\(context.link("/tasks?" + FormFields.query([("kind", kind)])))\">\(kind)</a>"
            return "<tr><td>\(link)</td><td class=\"number\">\(Format.count(count))</td></tr>"
        }
        let failure = stats.failureRate.map { String(format: "%.1f%%", $0 * 100) } ?? "-"
        let content: HTML = """
            <h1>Overview</h1>
            <section class="counts" aria-label="Tasks by status">\(statuses)\
            <span class="count total"><span class="number" id="total">\(Format.count(stats.total))</span>\
            <span class="label">total</span></span></section>
            <section class="panels">
            <div class="panel">
            <h2>Finished per minute, last hour</h2>
            <div id="throughput">\(Chart.throughput(overview.throughput))</div>
            <p class="facts">failure rate \(failure) · oldest pending \(Format.time(stats.oldestPendingCreatedAt)) · \
            \(Format.count(stats.events)) events · database \(Format.bytes(stats.databaseBytes))</p>
            </div>
            <div class="panel">
            <h2>By kind</h2>
            \(kinds.isEmpty ? HTML("<p class=\"none\">no tasks</p>") : HTML("<table class=\"small\"><tbody>\(kinds)</tbody></table>"))
            \(overview.kinds.isEmpty ? HTML.empty : "<p class=\"facts\">registered kinds: \(overview.kinds.joined(separator: ", "))</p>")
            </div>
            </section>
            <h2>Workers</h2>
            \(owners(overview.owners))
            <h2>Running</h2>
            \(TaskListPage.table(overview.running.map { LiveRowJSON(record: $0) }, context: context, id: "running"))
            """
        return Layout.page("Overview", context: context, live: context.link("/"), view: "overview", content: content)
    }

    static func owners(_ owners: [OwnerJSON]) -> HTML {
        guard !owners.isEmpty else { return "<p class=\"none\">no executor has used this database</p>" }
        let rows = owners.map { owner -> HTML in
            let age = owner.heartbeatAgeSeconds < 60
                ? String(format: "%.1f s", owner.heartbeatAgeSeconds) : Format.timeLeft(owner.heartbeatAgeSeconds)
            return """
                <tr class="\(owner.alive ? "alive" : "gone")"><td class="id">\(owner.id)</td><td>\(owner.host)</td>\
                <td class="number">\(owner.pid)</td><td>\(Format.time(owner.startedAt))</td><td>\(age) ago</td>\
                <td>\(owner.liveness)</td><td class="number">\(owner.running)</td><td class="number">\(owner.paused)</td>\
                <td>\(owner.kinds.joined(separator: ", "))</td></tr>
                """
        }
        return """
            <table><thead><tr><th>Owner</th><th>Host</th><th>PID</th><th>Started</th><th>Heartbeat</th><th>Liveness</th>\
            <th>Running</th><th>Paused</th><th>Kinds</th></tr></thead><tbody>\(rows)</tbody></table>
            """
    }
}
#endif
