#if Console
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Progression
import ProgressionOperator

extension ProgressionConsole {
    // MARK: Reading

    func overviewRoute(_ exchange: Exchange) async throws -> Response {
        switch exchange.format {
        case .json:
            return try Self.json(try await reader.overview())
        case .events:
            let reader = reader
            return try events(exchange, key: "overview", interval: configuration.overviewInterval) {
                try Self.compact(try await reader.overviewLive())
            }
        case .html:
            let overview = try await reader.overview()
            let running = try await reader.rows(try await store.checked {
                try await $0.roots(TaskQuery(statuses: [.running], sort: .created, reverse: true, limit: ConsoleReader.overviewRunning))
            })
            return Self.html(OverviewPage.render(overview, running: running, context: exchange.context))
        }
    }

    func listRoute(_ exchange: Exchange) async throws -> Response {
        let request = try ListRequest(exchange.query)
        // Bad filters are refused before a stream opens.
        _ = try request.query()
        switch exchange.format {
        case .json:
            return try Self.json(try await reader.listJSON(request))
        case .events:
            let reader = reader
            return try events(exchange, key: "list?" + request.queryString(after: request.after), interval: configuration.updateInterval) {
                try Self.compact(try await reader.listLive(request))
            }
        case .html:
            let (page, total) = try await reader.list(request)
            let kinds = (try? await store.registeredKinds().keys.sorted()) ?? []
            return Self.html(
                TaskListPage.render(
                    request, page: page, rows: try await reader.rows(page.roots), total: total, kinds: kinds,
                    context: exchange.context))
        }
    }

    func jobRoute(_ exchange: Exchange, id: String) async throws -> Response {
        let task = try await reader.task(id)
        let expanded = exchange.query["expand"] == "all"
        switch exchange.format {
        case .events:
            let reader = reader
            let taskID = task.id
            return try events(exchange, key: "job:\(expanded ? "all:" : "")\(taskID)", interval: configuration.updateInterval) {
                try Self.compact(try await reader.jobLive(taskID, expanded: expanded))
            }
        case .json, .html:
            let job = try await reader.job(task)
            let actions = try await reader.actions(for: job)
            if exchange.format == .json { return try Self.json(reader.jobJSON(job, actions: actions)) }
            return Self.html(JobPage.render(job, actions: actions, expanded: expanded, context: exchange.context))
        }
    }

    // MARK: Changing

    /// The fields of a form or JSON body, after those of the query string (which the body's override).
    func fields(of request: Request, exchange: Exchange) async throws -> FormFields {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: 64 * 1024)
        } catch {
            throw ConsoleError(.contentTooLarge, "the request's body is larger than 64 KiB")
        }
        let text = String(buffer: buffer)
        var body: String
        if request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true {
            guard let value = JSONValue(data: Data(text.utf8)), case .object(let object) = value else {
                throw ConsoleError.badRequest("the request's body is not a JSON object")
            }
            body = FormFields.query(object.sorted { $0.key < $1.key }.compactMap { key, value in
                switch value {
                case .string(let text): (key, text)
                case .bool(let flag): (key, flag ? "1" : "0")
                case .integer(let number): (key, "\(number)")
                case .number(let number): (key, "\(number)")
                // An object or array (a signal's payload) as its JSON.
                case .object, .array: (key, value.compactText)
                case .null: nil
                }
            })
        } else {
            body = text
        }
        let query = exchange.query.pairs.map { ($0.name, $0.value) }
        let posted = FormFields(body).pairs.map { ($0.name, $0.value) }
        let postedNames = Set(posted.map(\.0))
        return FormFields(FormFields.query(posted + query.filter { !postedNames.contains($0.0) }))
    }

    /// Refuses a change unless the console has a token and the request carries it (a bearer header, or a session
    /// with its CSRF token), and unless it comes from the console's own pages (`Origin`).
    func authorizeChange(_ request: Request, exchange: Exchange, fields: FormFields) throws {
        guard access.canChange else {
            throw ConsoleError.forbidden(
                "this console is read-only: it was started without a token (--token or $PROGRESSION_CONSOLE_TOKEN)")
        }
        if exchange.wrongBearer { throw ConsoleError.forbidden("the bearer token is not the console's token") }
        if exchange.bearer { return }
        try checkOrigin(request)
        guard let csrf = access.csrf(ofSession: request.cookies[ConsoleAccess.sessionCookie]?.value) else {
            throw ConsoleError.forbidden(
                "changing tasks needs the console's token: sign in, or send it as 'Authorization: Bearer <token>'")
        }
        let given = fields["csrf"] ?? request.headers[.xCSRFToken] ?? ""
        guard given.isSameSecret(as: csrf) else {
            throw ConsoleError.forbidden("the form's CSRF token does not match this session; reload the page and try again")
        }
    }

    /// A browser's `Origin` must be this server's host.
    func checkOrigin(_ request: Request) throws {
        guard let origin = request.headers[.origin], origin != "null" else { return }
        let host = request.head.authority ?? ""
        let originHost = origin.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first.map(String.init) ?? ""
        guard !host.isEmpty, originHost == host else {
            throw ConsoleError.forbidden("a change must come from the console's own pages (Origin '\(origin)' is not this server)")
        }
    }

    static func action(_ fields: FormFields) throws -> ControlRequest.Action {
        guard let name = fields.nonEmpty("action") else {
            throw ConsoleError.badRequest("give the action: pause, resume, cancel, retry or remove")
        }
        guard let action = ControlRequest.Action(rawValue: name.lowercased()) else {
            throw ConsoleError.badRequest("invalid action '\(name)' (expected pause, resume, cancel, retry or remove)")
        }
        return action
    }

    /// `POST /tasks/{id}`: one task, through ``TaskControl`` as `progressctl pause ID` changes it.
    func actionRoute(_ exchange: Exchange, form fields: FormFields, id: String) async throws -> Response {
        let action = try Self.action(fields)
        let force = fields.flag("force")
        let dryRun = fields.flag("dryRun")
        let task = try await reader.task(id)
        try TaskControl.precheck(for: action, force: force)(task)
        let change = try await TaskControl(store: store, wait: configuration.controlWait)
            .perform(action, on: task, dryRun: dryRun)
        logger.info(
            "console change", metadata: ["task": "\(task.id)", "action": "\(action)", "outcome": "\(change.outcome)"])
        if exchange.format != .html { return try Self.json(change) }
        let verb = dryRun ? "would \(action.rawValue)" : action.rawValue
        let notice = flashes.keep(PageContext.Notice("\(verb) '\(task.name)': \(change.outcome)"))
        if action == .remove && !dryRun {
            return Self.redirect(to: exchange.context.link("/tasks") + "?notice=" + notice)
        }
        return Self.redirect(to: exchange.context.taskLink(task.id, query: "notice=" + notice))
    }

    /// `POST /tasks/{id}/signal`: sends the signal `name` with the JSON `payload` (optional) to the job, as
    /// `progressctl signal ID NAME --payload JSON` does; a link stands for its child job. Bad input is refused with a
    /// sentence (400), nothing sent.
    func signalRoute(_ exchange: Exchange, form fields: FormFields, id: String) async throws -> Response {
        guard let name = fields["name"], !name.isEmpty else {
            throw ConsoleError.badRequest("give the signal's name (what the job's code waits for)")
        }
        do {
            try JobSignalRecord.checkName(name)
        } catch {
            throw ConsoleError.badRequest(error.description)
        }
        var payload: Data?
        if let text = fields["payload"]?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty {
            let data = Data(text.utf8)
            guard (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil else {
                throw ConsoleError.badRequest("the payload is not valid JSON; nothing was sent")
            }
            guard data.count <= JobSignalRecord.maxPayloadBytes else {
                throw ConsoleError.badRequest("the payload is more than 1 MiB of JSON; nothing was sent")
            }
            payload = data
        }
        let aimed = try await reader.task(id)
        let job = try await TaskControl(store: store, wait: .zero).target(of: aimed)
        let signal: JobSignalRecord
        do {
            signal = try await store.sendSignal(to: job.id, name: name, payload: payload, at: Date())
        } catch let error as ProgressionError {
            switch error {
            case .notFound: throw ConsoleError.notFound("\(error.description); nothing was sent")
            case .invalidArgument: throw ConsoleError.badRequest("\(error.description); nothing was sent")
            default: throw ConsoleError(.conflict, "\(error.description); nothing was sent")
            }
        }
        logger.info("console signal", metadata: ["task": "\(job.id)", "signal": "\(name)"])
        if exchange.format != .html { return try Self.json(SignalJSON(signal)) }
        let notice = flashes.keep(PageContext.Notice("sent the signal '\(name)' to '\(job.name)'"))
        return Self.redirect(to: exchange.context.taskLink(job.id, query: "notice=" + notice))
    }

    /// `POST /tasks?<filters>`: every root the filters choose, as `progressctl cancel --kind …` changes them: a dry
    /// run first (`dryRun=1`), then the change (`yes=1`, the `--yes` of a command without a terminal).
    func bulkRoute(_ exchange: Exchange, form fields: FormFields) async throws -> Response {
        let action = try Self.action(fields)
        let force = fields.flag("force")
        let dryRun = fields.flag("dryRun")
        guard dryRun || fields.flag("yes") else {
            throw ConsoleError.badRequest(
                "\(action.rawValue) by filter needs yes=1 to go ahead, or dryRun=1 to see what it would do")
        }
        // The filters are those of the list's query string (the page's own address).
        let list = try ListRequest(exchange.query)
        guard !list.filter.isEmpty else {
            throw ConsoleError.badRequest(
                "give filters (status, kind, name, input, since, until) to choose the tasks to \(action.rawValue)")
        }
        let query = try list.filter.query(
            defaultStatuses: TaskControl.defaultStatuses(for: action, force: force), sinceOption: "since",
            untilOption: "until")
        let tasks = try await TaskControl.roots(matching: query, in: store)
        let outcomes = try await TaskControl(store: store, wait: configuration.controlWait)
            .perform(action, on: tasks, precheck: TaskControl.precheck(for: action, force: force), dryRun: dryRun)
        let summary = TaskControl.Summary(action: action, dryRun: dryRun, outcomes: outcomes)
        if !dryRun {
            logger.info(
                "console change by filter",
                metadata: ["action": "\(action)", "matched": "\(summary.matched)", "changed": "\(summary.changed)"])
        }
        if exchange.format != .html { return try Self.json(summary) }
        return Self.html(BulkPage.render(summary, request: list, force: force, context: exchange.context))
    }

    // MARK: Signing in

    func loginPage(_ exchange: Exchange) async throws -> Response {
        guard access.canChange else {
            throw ConsoleError.notFound("this console is read-only (started without a token): there is nothing to sign in to")
        }
        return Self.html(LoginPage.render(next: safeNext(exchange.query["next"]), context: exchange.context))
    }

    /// Where to go after signing in: a page of the console, else the overview.
    func safeNext(_ next: String?) -> String {
        guard let next, next.hasPrefix(base + "/"), !next.hasPrefix("//"), !next.contains("\\") else { return base + "/" }
        return next
    }

    func login(_ exchange: Exchange, request: Request) async throws -> Response {
        guard access.canChange else {
            throw ConsoleError.notFound("this console is read-only (started without a token): there is nothing to sign in to")
        }
        let fields = try await fields(of: request, exchange: exchange)
        try checkOrigin(request)
        let cookie = request.cookies[ConsoleAccess.csrfCookie]?.value ?? ""
        guard !cookie.isEmpty, (fields["csrf"] ?? "").isSameSecret(as: cookie) else {
            throw ConsoleError.forbidden("the sign-in form's CSRF token does not match; reload the page and try again")
        }
        guard access.isToken(fields["token"] ?? "") else {
            return Self.html(
                LoginPage.render(next: safeNext(fields["next"]), context: exchange.context, failed: true),
                status: .forbidden)
        }
        let session = access.openSession()
        var response = Self.redirect(to: safeNext(fields["next"]))
        response.setCookie(
            Cookie(
                name: ConsoleAccess.sessionCookie, value: session.id,
                maxAge: Int(access.sessionLifetime.components.seconds), path: cookiePath, secure: exchange.secureCookies,
                httpOnly: true, sameSite: .strict))
        return response
    }

    func logout(_ exchange: Exchange, request: Request) async throws -> Response {
        let fields = try await fields(of: request, exchange: exchange)
        let session = request.cookies[ConsoleAccess.sessionCookie]?.value
        if let csrf = access.csrf(ofSession: session) {
            try checkOrigin(request)
            guard (fields["csrf"] ?? "").isSameSecret(as: csrf) else {
                throw ConsoleError.forbidden("the form's CSRF token does not match this session; reload the page and try again")
            }
            access.closeSession(session)
        }
        var response = Self.redirect(to: base + "/")
        response.setCookie(
            Cookie(
                name: ConsoleAccess.sessionCookie, value: "", maxAge: 0, path: cookiePath, secure: exchange.secureCookies,
                httpOnly: true, sameSite: .strict))
        return response
    }
}
#endif
