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

/// Job trees across the fleet on the console (issue 35): a parent's page shows its child jobs with their workers and
/// the running children's steps, what it waits for, its dependencies, dependents and signals, and keeps them moving
/// live; a signal form sends a signal through the store, with the token and the CSRF token like the other changes.
@Suite struct JobTreeTests {
    static let hostileChild = "part <script>alert(1)</script>"

    /// A parent `parent` waiting for its children c1 (running on w1 at host-a, with a step), c2 (completed) and c3
    /// (pending), one named ``hostileChild``; a dependency `dep-1`, a dependent `next-1`, and a signal sent to it.
    static func seed(_ store: any TaskStoreBackend) async throws {
        let start = ConsoleFixture.start
        // Its heartbeat an hour ahead: w1 reads as alive however long a loaded machine takes to reach the checks.
        try await store.saveOwner(
            OwnerRecord(
                id: "w1", host: "host-a", pid: 4242, startedAt: Date(), heartbeatAt: Date().addingTimeInterval(3_600)))
        let load = TaskRecord(
            id: "dep-1", name: "load <b>", kind: "load", input: Data("{}".utf8), status: .completed, progress: 1,
            createdAt: start, startedAt: start, finishedAt: start)
        try await store.insert([load], events: [])
        var parent = TaskRecord(
            id: "parent", name: "batch", kind: "batch", input: Data("{}".utf8), options: .interactive, status: .pending,
            progress: 0.3, createdAt: start, startedAt: start)
        parent.wait = .children(all: true)
        parent.waitingFor = "3 child jobs"
        parent.waitingProgress = 0.3
        parent.nextAttemptAt = JobWait.untilReleased
        var records = [parent]
        let children: [(String, String, TaskStatus, String?)] = [
            ("c1", hostileChild, .running, "w1"), ("c2", "part b", .completed, nil), ("c3", "part c", .pending, nil),
        ]
        for (index, (id, name, status, owner)) in children.enumerated() {
            var link = TaskRecord(
                id: "parent.\(index + 1)", parentID: "parent", rootID: "parent", name: name, status: status,
                progress: status == .completed ? 1 : 0.5, createdAt: start, startedAt: start,
                finishedAt: status.isFinished ? start : nil)
            link.childJobID = id
            link.share = 1.0 / 3
            link.awaited = true
            var job = TaskRecord(
                id: id, name: name, kind: "part", input: Data("{}".utf8), options: .interactive, status: status,
                progress: link.progress, ownerID: owner, createdAt: start, startedAt: status == .pending ? nil : start,
                finishedAt: status.isFinished ? start : nil)
            job.parentJobID = "parent"
            records += [link, job]
        }
        records.append(
            TaskRecord(
                id: "c1.1", parentID: "c1", rootID: "c1", name: "crunch <i>", status: .running, progress: 0.5,
                ownerID: "w1", createdAt: start, startedAt: start))
        try await store.insert(
            records, events: [], dependencies: [JobDependency(jobID: "parent", dependsOn: "dep-1", onFailure: .cancel)])
        var next = TaskRecord(id: "next-1", name: "report", kind: "report", input: Data("{}".utf8), createdAt: start)
        next.wait = .jobs
        next.waitingFor = "job parent"
        next.nextAttemptAt = JobWait.untilReleased
        try await store.insert(
            [next], events: [], dependencies: [JobDependency(jobID: "next-1", dependsOn: "parent", onFailure: .run)])
        _ = try await store.sendSignal(to: "parent", name: "nudge <u>", payload: Data(#"{"why":"<b>"}"#.utf8), at: start)
    }

    @Test(arguments: ConsoleStore.allCases)
    func aParentsPageShowsItsTreeAcrossHostsWhatItWaitsForAndItsRelations(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        try await Self.seed(fixture.store)
        try await fixture.test { client in
            let page = try await client.get("/tasks/parent")
            #expect(page.status == .ok)
            let html = text(page)
            #expect(html.contains("<span class=\"status pending\">waiting</span>"), "\(html)")
            #expect(html.contains("<tr><th>Waiting for</th><td>3 child jobs</td></tr>"))
            #expect(
                html.contains(
                    "<a href=\"/tasks/c1\">part &lt;script&gt;alert(1)&lt;/script&gt;</a> <span class=\"child\">job c1 · w1 on host-a</span>"),
                "the link leads to its child job and names its worker: \(html)")
            #expect(!html.contains("<script>alert(1)"), "the child's name is text")
            #expect(html.contains("<tr data-id=\"c1.1\">") && html.contains("crunch &lt;i&gt;"), "the running child's step")
            #expect(html.contains("<table class=\"related\" id=\"dependencies\">") && html.contains("load &lt;b&gt;"))
            #expect(html.contains("<table class=\"related\" id=\"dependents\">") && html.contains(">next-1</td>"))
            #expect(html.contains("if it fails: run") && html.contains("if it fails: cancel"))
            #expect(html.contains("<table class=\"signals\" id=\"signals\">") && html.contains("nudge &lt;u&gt;"))
            #expect(html.contains("waiting to be taken") && html.contains("{&quot;why&quot;:&quot;&lt;b&gt;&quot;}"))

            let (response, document) = try await client.json("/tasks/parent")
            #expect(response.status == .ok)
            let tree = try #require(document["tree"] as? [[String: Any]])
            #expect(tree.map { $0["id"] as? String } == ["parent", "parent.1", "c1", "c1.1", "parent.2", "parent.3"])
            #expect(tree.first?["waitingFor"] as? String == "3 child jobs")
            // A job that waits for its children is offered no Run now: nothing but their end releases it.
            let actions = try #require(document["actions"] as? [String])
            #expect(actions.contains("cancel") && !actions.contains("run-now"), "\(actions)")
            #expect((tree.first?["signals"] as? [[String: Any]])?.first?["name"] as? String == "nudge <u>")
            let child = try #require(tree[1]["child"] as? [String: Any])
            #expect((child["worker"] as? [String: Any])?["host"] as? String == "host-a")

            let childPage = text(try await client.get("/tasks/c1"))
            #expect(childPage.contains("<tr><th>Child job of</th><td><a href=\"/tasks/parent\">batch</a> (waiting)</td></tr>"), "\(childPage)")
            let linkPage = text(try await client.get("/tasks/parent.1"))
            #expect(linkPage.contains("<tr><th>Stands for the child job</th><td><a href=\"/tasks/c1\">c1</a> (running)</td></tr>"))
            #expect(linkPage.contains("to pause, cancel it."), "a link's page offers its child job's changes: \(linkPage)")
        }
    }

    @Test func theLiveUpdatesOfAParentMoveItsBarAndItsChildrensRows() async throws {
        let fixture = try await ConsoleFixture(.sqlite)
        try await Self.seed(fixture.store)
        let backend = fixture.store
        try await fixture.test { client in
            async let stream = client.get("/tasks/parent?events=2", accept: "text/event-stream")
            try await poll("the job page's first update to be sent") { fixture.console.liveHub.computations >= 1 }
            // A child's step moves, and the keeper raises the parent (as a worker's would), in one transaction.
            var writes: [TaskUpdate] = []
            for (id, progress) in [("c1.1", 0.9), ("parent", 0.6)] {
                var record = try #require(try await backend.task(id: id))
                record.progress = progress
                record.updatedAt = Date()
                writes.append(TaskUpdate(record, columns: .report))
            }
            _ = try await backend.apply(TaskBatch(updates: writes))
            let updates = try LiveTests.updates(text(try await stream))
            let last = try #require(updates.last?["rows"] as? [[String: Any]])
            #expect(last.first?["id"] as? String == "parent" && last.first?["progress"] as? Double == 0.6, "\(updates)")
            let step = try #require(last.first { $0["id"] as? String == "c1.1" })
            #expect(step["progress"] as? Double == 0.9)
            let link = try #require(last.first { $0["id"] as? String == "parent.1" })
            #expect(link["job"] as? String == "c1" && link["worker"] as? String == "w1 on host-a")
            #expect(last.first?["label"] as? String == "waiting")
        }
    }

    /// Signs in with the token; returns the session's cookie header and the CSRF token of its forms.
    static func signIn(_ client: some TestClientProtocol) async throws -> (HTTPFields, String) {
        let login = try await client.get("/login")
        let csrf = try #require(cookie("progression_console_csrf", in: login))
        let signedIn = try await client.post(
            "/login", form: [("token", ConsoleFixture.token), ("csrf", csrf)],
            headers: [.cookie: "progression_console_csrf=\(csrf)"])
        let session = try #require(cookie("progression_console_session", in: signedIn))
        let headers: HTTPFields = [.cookie: "progression_console_session=\(session)"]
        let page = text(try await client.get("/", headers: headers))
        let token = try #require(page.firstMatch(of: /name="csrf" value="([0-9a-f]{32})"/)?.1)
        return (headers, String(token))
    }

    @Test(arguments: ConsoleStore.allCases)
    func theSignalFormNeedsTheTokenAndCSRFRefusesBadInputAndSendsThroughTheStore(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        var gate = TaskRecord(
            id: "gate", name: "deploy <em>", kind: "deploy", input: Data("{}".utf8), status: .pending,
            createdAt: ConsoleFixture.start, startedAt: ConsoleFixture.start)
        gate.wait = .signal("approve")
        gate.waitingFor = "the signal 'approve'"
        gate.nextAttemptAt = JobWait.untilReleased
        try await fixture.store.insert([gate], events: [])
        try await fixture.test { client in
            let anonymous = text(try await client.get("/tasks/gate"))
            #expect(anonymous.contains("<a href=\"/login\">Sign in</a> to send it a signal."))
            #expect(!anonymous.contains("id=\"signal-name\""))

            let (session, csrf) = try await Self.signIn(client)
            let page = text(try await client.get("/tasks/gate", headers: session))
            #expect(page.contains("<form class=\"signal\" method=\"post\" action=\"/tasks/gate/signal\">"), "\(page)")
            #expect(page.contains("id=\"signal-name\"") && page.contains("name=\"csrf\" value=\"\(csrf)\""))
            let finished = text(try await client.get("/tasks/r-done", headers: session))
            #expect(!finished.contains("id=\"signal-name\""), "no form on a finished job's page")

            let noToken = try await client.post("/tasks/gate/signal", form: [("name", "approve")])
            #expect(noToken.status == .forbidden)
            let noCSRF = try await client.post("/tasks/gate/signal", form: [("name", "approve")], headers: session)
            #expect(noCSRF.status == .forbidden)
            let badJSON = try await client.post(
                "/tasks/gate/signal", form: [("name", "approve"), ("payload", "{oops"), ("csrf", csrf)], headers: session)
            #expect(badJSON.status == .badRequest && text(badJSON).contains("the payload is not valid JSON; nothing was sent"))
            let badName = try await client.post(
                "/tasks/gate/signal", form: [("name", "ap\u{07}prove"), ("csrf", csrf)], headers: session)
            #expect(badName.status == .badRequest && text(badName).contains("without control characters"))
            let done = try await client.post(
                "/tasks/r-done/signal", form: [("name", "approve"), ("csrf", csrf)], headers: session)
            #expect(done.status == .conflict && text(done).contains("it has finished"))
            let unknown = try await client.post(
                "/tasks/nope/signal", form: [("name", "approve"), ("csrf", csrf)], headers: session)
            #expect(unknown.status == .notFound)
            #expect(try await fixture.store.signals(of: "gate").isEmpty, "nothing was sent")

            let sent = try await client.post(
                "/tasks/gate/signal", form: [("name", "approve"), ("payload", #"{"by": "ops"}"#), ("csrf", csrf)],
                headers: session)
            #expect(sent.status == .seeOther)
            let location = try #require(sent.headers[.location])
            #expect(location.hasPrefix("/tasks/gate?notice="))
            let after = text(try await client.get(location, headers: session))
            #expect(after.contains("sent the signal &#39;approve&#39; to &#39;deploy &lt;em&gt;&#39;"), "\(after)")
            #expect(after.contains("<td class=\"name\">approve</td>"), "listed with the job's signals")

            let viaAPI = try await client.post(
                "/tasks/gate/signal", form: [("name", "later")], accept: "application/json", headers: bearer)
            #expect(viaAPI.status == .ok)
            #expect(try object(viaAPI)["name"] as? String == "later" && (try object(viaAPI))["taken"] as? Bool == false)
        }
        let signals = try await fixture.store.signals(of: "gate")
        #expect(signals.map(\.name) == ["approve", "later"])
        #expect(signals.first?.payload == Data(#"{"by": "ops"}"#.utf8))
        let released = try #require(try await fixture.store.task(id: "gate"))
        #expect(released.wait == nil && released.nextAttemptAt == nil, "the job that waited for it was released")
    }
}
#endif
