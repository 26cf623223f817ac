#if Console
import Foundation
import Progression
import ProgressionOperator

/// `GET /tasks/{id}`: a task and its tree across the fleet with live bars (finished siblings counted on one line, as
/// `progressctl watch` shows them; `?expand=all` shows every node; below each link the steps of its child job when
/// it ran and has not finished, at most ``JobTreeView/expandLimit`` of them, with the worker that runs it), its input
/// and result as JSON, what it waits for, the jobs it runs after and those that run after it, its signals (and a form
/// to send one), the errors of each attempt, its history, checkpoint, owner and idempotency key, and the changes it
/// allows.
package enum JobPage {
    package static func render(
        _ job: ConsoleReader.Job, actions: [ControlRequest.Action], expanded: Bool, context: PageContext
    ) -> HTML {
        let task = job.task
        let rows = ConsoleReader.treeRows(job.view, expanded: expanded, failedSteps: job.failedSteps)
        let liveQuery = expanded ? "expand=all" : ""
        let names = Dictionary(job.tree.map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
        let headRow = LiveRowJSON(task, failedSteps: job.failedSteps)
        var facts: [(String, HTML)] = [
            ("Status", Layout.status(headRow)),
            ("Progress", "<span id=\"job-progress\">\(Layout.bar(headRow))</span>"),
            ("Rate", "<span id=\"job-rate\">\(headRow.rate)</span> · left <span id=\"job-left\">\(headRow.left)</span>"),
            ("Step", "\(task.step ?? "-")"),
            ("Kind", "\(task.kind ?? "(closure)")"),
            ("Attempt", "\(task.attempt)\(task.interruptions > 0 ? " (interrupted \(task.interruptions)×)" : "")"),
            ("Priority", "\(task.priority)"),
            ("Idempotency key", "\(task.idempotencyKey ?? "-")"),
            ("Checkpoint", "\(task.checkpoint.map { Format.bytes(Int64($0.count)) } ?? "none")"),
            ("Owner", owner(job, context: context)),
            ("Created", "\(Format.time(task.createdAt))"),
            ("Started", "\(Format.time(task.startedAt))"),
            ("Updated", "\(Format.time(task.updatedAt))"),
            ("Finished", "\(Format.time(task.finishedAt))"),
        ]
        if let version = task.version {
            // The version of its kind's code it began under: only workers that can continue it run it.
            facts.insert(("Version", "\(version)"), at: 5)
        }
        if task.waitReason == .waiting {
            facts.append(("Waiting for", "\(task.waitingFor ?? "-")"))
        }
        if let still = task.stalledFor(), let limit = task.options.stall?.limit {
            facts.append(
                ("Stalled", "nothing moved for \(Format.seconds(.seconds(Int64(still.seconds)))) (limit \(Format.seconds(limit)))"))
        }
        if let next = task.nextAttemptAt, next < JobOptions.latestRunAt {
            let label =
                switch task.waitReason {
                case .runAt: "Runs at"
                case .retry: "Retries at"
                case .sleep: "Wakes at"
                case .waiting: "Waits until"
                case nil: "Next attempt"
                }
            facts.append((label, "\(Format.time(next))"))
        }
        if !task.isRoot { facts.insert(("Part of", "<a href=\"\(context.taskLink(job.root.id))\">\(job.root.name)</a>"), at: 0) }
        if let parentID = task.parentJobID {
            let parent: HTML =
                job.view.parentJob.map { "<a href=\"\(context.taskLink($0.id))\">\($0.name)</a> (\($0.displayStatus))" }
                ?? "\(parentID) (removed)"
            facts.insert(("Child job of", parent), at: 0)
        }
        if let childID = task.childJobID {
            let child: HTML =
                job.view.childJobs[childID].map { "<a href=\"\(context.taskLink($0.id))\">\($0.id)</a> (\($0.displayStatus))" }
                ?? "\(childID) (removed)"
            facts.insert(("Stands for the child job", child), at: 0)
        }
        let factRows = facts.map { label, value -> HTML in "<tr><th>\(label)</th><td>\(value)</td></tr>" }
        var error: HTML = .empty
        if task.errorType != nil || task.errorDescription != nil {
            error = """
                <p class="error-text">\(task.errorType.map { "\($0): " } ?? "")\(lines: task.errorDescription ?? "")</p>
                """
        }
        let expandLink: HTML =
            expanded
            ? "<a href=\"\(context.taskLink(task.id))\">show only what needs attention</a>"
            : "<a href=\"\(context.taskLink(task.id, query: "expand=all"))\">show every node</a>"
        let content: HTML = """
            <h1><span class="name">\(task.name)</span> <span class="id">\(task.id)</span></h1>
            \(error)
            \(actionForm(task, actions: actions, context: context))
            <section class="panels">
            <div class="panel"><table class="facts"><tbody>\(factRows)</tbody></table></div>
            <div class="panel"><h2>Input</h2>\(Layout.json(JSONValue.stored(task.input)))\
            <h2>Result</h2>\(Layout.json(JSONValue.stored(task.result)))</div>
            </section>
            <h2>Tree <span class="small">(\(Format.tasks(job.tree.count)); \(expandLink))</span></h2>
            \(tree(rows, context: context, cut: expanded && job.view.graftedNodes.count > ConsoleReader.expandLimit))
            \(notExpanded(job.view))
            \(relations(job.view, context: context))
            \(signals(job, context: context))
            <h2>Errors by attempt</h2>
            \(errors(job.errors, names: names))
            <h2>History <span class="small">(\(job.historyIsCut ? "the last \(ConsoleReader.historyLimit) events, " : "")\
            progress samples left out)</span></h2>
            \(history(job.history, names: names))
            """
        return Layout.page(
            task.name, context: context, live: context.taskLink(task.id, query: liveQuery), view: "job",
            data: [("status", task.displayStatus), ("task", task.id)], content: content)
    }

    static func owner(_ job: ConsoleReader.Job, context: PageContext) -> HTML {
        guard let id = job.root.ownerID else { return "none" }
        guard let owner = job.owner else { return "\(id) (not recorded)" }
        return "\(owner.id) on \(owner.host), pid \(owner.pid) (\(owner.liveness))"
    }

    /// The buttons of the changes the task allows now (signed in), each posting to the task's own route.
    static func actionForm(_ task: TaskRecord, actions: [ControlRequest.Action], context: PageContext) -> HTML {
        guard !actions.isEmpty else { return .empty }
        guard context.canChange else {
            if context.access == .readOnly { return .empty }
            let names = actions.map { Layout.label($0).lowercased() }.joined(separator: ", ")
            return "<p class=\"actions\"><a href=\"\(context.link("/login"))\">Sign in</a> to \(names) it.</p>"
        }
        let buttons = actions.map { action -> HTML in
            let confirm: HTML =
                action == .cancel || action == .remove
                ? " data-confirm=\"\(action.rawValue.capitalized) '\(task.name)'?\"" : .empty
            return "<button type=\"submit\" name=\"action\" value=\"\(action.rawValue)\" id=\"action-\(action.rawValue)\"\(confirm)>\(Layout.label(action))</button>"
        }
        return """
            <form class="actions" method="post" action="\(context.taskLink(task.id))">\(Layout.csrfField(context))\(buttons)</form>
            """
    }

    /// The tree's rows; the script rebuilds the body from the live rows.
    static func tree(_ rows: [LiveRowJSON], context: PageContext, cut: Bool) -> HTML {
        let body = rows.map { row -> HTML in
            if let summary = row.summary {
                return "<tr class=\"summary\"><td colspan=\"7\" class=\"depth-\(min(row.depth, 12))\">\(summary)</td></tr>"
            }
            // A link's row goes to the page of its child job, and names it and its worker.
            let child: HTML =
                row.job.map { " <span class=\"child\">job \($0)\(row.worker.map { " · \($0)" } ?? "")</span>" } ?? .empty
            return """
                <tr data-id="\(row.id)"><td class="name depth-\(min(row.depth, 12))"><a href="\(context.taskLink(row.job ?? row.id))">\
                \(row.name)</a>\(child)</td><td class="state">\(Layout.status(row))</td><td class="bar">\(Layout.bar(row))</td>\
                <td class="rate">\(row.rate)</td><td class="left">\(row.left)</td><td class="step">\(row.step ?? "-")</td>\
                <td class="number">\(row.attempt)</td></tr>
                """
        }
        return """
            <table class="tree" id="tree" data-base="\(context.link("/tasks/"))"><thead><tr><th>Name</th><th>Status</th>\
            <th>Progress</th><th>Rate</th><th>Left</th><th>Step</th><th>Attempt</th></tr></thead>
            <tbody>\(body)</tbody></table>
            \(cut ? "<p class=\"none\">the first \(Format.count(ConsoleReader.expandLimit)) nodes are shown</p>" : HTML.empty)
            """
    }

    /// A line counting the child jobs whose steps the tree does not show.
    static func notExpanded(_ view: JobTreeView) -> HTML {
        guard view.notExpanded > 0 else { return .empty }
        return """
            <p class="none">\(Format.count(view.notExpanded)) more unfinished child job\(view.notExpanded == 1 ? "" : "s") \
            not expanded (at most \(JobTreeView.expandLimit) are): each link leads to its page</p>
            """
    }

    /// The jobs the job runs after and those that run after it, with their status.
    static func relations(_ view: JobTreeView, context: PageContext) -> HTML {
        func table(_ title: String, _ jobs: [JobTreeView.Related]?, id: String) -> HTML {
            guard let jobs, !jobs.isEmpty else { return .empty }
            let rows = jobs.map { related -> HTML in
                let name: HTML =
                    related.job.map { "<a href=\"\(context.taskLink($0.id))\">\($0.name)</a>" } ?? "(removed)"
                let status: HTML = related.job.map { Layout.status($0.status.rawValue, label: $0.displayStatus) } ?? "-"
                return """
                    <tr><td class="id">\(related.id)</td><td class="name">\(name)</td><td>\(related.job?.kind ?? "-")</td>\
                    <td class="state">\(status)</td><td>if it fails: \(related.dependency.onFailure.rawValue)</td></tr>
                    """
            }
            return """
                <h2>\(title)</h2>
                <table class="related" id="\(id)"><thead><tr><th>ID</th><th>Name</th><th>Kind</th><th>Status</th>\
                <th>Policy</th></tr></thead><tbody>\(rows)</tbody></table>
                """
        }
        return "\(table("Runs after", view.dependencies, id: "dependencies"))\(table("Jobs that run after it", view.dependents, id: "dependents"))"
    }

    /// The signals sent to a job, and the form that sends one (to an unfinished job, signed in).
    static func signals(_ job: ConsoleReader.Job, context: PageContext) -> HTML {
        let task = job.task
        guard task.isRoot else { return .empty }
        let signals = job.view.signals ?? []
        var list: HTML = .empty
        if !signals.isEmpty {
            let rows = signals.map { signal -> HTML in
                let taken: HTML =
                    signal.consumedBy.map { "taken by \($0) at \(Format.time(signal.consumedAt))" } ?? "waiting to be taken"
                let payload: HTML =
                    JSONValue.stored(signal.payload).map { "<code>\(String($0.compactText.prefix(500)))</code>" } ?? "-"
                return """
                    <tr><td class="name">\(signal.name)</td><td class="time">\(Format.time(signal.sentAt))</td>\
                    <td>\(taken)</td><td>\(payload)</td></tr>
                    """
            }
            list = """
                <table class="signals" id="signals"><thead><tr><th>Name</th><th>Sent</th><th>Taken</th><th>Payload</th>\
                </tr></thead><tbody>\(rows)</tbody></table>
                """
        }
        let form = signalForm(task, context: context)
        guard !signals.isEmpty || form != .empty else { return .empty }
        return "<h2>Signals</h2>\n\(list)\(form)"
    }

    /// The form that sends a signal to an unfinished job: a name and a JSON payload, with the CSRF token.
    static func signalForm(_ task: TaskRecord, context: PageContext) -> HTML {
        guard task.isRoot, !task.status.isFinished else { return .empty }
        guard context.canChange else {
            if context.access == .readOnly { return .empty }
            return "<p class=\"actions\"><a href=\"\(context.link("/login"))\">Sign in</a> to send it a signal.</p>"
        }
        return """
            <form class="signal" method="post" action="\(context.taskLink(task.id) + "/signal")">\(Layout.csrfField(context))\
            <label>Name <input name="name" id="signal-name" required maxlength="200"></label>\
            <label>Payload (JSON, optional) <textarea name="payload" id="signal-payload" rows="2"></textarea></label>\
            <button type="submit" id="signal-send">Send signal</button></form>
            """
    }

    static func errors(_ events: [TaskEvent], names: [String: String]) -> HTML {
        guard !events.isEmpty else { return "<p class=\"none\">no failures recorded</p>" }
        let rows = events.map { event -> HTML in
            """
            <tr><td class="number">\(event.attempt)</td><td>\(names[event.taskID] ?? event.taskID)</td>\
            <td>\(event.kind.rawValue)</td><td class="time">\(Format.time(event.at))</td>\
            <td class="error-text">\(event.errorType.map { "\($0): " } ?? "")\(lines: event.message ?? "")</td></tr>
            """
        }
        return """
            <table class="errors"><thead><tr><th>Attempt</th><th>Task</th><th>Event</th><th>Time</th><th>Error</th>\
            </tr></thead><tbody>\(rows)</tbody></table>
            """
    }

    static func history(_ events: [TaskEvent], names: [String: String]) -> HTML {
        guard !events.isEmpty else { return "<p class=\"none\">no history</p>" }
        let rows = events.map { event -> HTML in
            """
            <li class="\(event.kind.rawValue)"><span class="time">\(Format.time(event.at))</span> \
            <span class="event">\(event.kind.rawValue)</span> <span class="task">\(names[event.taskID] ?? event.taskID)</span>\
            \(event.attempt > 1 ? HTML(" attempt \(event.attempt)") : HTML.empty)\
            \(event.progress.map { HTML(" \(Format.percent($0))") } ?? HTML.empty)\
            \(event.message.map { HTML(" — \($0)") } ?? HTML.empty)</li>
            """
        }
        return "<ol class=\"history\">\(rows)</ol>"
    }
}
#endif
