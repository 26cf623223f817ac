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

    @Test func aJSONAnswerThatCannotBeEncodedIsAServerErrorThatSaysSo() {
        let response = ProgressionConsole.json(Unencodable())
        #expect(response.status == .internalServerError)
        let ok = ProgressionConsole.json(["a": 1])
        #expect(ok.status == .ok)
    }
}
#endif
