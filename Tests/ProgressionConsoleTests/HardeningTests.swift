#if Console
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Progression
import ProgressionConsole
import ProgressionTestSupport
import Testing

/// The console's cookies behind HTTPS, its one comparison of secrets, and a JSON answer that cannot be encoded
/// (issue 36).
@Suite struct HardeningTests {
    static func setCookie(_ name: String, in response: TestResponse) -> String {
        response.headers[values: .setCookie].first { $0.hasPrefix(name + "=") } ?? ""
    }

    /// (the console's setting, the request's forwarding headers, whether the cookies carry `Secure`).
    static let cases: [(setting: Bool?, headers: [(String, String)], secure: Bool)] = [
        (nil, [], false),  // plain HTTP: a Secure cookie would never come back
        (nil, [("X-Forwarded-Proto", "https")], true),
        (nil, [("X-Forwarded-Proto", "https, http")], true),  // the first proxy's word counts
        (nil, [("X-Forwarded-Proto", "http")], false),
        (nil, [("Forwarded", "for=192.0.2.1;proto=https;host=jobs.example")], true),
        (nil, [("Forwarded", "for=192.0.2.1;proto=http")], false),
        (true, [], true),  // reached over HTTPS only: always
        (false, [("X-Forwarded-Proto", "https")], false),
    ]

    @Test(arguments: cases.indices)
    func theCookiesCarrySecureWhenTheRequestCameOverHTTPSOrTheSettingSays(row: Int) async throws {
        let row = Self.cases[row]
        let directory = try TemporaryDirectory()
        let store = try SQLiteTaskStore(path: directory.file("tasks.sqlite"))
        var configuration = ConsoleFixture.configuration(path: "", token: ConsoleFixture.token)
        configuration.secureCookies = row.setting
        let console = try ProgressionConsole(store: store, configuration: configuration)
        let router = Router()
        console.addRoutes(to: router)
        var fields = HTTPFields()
        for (name, value) in row.headers { fields[HTTPField.Name(name)!] = value }
        let forwarded = fields
        try await Application(router: router, services: [console]).test(.router) { client in
            let login = try await client.get("/login", headers: forwarded)
            let csrf = try #require(cookie("progression_console_csrf", in: login))
            #expect(Self.setCookie("progression_console_csrf", in: login).contains("; Secure") == row.secure)
            var headers = forwarded
            headers[.cookie] = "progression_console_csrf=\(csrf)"
            let signedIn = try await client.post(
                "/login", form: [("token", ConsoleFixture.token), ("csrf", csrf)], headers: headers)
            #expect(signedIn.status == .seeOther)
            let session = Self.setCookie("progression_console_session", in: signedIn)
            #expect(session.contains("HttpOnly") && session.contains("; Secure") == row.secure, "\(session)")
        }
    }

    static let secrets: [(given: String, expected: String, same: Bool)] = [
        ("0123456789abcdef", "0123456789abcdef", true),
        ("0123456789abcdeF", "0123456789abcdef", false),
        ("0123456789abcde", "0123456789abcdef", false),  // a prefix
        ("0123456789abcdef0", "0123456789abcdef", false),  // longer
        ("", "0123456789abcdef", false),
        ("", "", true),
    ]

    @Test(arguments: secrets.indices)
    func oneComparisonOfSecretsTellsEqualFromEverythingElse(row: Int) {
        let row = Self.secrets[row]
        #expect(ConsoleAccess.isSameSecret(Array(row.given.utf8), expected: Array(row.expected.utf8)) == row.same)
        #expect(ConsoleAccess(token: "0123456789abcdef").isToken(row.given) == (row.expected == "0123456789abcdef" && row.same))
    }

    struct Unencodable: Encodable {
        func encode(to encoder: any Encoder) throws {
            throw EncodingError.invalidValue(0, .init(codingPath: [], debugDescription: "no JSON for this"))
        }
    }

    /// A route of the console's own routes (its context and middleware) whose document cannot be encoded: a 500 that
    /// says so, as JSON to a JSON client and as the error page to a browser, with the console's headers; never `{}`.
    @Test func aJSONAnswerThatCannotBeEncodedIsAServerErrorThatSaysSo() async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteTaskStore(path: directory.file("tasks.sqlite"))
        let console = try ProgressionConsole(store: store, configuration: ConsoleFixture.configuration(path: "", token: nil))
        let router = Router()
        let pages = router.group()
            .add(middleware: SecurityHeadersMiddleware())
            .group(context: ConsoleRequestContext<BasicRequestContext>.self)
            .add(middleware: ConsoleAnswerMiddleware(console: console))
        // Returned as a ResponseGenerator: the router encodes it, and the middleware answers what that throws.
        pages.get("bad") { _, _ in JSONDocument(value: Unencodable()) }
        pages.get("good") { _, _ in JSONDocument(value: ["a": 1]) }
        try await Application(router: router).test(.router) { client in
            let bad = try await client.execute(uri: "/bad", method: .get, headers: [.accept: "application/json"])
            #expect(bad.status == .internalServerError)
            #expect(String(buffer: bad.body).contains("the console could not encode its answer as JSON"))
            #expect(bad.headers[.contentType] == "application/json; charset=utf-8")
            #expect(bad.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff")
            let page = try await client.execute(uri: "/bad", method: .get)
            #expect(page.status == .internalServerError)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            #expect(String(buffer: page.body).contains("the console could not encode its answer as JSON"))
            let good = try await client.execute(uri: "/good", method: .get, headers: [.accept: "application/json"])
            #expect(good.status == .ok)
            #expect(String(buffer: good.body) == #"{"a":1}"# + "\n")
        }
    }

    /// The console's middleware is its own: an application's route beside it on the same router keeps its answers as
    /// they are, while every answer of the console (a page, an asset, a page that is not there) carries its headers.
    @Test func theConsolesMiddlewareStaysWithinItsRoutes() async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteTaskStore(path: directory.file("tasks.sqlite"))
        let console = try ProgressionConsole(store: store, configuration: ConsoleFixture.configuration(path: "/jobs", token: nil))
        let router = Router()
        router.get("health") { _, _ in "ok" }
        console.addRoutes(to: router)
        try await Application(router: router, services: [console]).test(.router) { client in
            let own = try await client.execute(uri: "/health", method: .get)
            #expect(own.status == .ok)
            #expect(own.headers[HTTPField.Name("Content-Security-Policy")!] == nil)
            for path in ["/jobs/", "/jobs/assets/console.css", "/jobs/assets/nothing.js", "/jobs/nothing", "/jobs/tasks/none"] {
                let answer = try await client.execute(uri: path, method: .get)
                #expect(answer.headers[HTTPField.Name("Content-Security-Policy")!]?.hasPrefix("default-src 'none'") == true, "\(path)")
                #expect(answer.headers[HTTPField.Name("X-Frame-Options")!] == "DENY", "\(path)")
            }
        }
    }
}
#endif
