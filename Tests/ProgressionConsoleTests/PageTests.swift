#if Console
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Progression
import ProgressionConsole
import ProgressionOperator
import ProgressionTestSupport
import Testing

/// Every page and API call of the console, on SQLite and on PostgreSQL: what it shows, as HTML for a browser and as
/// JSON shaped like progressctl's `--json`.
@Suite struct PageTests {
    @Test(arguments: ConsoleStore.allCases)
    func theOverviewCountsTasksAndListsWorkersAndRunningJobs(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        try await fixture.store.saveOwner(
            OwnerRecord(id: "worker-1", host: "batch-7", pid: 4242, startedAt: Date(), heartbeatAt: Date()))
        try await fixture.test { client in
            let page = try await client.get("/")
            #expect(page.status == .ok)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            let html = text(page)
            #expect(html.contains("<h1>Overview</h1>"))
            #expect(html.contains("data-status=\"pending\">3</span>"), "three pending")
            #expect(html.contains("<td class=\"id\">worker-1</td><td>batch-7</td>"))
            #expect(html.contains("<table class=\"small\"><tbody><tr><td><a href=\"/tasks?kind=export\">export</a>"), "kinds as links")
            #expect(html.contains("<svg class=\"chart\""))

            let (response, overview) = try await client.json("/")
            #expect(response.status == .ok)
            let stats = try #require(overview["stats"] as? [String: Any])
            #expect(stats["byStatus"] as? [String: Int] == [
                "pending": 3, "running": 1, "paused": 0, "completed": 1, "failed": 1, "cancelled": 0,
            ])
            #expect(stats["total"] as? Int == 6)
            let owners = try #require(overview["owners"] as? [[String: Any]])
            #expect(owners.first?["host"] as? String == "batch-7" && owners.first?["pid"] as? Int == 4242)
            let running = try #require(overview["running"] as? [[String: Any]])
            #expect(running.map { $0["id"] as? String } == ["r-run"])
            #expect((overview["throughput"] as? [[String: Any]])?.count == 60, "a minute a bar, the last hour")
        }
    }

    @Test(arguments: ConsoleStore.allCases)
    func theListFiltersSortsAndPagesByCursor(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        try await fixture.test { client in
            let page = try await client.get("/tasks")
            #expect(page.status == .ok)
            let html = text(page)
            for id in ["r-run", "r-fail", "r-done", "p-1", "p-2", "p-3"] {
                #expect(html.contains("<tr data-id=\"\(id)\">"), "\(id)")
            }
            #expect(html.contains("<span id=\"footer\">6 of 6 tasks</span>"))
            #expect(html.contains("data-live=\"/tasks\""), "the page subscribes to its own route")
            #expect(html.contains("<progress max=\"1\" value=\"0.4000\"></progress>"), "a live bar")

            func ids(_ query: String) async throws -> [String] {
                let (response, list) = try await client.json("/tasks?" + query)
                #expect(response.status == .ok, "\(query): \(text(response))")
                return (list["tasks"] as? [[String: Any]])?.compactMap { $0["id"] as? String } ?? []
            }
            #expect(try await ids("") == ["p-3", "p-2", "p-1", "r-done", "r-fail", "r-run"], "newest first")
            #expect(try await ids("order=oldest&limit=2") == ["r-run", "r-fail"])
            #expect(try await ids("status=failed&status=completed") == ["r-done", "r-fail"])
            #expect(try await ids("status=pending,running&kind=import&order=oldest") == ["r-run", "p-1", "p-2", "p-3"])
            #expect(try await ids("name=NIGHTLY") == ["r-run"], "the name in any case")
            #expect(try await ids("input=%22p2.csv%22") == ["p-2"], "the input's text")
            #expect(try await ids("sort=progress&limit=2") == ["r-done", "r-run"], "furthest along first")
            let since = ISO8601DateFormatter().string(from: ConsoleFixture.start.addingTimeInterval(15))
            #expect(try await ids("since=\(since)") == ["p-3", "p-2", "p-1", "r-done"])
            #expect(try await ids("until=\(since)&kind=+") == ["r-fail", "r-run"], "a blank field filters nothing")

            // Pages by cursor, each after the last of the one before, until the last.
            for order in ["newest", "oldest"] {
                var seen: [String] = []
                var after: String?
                for _ in 0..<10 {
                    let (_, list) = try await client.json("/tasks?order=\(order)&limit=4" + (after.map { "&after=\($0)" } ?? ""))
                    seen += (list["tasks"] as? [[String: Any]])?.compactMap { $0["id"] as? String } ?? []
                    #expect(list["total"] as? Int == 6 && list["totalIsLowerBound"] as? Bool == false)
                    guard let next = list["next"] as? String else { break }
                    after = next
                }
                let all = try await ids("order=\(order)")
                #expect(seen == all, "\(order): the pages hold every task once, in order")
            }
            let next = try await client.get("/tasks?limit=4")
            #expect(text(next).contains("class=\"next\" href=\"/tasks?limit=4&amp;after=c"), "a link to the next page")
        }
    }

    @Test(arguments: ConsoleStore.allCases)
    func theJobPageShowsTheTreeInputResultErrorsAndHistory(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        try await fixture.test { client in
            let page = try await client.get("/tasks/r-run")
            #expect(page.status == .ok)
            let html = text(page)
            #expect(html.contains("<tr data-id=\"r-run.2\">"), "the running subtask")
            #expect(!html.contains("<tr data-id=\"r-run.1\">"), "the finished one is counted, as watch does")
            #expect(html.contains("1 completed</td>"))
            #expect(html.contains("&quot;file&quot;: &quot;a.csv&quot;,\n"), "the input as indented JSON, lines kept")
            #expect(html.contains("<th>Idempotency key</th><td>a.csv</td>"))
            #expect(html.contains("data-live=\"/tasks/r-run\""))
            let every = text(try await client.get("/tasks/r-run?expand=all"))
            #expect(every.contains("<tr data-id=\"r-run.1\">"), "every node on asking")

            let failedPage = text(try await client.get("/tasks/r-fail"))
            #expect(failedPage.contains("<h2>Errors by attempt</h2>"))
            #expect(failedPage.contains("IOError: &quot;&#39;&gt;&lt;img src=x onerror=alert(1)&gt;\\x07\\e[2J boom"))
            let done = text(try await client.get("/tasks/r-done"))
            #expect(done.contains("&quot;rows&quot;: 3"), "the result as JSON")

            let (response, job) = try await client.json("/tasks/r-run")
            #expect(response.status == .ok)
            let tree = try #require(job["tree"] as? [[String: Any]])
            #expect(tree.map { $0["id"] as? String } == ["r-run", "r-run.1", "r-run.2"])
            #expect(tree.map { $0["depth"] as? Int } == [0, 1, 1], "as show --json")
            #expect((tree.first?["input"] as? [String: Any])?["file"] as? String == "a.csv")
            #expect((job["history"] as? [[String: Any]])?.map { $0["kind"] as? String } == ["created", "started"])
            #expect(job["actions"] as? [String] == ["cancel"], "what the lifecycle allows: no executor holds it to pause it")
            let (_, failedJob) = try await client.json("/tasks/r-fail")
            #expect((failedJob["errors"] as? [[String: Any]])?.first?["message"] as? String == ConsoleFixture.hostileError)

            let prefix = try await client.get("/tasks/r-fa")
            #expect(prefix.status == .ok, "a unique prefix of a root's id, as progressctl takes")
        }
    }

    @Test(arguments: ConsoleStore.allCases)
    func badRequestsGetAClearErrorNeverAStackTrace(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        let cases: [(String, HTTPResponse.Status, String)] = [
            ("/tasks?status=bogus", .badRequest, "invalid status 'bogus'"),
            ("/tasks?since=yesterday", .badRequest, "invalid value 'yesterday' for since"),
            ("/tasks?since=1h&until=2h", .badRequest, "since is later than until"),
            ("/tasks?after=zzz", .badRequest, "invalid page cursor 'zzz'"),
            ("/tasks?limit=0", .badRequest, "invalid limit '0'"),
            ("/tasks?sort=name", .badRequest, "invalid sort 'name'"),
            ("/tasks?sort=progress&after=c1.0.YQ", .badRequest, "another order"),
            ("/tasks/nope", .notFound, "no task with id 'nope'"),
            ("/nowhere/else", .notFound, "there is no page at /nowhere/else"),
        ]
        try await fixture.test { client in
            for (uri, status, message) in cases {
                let (response, document) = try await client.json(uri)
                #expect(response.status == status, "\(uri)")
                #expect((document["error"] as? String)?.contains(message) == true, "\(uri): \(document)")
                #expect(document["status"] as? Int == Int(status.code))
                let page = try await client.get(uri)
                #expect(page.status == status)
                let html = text(page)
                #expect(html.contains("<p class=\"error-text\" id=\"error\">"), "\(uri): the error page")
                #expect(!html.contains(".swift") && !html.contains("Swift."), "\(uri): no trace of the code")
            }
            let script = text(try await client.get("/nowhere/<script>alert(1)</script>"))
            #expect(script.contains("there is no page at /nowhere/&lt;script&gt;alert(1)&lt;/script&gt;"))
        }
        let readOnly = try await ConsoleFixture(store, token: nil)
        try await readOnly.test { client in
            let login = try await client.get("/login")
            #expect(login.status == .notFound && text(login).contains("read-only"))
        }
    }

    @Test func theAssetsAreInTheBinaryAndEveryAnswerCarriesTheSecurityHeaders() async throws {
        let fixture = try await ConsoleFixture(.sqlite)
        try await fixture.test { client in
            let script = try await client.get("/assets/console.js")
            #expect(script.status == .ok && script.headers[.contentType] == "text/javascript; charset=utf-8")
            #expect(text(script).contains("new EventSource(live)"))
            #expect(!text(script).contains("innerHTML"), "the script builds elements with textContent only")
            #expect(try await client.get("/assets/console.css").status == .ok)
            #expect(try await client.get("/assets/icon.svg").status == .ok)
            #expect(try await client.get("/assets/other.js").status == .notFound)
            for uri in ["/", "/tasks", "/tasks/r-run", "/tasks/r-fail", "/login", "/tasks/none", "/assets/console.css"] {
                let response = try await client.get(uri)
                let policy = response.headers[HTTPField.Name("Content-Security-Policy")!] ?? ""
                #expect(policy.contains("script-src 'self'") && policy.contains("style-src 'self'"), "\(uri)")
                #expect(!policy.contains("unsafe-inline") && policy.contains("frame-ancestors 'none'"))
                #expect(response.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff")
                let html = text(response)
                guard response.headers[.contentType]?.hasPrefix("text/html") == true else { continue }
                // No inline script, no style attribute, no event handler attribute: what the policy would block.
                #expect(html.components(separatedBy: "<script").count - 1 == html.components(separatedBy: "<script src=").count - 1, "\(uri)")
                #expect(!html.contains(" style="), "\(uri)")
                #expect(html.range(of: #"<[^>]*\son[a-z]+="#, options: .regularExpression) == nil, "\(uri)")
            }
        }
    }

    @Test func aServiceMountsTheConsoleUnderAPathOfItsOwn() async throws {
        let fixture = try await ConsoleFixture(.sqlite, path: "/ops/console")
        try await fixture.test { client in
            let page = text(try await client.get("/ops/console/tasks"))
            #expect(page.contains("href=\"/ops/console/tasks/r-run\""), "links within the mount path")
            #expect(page.contains("src=\"/ops/console/assets/console.js?v="))
            #expect(try await client.get("/ops/console/").status == .ok)
            #expect(try await client.get("/tasks").status == .notFound, "nothing outside it")
        }
        #expect(throws: ProgressionConsole.ConfigurationError.self) {
            _ = try ProgressionConsole(store: fixture.store, configuration: .init(path: "console/"))
        }
        #expect(throws: ProgressionConsole.ConfigurationError.self) {
            _ = try ProgressionConsole(store: fixture.store, configuration: .init(path: "", token: "short"))
        }
    }
}
#endif
