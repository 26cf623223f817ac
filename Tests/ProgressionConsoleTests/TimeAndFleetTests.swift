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

/// What the fleet and time add to the console: a job that waits for a time says so (`scheduled`) and can be run
/// now; a job that completed with failed steps counts them; the overview shows the schedules, the kinds with their
/// limits and pauses, and what each worker registered.
@Suite struct TimeAndFleetTests {
    @Test(arguments: ConsoleStore.allCases)
    func scheduledJobsFailedStepsSchedulesAndKindsAreShown(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        let start = ConsoleFixture.start
        let now = Date()
        let runAt = now.addingTimeInterval(3600)
        let scheduled = TaskRecord(
            id: "s-1", name: "nightly report", kind: "report", input: Data("{}".utf8), options: .interactive,
            createdAt: start.addingTimeInterval(40), nextAttemptAt: runAt)
        let partial = TaskRecord(
            id: "c-part", name: "partial import", kind: "import", input: Data("{}".utf8), status: .completed,
            progress: 1, createdAt: start.addingTimeInterval(41), startedAt: start.addingTimeInterval(41),
            finishedAt: start.addingTimeInterval(42))
        let steps = [
            TaskRecord(
                id: "c-part.1", parentID: "c-part", rootID: "c-part", name: "bad.csv", status: .failed,
                errorType: "ParseError", errorDescription: "line 3", createdAt: start.addingTimeInterval(41),
                startedAt: start.addingTimeInterval(41), finishedAt: start.addingTimeInterval(42)),
            TaskRecord(
                id: "c-part.2", parentID: "c-part", rootID: "c-part", name: "good.csv", status: .completed, progress: 1,
                createdAt: start.addingTimeInterval(41), startedAt: start.addingTimeInterval(41),
                finishedAt: start.addingTimeInterval(42)),
        ]
        try await fixture.store.insert([scheduled, partial] + steps, events: [])
        try await fixture.store.saveKinds(["report": StoredKind(options: .interactive, maxConcurrent: 2)], at: now)
        _ = try await fixture.store.setKindPaused("report", paused: true, at: now)
        _ = try await fixture.store.saveSchedules(
            [ScheduleRecord(
                name: "nightly <b>report</b>", kind: "report", input: nil, cron: "0 3 * * *", timeZone: "UTC",
                missed: .skip, nextFireAt: runAt, lastFireAt: start, lastJobID: "s-1", updatedAt: now)],
            at: now)
        try await fixture.store.saveOwner(
            OwnerRecord(
                id: "worker-1", host: "batch-7", pid: 4242, startedAt: now, heartbeatAt: now, kinds: ["report"],
                versions: ["report": JobVersion("3", continues: ["2"])]))
        try await fixture.test { client in
            let (_, listed) = try await client.json("/tasks?name=partial")
            let row = try #require((listed["tasks"] as? [[String: Any]])?.first)
            #expect(row["failedSteps"] as? Int == 1 && row["state"] as? String == "completed", "as list --json")
            let (_, byField) = try await client.json("/tasks?field=file%3Dp2.csv")
            #expect((byField["tasks"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["p-2"], "an input field")
            let list = text(try await client.get("/tasks"))
            #expect(list.contains("<span class=\"status pending\">scheduled</span>"), "a job that waits for a time")
            #expect(list.contains("<span class=\"failed-steps\">1 failed step</span>"))

            let job = text(try await client.get("/tasks/s-1", headers: bearer))
            #expect(job.contains("<th>Runs at</th>"))
            #expect(job.contains("id=\"action-run-now\"") && job.contains(">Run now</button>"))
            let (_, document) = try await client.json("/tasks/s-1")
            #expect((document["actions"] as? [String])?.contains("run-now") == true)
            let (_, plain) = try await client.json("/tasks/p-1")
            #expect((plain["actions"] as? [String])?.contains("run-now") == false, "a job that waits for no time")

            let (_, overview) = try await client.json("/")
            let schedule = try #require((overview["schedules"] as? [[String: Any]])?.first)
            #expect(schedule["name"] as? String == "nightly <b>report</b>" && schedule["cron"] as? String == "0 3 * * *")
            #expect(schedule["lastJobID"] as? String == "s-1" && schedule["missedTicks"] as? String == "skip")
            let kind = try #require((overview["kinds"] as? [[String: Any]])?.first { $0["name"] as? String == "report" })
            #expect(kind["maxConcurrent"] as? Int == 2 && kind["paused"] as? Bool == true && kind["workers"] as? Int == 1)
            let owner = try #require((overview["owners"] as? [[String: Any]])?.first { $0["id"] as? String == "worker-1" })
            #expect(owner["registered"] as? [String] == ["report"])
            #expect(owner["versions"] as? [String: String] == ["report": "3 (continues 2)"], "the versions it runs")
            let page = text(try await client.get("/"))
            #expect(page.contains("<tr><td>nightly &lt;b&gt;report&lt;/b&gt;</td><td>report</td><td class=\"id\">0 3 * * *</td>"))
            #expect(page.contains("at most 2 at once</td><td>paused since"))
            #expect(page.contains("<td>report 3 (continues 2)</td></tr>"), "each worker's kinds with their versions")

            let ran = try await client.post("/tasks/s-1", form: [("action", "run-now")], accept: "application/json", headers: bearer)
            #expect(ran.status == .ok, "\(text(ran))")
            #expect(try object(ran)["outcome"] as? String == "applied: pending → pending")
        }
        let after = try #require(try await fixture.store.task(id: "s-1"))
        #expect(after.nextAttemptAt == nil && after.displayStatus == "pending", "it waits no more")
    }
}
#endif
