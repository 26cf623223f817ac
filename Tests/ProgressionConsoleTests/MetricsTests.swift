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

/// `GET /metrics` (issue 37): the fleet's gauges in Prometheus's text format, read without the token unless told.
@Suite struct MetricsTests {
    @Test(arguments: ConsoleStore.allCases)
    func theFleetsGaugesAreServedInPrometheusTextWithoutTheToken(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        try await fixture.store.saveOwner(
            OwnerRecord(id: "w1", host: "h", pid: 1, startedAt: Date(), heartbeatAt: Date(), kinds: ["import"], slots: 4))
        try await fixture.test { client in
            let response = try await client.get("/metrics", accept: "*/*")
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "text/plain; version=0.0.4; charset=utf-8")
            let lines = Set(text(response).split(separator: "\n").map(String.init))
            // The seed: a running import, three pending ones, a failed export.
            #expect(lines.contains(#"progression_jobs{kind="import",state="running"} 1"#), "\(lines.sorted())")
            #expect(lines.contains(#"progression_jobs{kind="import",state="pending"} 3"#))
            #expect(lines.contains(#"progression_jobs{kind="export",state="failed"} 1"#))
            #expect(lines.contains("progression_workers_live 1"))
            #expect(lines.contains(#"progression_slots{state="free"} 3"#))
            #expect(lines.contains { $0.hasPrefix(#"progression_oldest_ready_job_age_seconds{kind="import"} "#) })
        }
    }

    /// A running job past its stall limit (issue 37): `stalled` on its page (with how long and the limit), in the list
    /// and in the live rows, and counted on `/metrics`.
    @Test(arguments: ConsoleStore.allCases)
    func aStalledJobIsShownOnItsPageInTheListAndCountedInTheMetrics(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        var hung = TaskRecord(
            id: "r-hung", name: "hung import", kind: "import", input: Data("{}".utf8),
            options: TaskOptions.interactive.stallLimit(.seconds(30)), status: .running, progress: 0.3,
            createdAt: Date().addingTimeInterval(-600), startedAt: Date().addingTimeInterval(-600))
        hung.updatedAt = Date().addingTimeInterval(-120)
        try await fixture.store.insert([hung], events: [])
        try await fixture.test { client in
            let page = text(try await client.get("/tasks/r-hung"))
            #expect(page.contains(#"<span class="status running stalled">stalled</span>"#), "\(page)")
            #expect(page.contains("(limit 30 s)"))
            let list = text(try await client.get("/tasks"))
            #expect(list.contains(#"<span class="status running stalled">stalled</span>"#))
            let moving = text(try await client.get("/tasks/r-run"))
            #expect(!moving.contains("stalled"), "the seeded running job has no stall rule")
            let metrics = text(try await client.get("/metrics", accept: "*/*"))
            #expect(metrics.contains(#"progression_jobs_stalled{kind="import"} 1"#), "\(metrics)")
        }
    }

    /// A job's page says which version of its kind's code it began under (issue 37: versions across deploys).
    @Test(arguments: ConsoleStore.allCases)
    func aJobsPageShowsTheVersionItBeganUnder(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        var job = TaskRecord(
            id: "r-versioned", name: "resize", kind: "resize", input: Data("{}".utf8), options: .interactive,
            status: .pending, createdAt: Date())
        job.version = "2<b>"
        try await fixture.store.insert([job], events: [])
        try await fixture.test { client in
            let page = text(try await client.get("/tasks/r-versioned"))
            #expect(page.contains("<tr><th>Version</th><td>2&lt;b&gt;</td></tr>"), "\(page)")
            let unversioned = text(try await client.get("/tasks/r-run"))
            #expect(!unversioned.contains("<th>Version</th>"))
        }
    }

    @Test func withMetricsNeedTokenOnlyTheBearerReadsThem() async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteTaskStore(path: directory.file("tasks.sqlite"))
        try await ConsoleFixture.seed(store)
        var configuration = ConsoleFixture.configuration(path: "", token: ConsoleFixture.token)
        configuration.metricsNeedToken = true
        let console = try ProgressionConsole(store: store, configuration: configuration)
        let router = Router()
        console.addRoutes(to: router)
        let application = Application(router: router, services: [console])
        try await application.test(.router) { client in
            let refused = try await client.get("/metrics", accept: "*/*")
            #expect(refused.status == .forbidden)
            let wrong = try await client.get("/metrics", accept: "*/*", headers: [.authorization: "Bearer not-the-token-at-all"])
            #expect(wrong.status == .forbidden)
            let read = try await client.get(
                "/metrics", accept: "*/*", headers: [.authorization: "Bearer \(ConsoleFixture.token)"])
            #expect(read.status == .ok)
            #expect(text(read).contains("progression_workers_live 0"))
        }
        var tokenless = ConsoleFixture.configuration(path: "", token: nil)
        tokenless.metricsNeedToken = true
        #expect(throws: ProgressionConsole.ConfigurationError.self) {
            try ProgressionConsole(store: store, configuration: tokenless)
        }
    }
}
#endif
