#if Console
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Progression
import ProgressionOperator
import ServiceLifecycle
import Synchronization

extension ProgressionConsole {
    /// Adds the console's routes to `router` under ``Configuration/path``:
    ///
    /// | Route | Page (HTML) | API (`Accept: application/json`) |
    /// | --- | --- | --- |
    /// | `GET /` | overview | ``OverviewJSON`` |
    /// | `GET /tasks?status=…&kind=…&name=…&input=…&since=…&until=…&sort=…&order=…&limit=…&after=…` | list | ``ListJSON`` |
    /// | `GET /tasks/{id}` (`?expand=all`) | job | ``JobJSON`` |
    /// | `POST /tasks/{id}` `action=pause\|resume\|cancel\|retry\|remove` (`force=1`, `dryRun=1`) | redirect | `TaskControl.Change` |
    /// | `POST /tasks/{id}/signal` `name=…` (`payload=` JSON) | redirect | ``SignalJSON`` |
    /// | `POST /tasks?<filters>` `action=…` and `dryRun=1` or `yes=1` (`force=1`) | preview / result | `TaskControl.Summary` |
    /// | `GET /login`, `POST /login` `token=…`, `POST /logout` | signing in | — |
    /// | `GET /metrics` | the fleet's gauges (``FleetGauges``) in Prometheus's text format | — |
    ///
    /// `GET` routes also answer `Accept: text/event-stream` with the page's live updates (`event: update`, `data:` the
    /// row values as JSON; `?events=N` ends the stream after N updates).
    public func addRoutes<Router: RouterMethods>(to router: Router) {
        let group = base.isEmpty ? router.group() : router.group(RouterPath(base))
        group.add(middleware: SecurityHeadersMiddleware<Router.Context>())
        group.get("assets/:file") { _, context in self.asset(context.parameters.get("file") ?? "") }
        let pages = group.group(context: ConsoleRequestContext<Router.Context>.self)
            .add(middleware: ConsoleAnswerMiddleware(console: self))
        pages.get("") { _, context in try await self.overviewRoute(context.answering()) }
        pages.get("tasks") { _, context in try await self.listRoute(context.answering()) }
        pages.get("tasks/:id") { _, context in
            try await self.jobRoute(context.answering(), id: Self.decoded(context.parameters.get("id")))
        }
        pages.get("metrics") { _, context in try await self.metricsRoute(context.answering()) }
        pages.get("login") { _, context in try await self.loginPage(context.answering()) }
        pages.post("login") { request, context in try await self.login(context.answering(), request: request) }
        pages.post("logout") { request, context in try await self.logout(context.answering(), request: request) }
        let changes = pages.group().add(middleware: ChangeAccessMiddleware(console: self))
        changes.post("tasks") { _, context in try await self.bulkRoute(context.answering(), form: context.form) }
        changes.post("tasks/:id") { _, context in
            try await self.actionRoute(context.answering(), form: context.form, id: Self.decoded(context.parameters.get("id")))
        }
        changes.post("tasks/:id/signal") { _, context in
            try await self.signalRoute(context.answering(), form: context.form, id: Self.decoded(context.parameters.get("id")))
        }
        pages.get("**") { request, _ -> Response in
            throw ConsoleError.notFound("there is no page at \(request.uri.path)")
        }
    }

    /// `GET /metrics`: the fleet's gauges in Prometheus's text format (read at most once per
    /// ``Configuration/metricsCacheTime``). With ``Configuration/metricsNeedToken``, only with the token as a bearer.
    func metricsRoute(_ exchange: Exchange) async throws -> Response {
        if configuration.metricsNeedToken, !exchange.bearer {
            throw ConsoleError.forbidden("the metrics need the console's token as a bearer header")
        }
        let now = ContinuousClock.now
        let text: String
        if let cached = lastGauges.withLock({ $0 }), now - cached.at < configuration.metricsCacheTime {
            text = cached.text
        } else {
            let staleAfter = configuration.ownerStaleAfter
            let gauges = try await store.checked { try await FleetGauges.read(from: $0, at: Date(), ownerStaleAfter: staleAfter) }
            text = gauges.prometheusText
            lastGauges.withLock { $0 = (now, text) }
        }
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func decoded(_ parameter: String?) -> String {
        let raw = parameter ?? ""
        return raw.removingPercentEncoding ?? raw
    }

    // MARK: Answering

    /// How a request wants its answer.
    enum Format: Equatable {
        case html, json, events
    }

    /// One request: who asks, what they asked for, how to answer.
    struct Exchange: Sendable {
        var query: FormFields
        var format: Format
        var context: PageContext
        /// A CSRF cookie to set (a visitor who has not signed in, seen for the first time).
        var newCSRF: String?
        /// Whether the request carries the token as a bearer header.
        var bearer: Bool
        /// A bearer header that is not the token.
        var wrongBearer: Bool
        /// Whether the cookies set in the answer carry `Secure` (``Configuration/secureCookies``).
        var secureCookies = false
    }

    func exchange(for request: Request) -> Exchange {
        let query = FormFields(request.uri.query)
        let accept = request.headers[.accept] ?? ""
        let format: Format
        if query["format"] == "json" {
            format = .json
        } else if accept.contains("text/event-stream") {
            format = .events
        } else if accept.contains("application/json") && !accept.contains("text/html") {
            format = .json
        } else {
            format = .html
        }
        var bearer = false
        var wrongBearer = false
        if let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer ") {
            let token = String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces)
            bearer = access.isToken(token)
            wrongBearer = !bearer
        }
        let cookies = request.cookies
        var context = PageContext(base: base, access: .readOnly, csrf: "", notice: flashes.take(query["notice"]))
        var newCSRF: String?
        if access.canChange {
            if let csrf = access.csrf(ofSession: cookies[ConsoleAccess.sessionCookie]?.value) {
                context.access = .signedIn
                context.csrf = csrf
            } else if bearer {
                context.access = .signedIn
            } else {
                context.access = .signedOut
                if let existing = cookies[ConsoleAccess.csrfCookie]?.value, existing.count == 32 {
                    context.csrf = existing
                } else {
                    newCSRF = ConsoleAccess.randomToken()
                    context.csrf = newCSRF ?? ""
                }
            }
        }
        return Exchange(
            query: query, format: format, context: context, newCSRF: newCSRF, bearer: bearer, wrongBearer: wrongBearer,
            secureCookies: configuration.secureCookies ?? Self.cameOverHTTPS(request))
    }

    /// Whether a reverse proxy says the request came over HTTPS (`X-Forwarded-Proto: https`, `Forwarded: proto=https`).
    static func cameOverHTTPS(_ request: Request) -> Bool {
        if let proto = request.headers[.xForwardedProto], proto.split(separator: ",").first?
            .trimmingCharacters(in: .whitespaces).lowercased() == "https"
        {
            return true
        }
        guard let forwarded = request.headers[.forwarded]?.split(separator: ",").first else { return false }
        return forwarded.split(separator: ";").contains {
            $0.trimmingCharacters(in: .whitespaces).lowercased() == "proto=https"
        }
    }

    var cookiePath: String { base.isEmpty ? "/" : base }

    func errorResponse(_ error: ConsoleError, exchange: Exchange) -> Response {
        switch exchange.format {
        case .json, .events:
            // Two plain values: always encodable.
            let document = JSONDocument(value: ErrorJSON(error: error.message, status: Int(error.status.code)), status: error.status)
            return (try? document.response()) ?? Response(status: error.status)
        case .html:
            return Self.html(ErrorPage.render(error, context: exchange.context), status: error.status)
        }
    }

    /// `{"error": …, "status": …}`.
    struct ErrorJSON: Encodable {
        var error: String
        var status: Int
    }

    static func html(_ html: HTML, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: html.markup)))
    }

    /// `value` as the console API's JSON document (``JSONDocument``).
    static func json(_ value: some Encodable) throws -> Response {
        try JSONDocument(value: value).response()
    }

    static func redirect(to location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location])
    }

    func asset(_ name: String) -> Response {
        guard let asset = ConsoleAssets.files[name] else {
            return Self.html(
                ErrorPage.render(.notFound("there is no asset '\(name)'"), context: PageContext(base: base, access: .readOnly, csrf: "")),
                status: .notFound)
        }
        return Response(
            status: .ok,
            headers: [.contentType: asset.contentType, .cacheControl: name == "icon.svg" ? "public, max-age=86400" : "public, max-age=31536000, immutable"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: asset.body)))
    }


    /// The page's live updates: a stream of Server-Sent Events from the view `key`.
    func events(
        _ exchange: Exchange, key: String, interval: Duration, compute: @escaping @Sendable () async throws -> String
    ) throws -> Response {
        guard let stream = hub.subscribe(key: key, interval: interval, compute: compute) else {
            throw ConsoleError(
                .serviceUnavailable,
                "live updates are off: the console's service is not running (add the console to the application's services)")
        }
        let limit = exchange.query["events"].flatMap { Int($0) }.map { max(1, $0) }
        return Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
            body: ResponseBody { writer in
                try await writer.write(ByteBuffer(string: "retry: 2000\n\n"))
                var sent = 0
                for await message in stream.cancelOnGracefulShutdown() {
                    try await writer.write(message.bytes)
                    if message.isUpdate { sent += 1 }
                    if let limit, sent >= limit { break }
                }
                try await writer.finish(nil)
            })
    }

    static func compact(_ value: some Encodable) throws -> String {
        String(decoding: try JSONOutput.encoder(pretty: false).encode(value), as: UTF8.self)
    }
}

extension HTTPField.Name {
    static let contentSecurityPolicy = HTTPField.Name("Content-Security-Policy")!
    static let xContentTypeOptions = HTTPField.Name("X-Content-Type-Options")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let xFrameOptions = HTTPField.Name("X-Frame-Options")!
    static let xForwardedProto = HTTPField.Name("X-Forwarded-Proto")!
    static let forwarded = HTTPField.Name("Forwarded")!
    static let xCSRFToken = HTTPField.Name("X-CSRF-Token")!
}
#endif
