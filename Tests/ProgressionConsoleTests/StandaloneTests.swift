#if Console
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Progression
import ProgressionOperator
import ProgressionTestSupport
import Testing
#if PostgreSQL
import ProgressionPostgres
import ProgressionPostgresTestSupport
#endif

/// `progressctl console` as an operator runs it: on a SQLite file or a PostgreSQL URL, on a port of its choosing,
/// read-only without a token, stopped by SIGTERM; bad input gets one line and a non-zero status.
@Suite struct StandaloneTests {
    /// Starts `progressctl console` and waits for the URL it prints first.
    static func start(
        _ arguments: [String], in directory: TemporaryDirectory, environment: [String: String?] = [:]
    ) async throws -> (process: ChildProcess, url: String) {
        let process = try ChildProcess("progressctl", arguments, in: directory, environment: environment)
        try await poll("the console to print its URL", timeout: .seconds(60)) {
            process.stdout.contains("\n") || !process.isRunning
        }
        let url = try #require(process.stdout.split(separator: "\n").first.map(String.init), "\(process.stderr)")
        #expect(url.hasPrefix("http://127.0.0.1:") && url.hasSuffix("/"), "\(url)")
        return (process, url)
    }

    static func request(_ url: String, method: String = "GET", accept: String = "application/json") async throws -> (Int, String) {
        var request = URLRequest(url: try #require(URL(string: url)))
        request.httpMethod = method
        request.setValue(accept, forHTTPHeaderField: "Accept")
        if method == "POST" {
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data("action=pause".utf8)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    @Test func itServesASQLiteFileReadOnlyAndStopsOnSIGTERM() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("tasks.sqlite")
        try await ConsoleFixture.seed(try SQLiteTaskStore(path: path))
        let (process, url) = try await Self.start(["console", "--db", path, "--port", "0"], in: directory)
        let (status, body) = try await Self.request(url + "tasks?status=pending")
        #expect(status == 200)
        #expect(body.contains("\"id\":\"p-1\""), "\(body)")
        let (refused, _) = try await Self.request(url + "tasks/p-1", method: "POST")
        #expect(refused == 403, "read-only without a token")
        #expect(process.stderr.contains("(read-only)"))
        process.signal(SIGTERM)
        #expect(try await process.waitForExit(timeout: .seconds(120)) == 0)
    }

    #if PostgreSQL
    @Test func itServesAPostgreSQLURLWithItsToken() async throws {
        let directory = try TemporaryDirectory()
        let server = try await LocalPostgresServer.shared()
        let schema = "standalone_\(UInt32.random(in: 0...UInt32.max))"
        let store = try await PostgresTaskStore.started(configuration: server.configuration(schema: schema))
        try await ConsoleFixture.seed(store)
        let (process, url) = try await Self.start(
            ["console", "--db", server.url(schema: schema), "--port", "0"], in: directory,
            environment: ["PROGRESSION_CONSOLE_TOKEN": ConsoleFixture.token])
        let (status, body) = try await Self.request(url + "tasks/r-run")
        #expect(status == 200 && body.contains("\"name\":\"nightly <script>alert(1)</script>\""), "\(body)")
        #expect(process.stderr.contains("(changes need the token)"))
        var request = URLRequest(url: try #require(URL(string: url + "tasks/p-1")))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("Bearer \(ConsoleFixture.token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(#"{"action": "pause"}"#.utf8)
        let (data, response) = try await URLSession.shared.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(String(decoding: data, as: UTF8.self))")
        #expect(try await store.task(id: "p-1")?.status == .paused)
        process.signal(SIGTERM)
        #expect(try await process.waitForExit(timeout: .seconds(120)) == 0)
        await store.close()
    }
    #endif

    @Test(arguments: [
        (["console", "--token", "short"], 64, "the console's token must be at least 16 characters"),
        (["console", "--port", "70000"], 64, "--port must be between 0 and 65535"),
        (["console", "--path", "no-slash"], 64, "must be empty or start with '/'"),
        (["console", "--db", "/nonexistent/tasks.sqlite"], 1, "no database at '/nonexistent/tasks.sqlite'"),
    ])
    func badInputGetsOneLineAndAStatus(arguments: [String], status: Int32, message: String) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("tasks.sqlite")
        try await ConsoleFixture.seed(try SQLiteTaskStore(path: path))
        let db = arguments.contains("--db") ? [] : ["--db", path]
        let port = arguments.contains("--port") ? [] : ["--port", "0"]
        let result = try await ChildProcess.run("progressctl", arguments + db + port, in: directory, timeout: .seconds(120))
        #expect(result.status == status, "\(result.stderr)")
        #expect(result.errorLines.count == 1 && result.stderr.contains(message), "\(result.stderr)")
    }

    @Test func aPortInUseIsSaidInOneLine() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("tasks.sqlite")
        try await ConsoleFixture.seed(try SQLiteTaskStore(path: path))
        let (first, url) = try await Self.start(["console", "--db", path, "--port", "0"], in: directory)
        let port = try #require(url.split(separator: ":").last.map { String($0.dropLast()) })
        let second = try await ChildProcess.run("progressctl", ["console", "--db", path, "--port", port], in: directory)
        #expect(second.status != 0)
        #expect(second.errorLines.count == 1, "\(second.stderr)")
        #expect(second.stderr.contains("progressctl: error: cannot listen on 127.0.0.1:\(port): Address already in use"), "\(second.stderr)")
        first.signal(SIGTERM)
        _ = try await first.waitForExit(timeout: .seconds(120))
    }
}
#endif
