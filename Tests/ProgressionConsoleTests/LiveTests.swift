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

/// Live updates: every route answers `text/event-stream` with its page's values, read again when the store's change
/// counter moves, at most four times a second per page, by one poller however many pages are open.
@Suite struct LiveTests {
    /// The `data:` of each `event: update` in an event stream.
    static func updates(_ stream: String) throws -> [[String: Any]] {
        try stream.components(separatedBy: "\n\n").compactMap { block -> [String: Any]? in
            guard block.hasPrefix("event: update\ndata: ") else { return nil }
            let data = block.dropFirst("event: update\ndata: ".count)
            return try JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any]
        }
    }

    @Test(arguments: ConsoleStore.allCases)
    func eachPageStreamsItsValuesAndAgainWhenTheStoreChanges(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        let backend = fixture.store
        try await fixture.test { client in
            // The first update comes at once; a change of the running job's progress brings the second.
            async let list = client.get("/tasks?status=running&events=2", accept: "text/event-stream")
            try await poll("the list's first update to be sent") { fixture.console.liveHub.computations >= 1 }
            var record = try #require(try await backend.task(id: "r-run"))
            record.progress = 0.75
            record.updatedAt = Date()
            _ = try await backend.apply(TaskBatch(updates: [TaskUpdate(record, columns: .report)]))
            let response = try await list
            #expect(response.status == .ok && response.headers[.contentType] == "text/event-stream")
            let updates = try Self.updates(text(response))
            #expect(updates.count == 2)
            let progress = updates.compactMap { (($0["rows"] as? [[String: Any]])?.first?["progress"] as? Double) }
            #expect(progress == [0.4, 0.75], "\(updates)")
            #expect(updates.last?["footer"] as? String == "1 of 1 task")

            let job = try Self.updates(text(try await client.get("/tasks/r-run?events=1", accept: "text/event-stream")))
            let rows = try #require(job.first?["rows"] as? [[String: Any]])
            #expect(job.first?["status"] as? String == "running")
            #expect(rows.map { $0["id"] as? String } == ["r-run", "r-run.2", "r-run/…"])
            #expect(rows.last?["summary"] as? String == "1 completed", "finished siblings counted on one line")

            let overview = try Self.updates(text(try await client.get("/?events=1", accept: "text/event-stream")))
            #expect((overview.first?["byStatus"] as? [String: Int])?["running"] == 1)
        }
    }

    @Test func aPageGetsAtMostFourUpdatesASecondAndPagesOfOneViewShareOneReading() async throws {
        let fixture = try await ConsoleFixture(.sqlite)
        let store = fixture.store
        // Progress changes every 10 ms, far more often than a page may hear of them.
        let writer = Task {
            var value = 0.0
            while !Task.isCancelled {
                value = value >= 0.99 ? 0 : value + 0.001
                var record = try await store.task(id: "r-run")!
                record.progress = value
                record.updatedAt = Date()
                _ = try await store.apply(TaskBatch(updates: [TaskUpdate(record, columns: .report)]))
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        defer { writer.cancel() }
        try await fixture.test { client in
            let hub = fixture.console.liveHub
            let before = hub.computations
            let started = ContinuousClock.now
            // Eight pages of the same list, each waiting for six updates.
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try Self.updates(text(try await client.get("/tasks?status=running&events=6", accept: "text/event-stream"))).count
                    }
                }
                for try await count in group { #expect(count == 6) }
            }
            let elapsed = ContinuousClock.now - started
            let readings = hub.computations - before
            // Six updates at most four a second take at least 1.25 s (the first comes at once).
            #expect(elapsed >= .milliseconds(1250), "\(elapsed)")
            // One view for the eight pages: read about once per update, not eight times.
            #expect(readings <= 12, "\(readings) readings for 8 pages of 6 updates")
        }
    }

    @Test func withoutItsServiceTheConsoleSaysLiveUpdatesAreOff() async throws {
        let fixture = try await ConsoleFixture(.sqlite)
        let router = Router()
        fixture.console.addRoutes(to: router)
        try await Application(router: router).test(.router) { client in
            let response = try await client.get("/tasks", accept: "text/event-stream")
            #expect(response.status == .serviceUnavailable)
            #expect(text(response).contains("add the console to the application's services"))
            #expect(try await client.get("/tasks").status == .ok, "the pages work without it")
        }
    }
}
#endif
