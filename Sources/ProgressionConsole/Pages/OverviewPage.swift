#if Console
import Foundation
import Progression
import ProgressionOperator

/// `GET /`: counts by status and kind, roots completed and failed per minute over the last hour, the executors and
/// the running jobs.
package enum OverviewPage {
    package static func render(
        _ overview: OverviewJSON, running: [LiveRowJSON], context: PageContext, now: Date = Date()
    ) -> HTML {
        let stats = overview.stats
        let statuses = TaskStatus.allCases.map { status -> HTML in
            let count = stats.byStatus[status.rawValue] ?? 0
            let href = context.link("/tasks?" + FormFields.query([("status", status.rawValue)]))
            return """
                <a class="count \(status.rawValue)" href="\(href)"><span class="number" data-status="\(status.rawValue)">\
                \(Format.count(count))</span><span class="label">\(status.rawValue)</span></a>
                """
        }
        let byKind = stats.byKind.sorted { $0.key < $1.key }.map { kind, count -> HTML in
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
            \(byKind.isEmpty ? HTML("<p class=\"none\">no tasks</p>") : HTML("<table class=\"small\"><tbody>\(byKind)</tbody></table>"))
            </div>
            </section>
            <h2>Workers</h2>
            \(owners(overview.owners))
            <h2>Job kinds</h2>
            \(Self.kinds(overview.kinds, context: context))
            <h2>Schedules</h2>
            \(schedules(overview.schedules, context: context))
            <h2>Running</h2>
            \(TaskListPage.table(running, context: context, id: "running"))
            """
        return Layout.page("Overview", context: context, live: context.link("/"), view: "overview", content: content)
    }

    static func kinds(_ kinds: [KindJSON], context: PageContext) -> HTML {
        guard !kinds.isEmpty else { return "<p class=\"none\">no worker registered a kind</p>" }
        let rows = kinds.map { kind -> HTML in
            """
            <tr><td><a href="\(context.link("/tasks?" + FormFields.query([("kind", kind.name)])))">\(kind.name)</a></td>\
            <td class="number">\(kind.workers)</td><td>\(kind.maxConcurrent.map { "at most \($0) at once" } ?? "-")</td>\
            <td>\(kind.paused ? "paused since \(Format.time(kind.pausedAt))" : "-")</td></tr>
            """
        }
        return """
            <table id="kinds"><thead><tr><th>Kind</th><th>Workers</th><th>Limit (fleet)</th><th>Paused</th></tr></thead>\
            <tbody>\(rows)</tbody></table>
            """
    }

    static func schedules(_ schedules: [ScheduleJSON], context: PageContext) -> HTML {
        guard !schedules.isEmpty else { return "<p class=\"none\">no schedules</p>" }
        let rows = schedules.map { schedule -> HTML in
            let last: HTML =
                schedule.lastJobID.map {
                    "<a href=\"\(context.taskLink($0))\">\(Format.time(schedule.lastFireAt))</a>"
                } ?? "\(Format.time(schedule.lastFireAt))"
            return """
                <tr><td>\(schedule.name)</td><td>\(schedule.kind)</td><td class="id">\(schedule.cron)</td>\
                <td>\(schedule.timeZone)</td><td class="time">\(schedule.paused ? "paused" : Format.time(schedule.nextFireAt))</td>\
                <td class="time">\(last)</td><td>\(schedule.missedTicks)</td></tr>
                """
        }
        return """
            <table id="schedules"><thead><tr><th>Schedule</th><th>Kind</th><th>Cron</th><th>Time zone</th><th>Next</th>\
            <th>Last job</th><th>Missed ticks</th></tr></thead><tbody>\(rows)</tbody></table>
            """
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
                <td>\(owner.kindsWithVersions.joined(separator: ", "))</td></tr>
                """
        }
        return """
            <table><thead><tr><th>Owner</th><th>Host</th><th>PID</th><th>Started</th><th>Heartbeat</th><th>Liveness</th>\
            <th>Running</th><th>Paused</th><th>Kinds</th></tr></thead><tbody>\(rows)</tbody></table>
            """
    }
}
#endif
