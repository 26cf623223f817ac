#if Console
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The context of the console's routes: a child of whatever context the application's router has, so that the console
/// mounts on any Hummingbird router (``ProgressionConsole/addRoutes(to:)``), carrying what the console's middleware
/// found out about the request to the routes.
package struct ConsoleRequestContext<Parent: RequestContext>: ChildRequestContext {
    package var coreContext: CoreRequestContextStorage
    /// Who asks, for what, and how to answer: set by ``ConsoleAnswerMiddleware`` before any route runs.
    var exchange: ProgressionConsole.Exchange?
    /// The fields of a change's form or JSON body (after the query string's), read and authorized by
    /// ``ChangeAccessMiddleware``.
    var form = FormFields(nil)

    package init(context: Parent) {
        coreContext = context.coreContext
    }

    /// The request's exchange; a route outside the console's middleware is a defect of the console, said as a 500.
    func answering() throws -> ProgressionConsole.Exchange {
        guard let exchange else {
            throw ConsoleError(.internalServerError, "the console's route ran without its middleware")
        }
        return exchange
    }
}

/// The headers every answer of the console carries, its assets and error pages included: a Content-Security-Policy
/// of the console's own scripts, styles and images, no sniffing, no referrer, never in a frame, and nothing cached
/// unless the route says otherwise.
package struct SecurityHeadersMiddleware<Context: RequestContext>: RouterMiddleware {
    package init() {}

    package func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response = try await next(request, context)
        SecurityHeaders.secure(&response.headers)
        return response
    }
}

/// The Content-Security-Policy and the other headers of every answer (``SecurityHeadersMiddleware``).
enum SecurityHeaders {
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        + "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

    static func secure(_ headers: inout HTTPFields) {
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        headers[.xContentTypeOptions] = "nosniff"
        headers[.referrerPolicy] = "no-referrer"
        headers[.xFrameOptions] = "DENY"
        if headers[.cacheControl] == nil { headers[.cacheControl] = "no-store" }
    }
}

/// Reads who asks and how they want the answer (``ProgressionConsole/Exchange``) for the routes; turns whatever a
/// route throws into the error page or the `{"error": …, "status": …}` document (an unexpected error logged, its
/// details never shown); gives a visitor seen for the first time the CSRF cookie of the sign-in form.
package struct ConsoleAnswerMiddleware<Parent: RequestContext>: RouterMiddleware {
    package typealias Context = ConsoleRequestContext<Parent>
    let console: ProgressionConsole

    package init(console: ProgressionConsole) {
        self.console = console
    }

    package func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let exchange = console.exchange(for: request)
        var context = context
        context.exchange = exchange
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            let (consoleError, unexpected) = ConsoleError.from(error)
            if unexpected {
                console.logger.error(
                    "console request failed",
                    metadata: ["path": "\(request.uri.path)", "error": "\(String(reflecting: error))"])
            }
            response = console.errorResponse(consoleError, exchange: exchange)
        }
        if let csrf = exchange.newCSRF {
            response.setCookie(
                Cookie(
                    name: ConsoleAccess.csrfCookie, value: csrf, path: console.cookiePath,
                    secure: exchange.secureCookies, httpOnly: true, sameSite: .strict))
        }
        return response
    }
}

/// The routes that change tasks (an action, a signal, a change by filter): the body's fields are read (64 KiB at
/// most, a form or a JSON object) and the change is refused unless the console has a token and the request carries
/// it, as a bearer header or as a session whose CSRF token the form repeats, from the console's own pages (`Origin`).
struct ChangeAccessMiddleware<Parent: RequestContext>: RouterMiddleware {
    typealias Context = ConsoleRequestContext<Parent>
    let console: ProgressionConsole

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let exchange = try context.answering()
        var context = context
        context.form = try await console.fields(of: request, exchange: exchange)
        try console.authorizeChange(request, exchange: exchange, fields: context.form)
        return try await next(request, context)
    }
}

/// A JSON document of the console's API, compact, with progressctl's `--json` encoding; a value that cannot be
/// encoded (a number JSON has no form for) is a 500 that says so, never a document that looks like an empty answer.
package struct JSONDocument<Value: Encodable>: ResponseGenerator {
    var value: Value
    var status: HTTPResponse.Status

    package init(value: Value, status: HTTPResponse.Status = .ok) {
        self.value = value
        self.status = status
    }

    package func response(from request: Request, context: some RequestContext) throws -> Response {
        try response()
    }

    package func response() throws -> Response {
        let text: String
        do {
            text = try ProgressionConsole.compact(value)
        } catch {
            throw ConsoleError(.internalServerError, "the console could not encode its answer as JSON")
        }
        return Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text + "\n")))
    }
}
#endif
