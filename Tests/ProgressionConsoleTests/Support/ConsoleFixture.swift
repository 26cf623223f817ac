#if Console
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Progression
import ProgressionConsole
import ProgressionOperator
import ProgressionTestSupport
import Testing
#if PostgreSQL
import ProgressionPostgres
import ProgressionPostgresTestSupport
#endif

/// The stores the console is tested on.
enum ConsoleStore: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    #if PostgreSQL
    /// A schema of its own on the test process's PostgreSQL server.
    case postgres
    #endif

    var testDescription: String { rawValue }
}

/// A store filled with tasks whose names, inputs and errors are hostile, and a console on it.
struct ConsoleFixture {
    static let token = "console-token-0123456789"
    static let scriptName = "nightly <script>alert(1)</script>"
    static let hostileError = "\"'><img src=x onerror=alert(1)>\u{07}\u{1B}[2J boom"
    static let start = Date(timeIntervalSince1970: 1_780_000_000)

    let directory: TemporaryDirectory
    let store: any TaskStoreBackend
    let console: ProgressionConsole
    let path: String

    /// A fixture on `kind`, its console at `path` (the root by default), read-only without a token.
    init(_ kind: ConsoleStore, token: String? = ConsoleFixture.token, path: String = "", seed: Bool = true) async throws {
        directory = try TemporaryDirectory()
        self.path = path
        switch kind {
        case .sqlite:
            let store = try SQLiteTaskStore(path: directory.file("tasks.sqlite"))
            self.store = store
            if seed { try await Self.seed(store) }
            console = try ProgressionConsole(store: store, configuration: Self.configuration(path: path, token: token))
        #if PostgreSQL
        case .postgres:
            let schema = "console_\(UInt32.random(in: 0...UInt32.max))"
            let store = try await PostgresTaskStore.started(configuration: LocalPostgresServer.shared().configuration(schema: schema))
            self.store = store
            if seed { try await Self.seed(store) }
            console = try ProgressionConsole(store: store, configuration: Self.configuration(path: path, token: token))
        #endif
        }
    }

    static func configuration(path: String, token: String?) -> ProgressionConsole.Configuration {
        var configuration = ProgressionConsole.Configuration(path: path, token: token)
        configuration.controlWait = .seconds(60)
        configuration.changePollInterval = .milliseconds(20)
        configuration.overviewInterval = .milliseconds(250)
        // A seeded owner counts as live however slowly a loaded machine reaches the request that reads the gauges.
        configuration.ownerStaleAfter = .seconds(3600)
        return configuration
    }

    /// Six roots: a running job with two subtasks, a failed one, a completed one and three pending ones.
    static func seed(_ store: any TaskStoreBackend) async throws {
        let running = TaskRecord(
            id: "r-run", name: scriptName, kind: "import", input: Data(#"{"file":"a.csv","note":"</pre><b>x"}"#.utf8),
            idempotencyKey: "a.csv", options: .interactive, status: .running, progress: 0.4, step: "parse <b>",
            createdAt: start, startedAt: start)
        let children = [
            TaskRecord(
                id: "r-run.1", parentID: "r-run", rootID: "r-run", name: "download", status: .completed, progress: 1,
                createdAt: start, startedAt: start, finishedAt: start.addingTimeInterval(1)),
            TaskRecord(
                id: "r-run.2", parentID: "r-run", rootID: "r-run", name: "parse <i>b.csv</i>", occurrence: 0,
                status: .running, progress: 0.2, createdAt: start.addingTimeInterval(1), startedAt: start),
        ]
        let failed = TaskRecord(
            id: "r-fail", name: "export", kind: "export", input: Data("{}".utf8), options: TaskOptions.default.retryable(),
            status: .failed, errorType: "IOError", errorDescription: hostileError, createdAt: start.addingTimeInterval(10),
            startedAt: start.addingTimeInterval(10), finishedAt: start.addingTimeInterval(11))
        let done = TaskRecord(
            id: "r-done", name: "old import", kind: "import", input: Data(#"{"file":"z.csv"}"#.utf8),
            status: .completed, progress: 1, result: Data(#"{"rows":3}"#.utf8), createdAt: start.addingTimeInterval(20),
            startedAt: start.addingTimeInterval(20), finishedAt: start.addingTimeInterval(21))
        let pending = (1...3).map { index in
            TaskRecord(
                id: "p-\(index)", name: "queued \(index)", kind: "import", input: Data(#"{"file":"p\#(index).csv"}"#.utf8),
                options: .interactive, createdAt: start.addingTimeInterval(30 + Double(index)))
        }
        let events = [
            TaskEvent(taskID: "r-run", rootID: "r-run", kind: .created, at: start, attempt: 1),
            TaskEvent(taskID: "r-run", rootID: "r-run", kind: .started, at: start, attempt: 1),
            TaskEvent(taskID: "r-fail", rootID: "r-fail", kind: .created, at: start.addingTimeInterval(10), attempt: 1),
            TaskEvent(
                taskID: "r-fail", rootID: "r-fail", kind: .failed, at: start.addingTimeInterval(11), attempt: 1,
                message: hostileError, errorType: "IOError"),
        ]
        try await store.insert([running] + children + [failed, done] + pending, events: events)
    }

    /// The console in an application, as a service mounts it.
    func application() -> some ApplicationProtocol {
        let router = Router()
        console.addRoutes(to: router)
        return Application(router: router, services: [console], logger: Logger(label: "test"))
    }

    /// Runs `body` with a client of the console (`.router`: requests go straight to the router; the console's
    /// service runs).
    func test<Value: Sendable>(_ body: @Sendable (any TestClientProtocol) async throws -> Value) async throws -> Value {
        try await application().test(.router, body)
    }
}

/// Requests and what tests read of responses.
extension TestClientProtocol {
    func get(_ uri: String, accept: String = "text/html", headers: HTTPFields = [:]) async throws -> TestResponse {
        var fields = headers
        fields[.accept] = accept
        return try await executeRequest(uri: uri, method: .get, headers: fields, body: nil)
    }

    func json(_ uri: String, headers: HTTPFields = [:]) async throws -> (TestResponse, [String: Any]) {
        let response = try await get(uri, accept: "application/json", headers: headers)
        return (response, try object(response))
    }

    func post(
        _ uri: String, form: [(String, String)], accept: String = "text/html", headers: HTTPFields = [:]
    ) async throws -> TestResponse {
        var fields = headers
        fields[.accept] = accept
        fields[.contentType] = "application/x-www-form-urlencoded"
        let body = form.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
        return try await executeRequest(uri: uri, method: .post, headers: fields, body: ByteBuffer(string: body))
    }

    private func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
    }
}

func text(_ response: TestResponse) -> String {
    String(buffer: response.body)
}

func object(_ response: TestResponse) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(text(response).utf8)) as? [String: Any], "\(text(response))")
}

/// The value of the cookie `name` that `response` sets.
func cookie(_ name: String, in response: TestResponse) -> String? {
    for field in response.headers[values: .setCookie] where field.hasPrefix(name + "=") {
        return String(field.dropFirst(name.count + 1).prefix { $0 != ";" })
    }
    return nil
}

/// The bearer header of the fixture's token.
let bearer: HTTPFields = [.authorization: "Bearer \(ConsoleFixture.token)"]
#endif
