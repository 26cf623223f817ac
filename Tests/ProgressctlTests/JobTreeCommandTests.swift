import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Job trees across the fleet from progressctl (issue 35): `submit --after`, `signal`, a waiting job in `list` and
/// `show`, a parent's links with the child jobs and their workers, and changes of a parent reaching its children with
/// no worker running.
@Suite struct JobTreeCommandTests {
    /// A parent `id` waiting for its child jobs, with a link per child (named `part N`); each child a root of its own
    /// (kind `part`) with `parentJobID` set, held by `owner` when given, with a running step when it runs.
    @discardableResult
    static func waitingParent(
        _ fixture: Fixture, id: String = "parent", children: [(id: String, status: TaskStatus, owner: String?)],
        progress: Double = 0.25
    ) async throws -> TaskRecord {
        let start = fixture.start
        var parent = TaskRecord(
            id: id, name: "batch \(id)", kind: "batch", input: Data("{}".utf8), options: .interactive,
            status: .pending, progress: progress, createdAt: start, startedAt: start)
        parent.wait = .children(all: true)
        parent.waitingFor = "\(children.count) child jobs"
        parent.waitingProgress = progress
        parent.nextAttemptAt = JobWait.untilReleased
        var records = [parent]
        for (index, child) in children.enumerated() {
            var link = TaskRecord(
                id: "\(id).\(index + 1)", parentID: id, rootID: id, name: "part \(index)", status: child.status,
                progress: child.status == .completed ? 1 : 0.5, createdAt: start, startedAt: start,
                finishedAt: child.status.isFinished ? start : nil)
            link.childJobID = child.id
            link.share = 1 / Double(children.count)
            link.awaited = true
            var job = TaskRecord(
                id: child.id, name: "part \(index)", kind: "part", input: Data("{}".utf8), options: .interactive,
                status: child.status, progress: link.progress, step: child.status == .running ? "crunching" : nil,
                ownerID: child.owner, createdAt: start,
                startedAt: child.status == .pending ? nil : start, finishedAt: child.status.isFinished ? start : nil)
            job.parentJobID = id
            records += [link, job]
            if child.status == .running {
                records.append(
                    TaskRecord(
                        id: "\(child.id).1", parentID: child.id, rootID: child.id, name: "step of \(child.id)",
                        status: .running, progress: 0.5, ownerID: child.owner, createdAt: start, startedAt: start))
            }
        }
        try await fixture.store.insert(records, events: [])
        return parent
    }

    /// An owner on another host, as a fleet's worker records itself.
    static func worker(_ fixture: Fixture, _ id: String, host: String, alive: Bool = true) async throws {
        let now = Date()
        try await fixture.store.saveOwner(
            OwnerRecord(
                id: id, host: host, pid: 4242, startedAt: now.addingTimeInterval(-60),
                heartbeatAt: alive ? now : now.addingTimeInterval(-3600)))
    }

    // MARK: submit --after

    @Test func submitAfterWritesAJobWaitingForItsDependenciesAndItsPolicy() async throws {
        let fixture = try Fixture()
        try await fixture.root("aaaa1111", status: .running)
        try await fixture.root("bbbb2222")
        let result = try await fixture.run(
            ["submit", "--allow-unregistered", "report", "--input", "{}", "--after", "aaaa", "--after", "bbbb2222",
             "--if-dependency-fails", "run"])
        #expect(result.status == 0, "\(result.stderr)")
        let id = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let job = try #require(try await fixture.store.task(id: id))
        #expect(job.status == .pending && job.waitReason == .waiting && job.displayStatus == "waiting")
        #expect(job.waitingFor == "jobs aaaa1111, bbbb2222")
        let dependencies = try await fixture.store.dependencies(of: id)
        #expect(dependencies.map(\.dependsOn).sorted() == ["aaaa1111", "bbbb2222"])
        #expect(dependencies.allSatisfy { $0.onFailure == .run })
        #expect(try await fixture.store.events(of: id).map(\.kind) == [.created, .waiting])

        // After a job that completed already: released at once by progressctl's own pass of the tree keeper.
        try await fixture.root("cccc3333", status: .completed)
        let released = try await fixture.run(
            ["submit", "--allow-unregistered", "report", "--input", "{}", "--after", "cccc3333", "--json"])
        #expect(released.status == 0, "\(released.stderr)")
        let releasedID = try #require(try jsonObjects(released.stdout).first?["id"] as? String)
        let free = try #require(try await fixture.store.task(id: releasedID))
        #expect(free.wait == nil && free.nextAttemptAt == nil && free.status == .pending)

        // From lines: "after" (an id or an array) and "ifDependencyFails" go over the command line's.
        let lines = """
            {"kind": "report", "input": 1, "after": "aaaa1111"}
            {"kind": "report", "input": 2, "after": ["aaaa1111", "bbbb"], "ifDependencyFails": "run"}
            {"kind": "report", "input": 3}
            """
        let many = try await fixture.run(
            ["submit", "--allow-unregistered", "--from", "-", "--after", "bbbb2222"], input: Data(lines.utf8))
        #expect(many.status == 0, "\(many.stderr)")
        let ids = many.stdout.split(separator: "\n").map(String.init)
        try #require(ids.count == 3)
        #expect(try await fixture.store.dependencies(of: ids[0]).map(\.dependsOn) == ["aaaa1111"])
        #expect(try await fixture.store.dependencies(of: ids[0]).first?.onFailure == .cancel)
        #expect(try await fixture.store.dependencies(of: ids[1]).map(\.onFailure) == [.run, .run])
        #expect(try await fixture.store.dependencies(of: ids[2]).map(\.dependsOn) == ["bbbb2222"], "the command line's")
    }

    @Test(arguments: [
        (["--after", "nope"], "no task with id 'nope'"),
        (["--after", "aaaa1111.1"], "is a subtask"),
        (["--after", "aaaa"], "is ambiguous"),
        (["--after", "aaaa1111/step"], "is a subtask of job 'aaaa1111', not a job"),
        (["--after", "aaaa1111", "--delay", "10m"], "not both"),
        (["--after", "aaaa1111", "--if-dependency-fails", "sometimes"], "expected cancel or run"),
        (["--if-dependency-fails", "run"], "--if-dependency-fails goes with --after"),
    ])
    func submitAfterABadReferenceIsRefusedAndWritesNothing(arguments: [String], message: String) async throws {
        let fixture = try Fixture()
        let root = try await fixture.root("aaaa1111", status: .running)
        try await fixture.root("aaaa2222")
        try await fixture.child("aaaa1111.1", of: root, name: "step")
        await fixture.store.close()
        let before = fixture.bytes()
        let result = try await fixture.run(["submit", "--allow-unregistered", "report", "--input", "{}"] + arguments)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.errorLines.count == 1 && result.stderr.contains(message), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        #expect(fixture.bytes() == before, "nothing is written")
    }

    @Test func submitFromLinesWithABadReferenceNamesItsLineAndWritesNothing() async throws {
        let fixture = try Fixture()
        try await fixture.root("aaaa1111")
        await fixture.store.close()
        let before = fixture.bytes()
        let lines = """
            {"kind": "report", "input": 1, "after": "aaaa1111"}
            {"kind": "report", "input": 2, "after": ["aaaa1111", "zzzz"]}
            {"kind": "report", "input": 3, "after": 7}
            """
        let bad = try await fixture.run(["submit", "--allow-unregistered", "--from", "-"], input: Data(lines.utf8))
        #expect(bad.status == 64)
        #expect(bad.errorLines == [#"progressctl: error: line 3: "after" must be a job id or an array of job ids"#])
        let unknown = try await fixture.run(
            ["submit", "--allow-unregistered", "--from", "-"], input: Data(lines.split(separator: "\n").prefix(2).joined(separator: "\n").utf8))
        #expect(unknown.status == 64)
        #expect(unknown.errorLines.count == 1 && unknown.stderr.contains("line 2: no task with id 'zzzz'"), "\(unknown.stderr)")
        #expect(unknown.stdout.isEmpty)
        #expect(fixture.bytes() == before, "nothing is written")
    }

    // MARK: signal

    @Test func signalReleasesAJobWaitingForItAndIsKeptForOneThatDoesNot() async throws {
        let fixture = try Fixture()
        var waiting = TaskRecord(
            id: "gate0001", name: "deploy", kind: "deploy", input: Data("{}".utf8), status: .pending,
            createdAt: fixture.start, startedAt: fixture.start)
        waiting.wait = .signal("approve")
        waiting.waitingFor = "the signal 'approve'"
        waiting.nextAttemptAt = JobWait.untilReleased
        try await fixture.store.insert([waiting], events: [])
        try await fixture.root("busy0001", status: .running)

        let listed = try await fixture.run(["list"])
        #expect(listed.stdout.contains("waiting") && listed.stdout.contains("for the signal 'approve'"), "\(listed.stdout)")

        let sent = try await fixture.run(["signal", "gate", "approve", "--payload", #"{"by": "ops", "ticket": 4411}"#])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.stdout == "sent the signal 'approve' to gate0001 (deploy) with 29 B of JSON: it waited for it, and goes on with the next worker\n")
        let released = try #require(try await fixture.store.task(id: "gate0001"))
        #expect(released.wait == nil && released.nextAttemptAt == nil && released.status == .pending)
        let signals = try await fixture.store.signals(of: "gate0001")
        #expect(signals.map(\.name) == ["approve"] && signals.first?.consumedBy == nil)
        #expect(signals.first?.payload == Data(#"{"by": "ops", "ticket": 4411}"#.utf8))

        let kept = try await fixture.run(["signal", "busy0001", "resume", "--json"])
        #expect(kept.status == 0, "\(kept.stderr)")
        let document = try #require(try jsonObjects(kept.stdout).first)
        #expect(document["released"] as? Bool == false)
        let signal = try #require(document["signal"] as? [String: Any])
        #expect(signal["name"] as? String == "resume" && signal["jobID"] as? String == "busy0001")
        #expect(signal.isNull("payload") && signal["taken"] as? Bool == false && signal.isNull("takenBy"))
        #expect((document["job"] as? [String: Any])?["state"] as? String == "running")
    }

    @Test(arguments: [
        (["signal", "nope", "approve"], "no task with id 'nope'"),
        (["signal", "done0001", "approve"], "it has finished"),
        (["signal", "busy0001", "approve", "--payload", "{not json"], "--payload is not valid JSON"),
        (["signal", "busy0001", "approve\u{1B}[2J"], "without control characters"),
        (["signal", "busy0001", ""], "without control characters"),
        (["signal", "busy0001/step", "approve"], "not a job"),
    ])
    func signalToAnUnknownOrFinishedJobOrWithBadInputIsRefusedAndWritesNothing(
        arguments: [String], message: String
    ) async throws {
        let fixture = try Fixture()
        let busy = try await fixture.root("busy0001", status: .running)
        try await fixture.child("busy0001.1", of: busy, name: "step")
        try await fixture.root("done0001", status: .completed)
        await fixture.store.close()
        let before = fixture.bytes()
        let result = try await fixture.run(arguments)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.errorLines.count == 1 && result.stderr.contains(message), "\(result.stderr)")
        #expect(fixture.bytes() == before, "nothing is written")
    }

    // MARK: show, list, watch

    @Test func showDrawsAParentsTreeAcrossHostsWithItsRelationsAndAChildNamesItsParent() async throws {
        let fixture = try Fixture()
        try await Self.worker(fixture, "w1", host: "host-a")
        try await Self.worker(fixture, "w2", host: "host-b")
        try await fixture.root("dep00001", name: "load", kind: "load", status: .completed)
        try await Self.waitingParent(
            fixture,
            children: [("c1", .running, "w1"), ("c2", .completed, "w2"), ("c3", .pending, nil)])
        try await fixture.store.insert(
            [], events: [], dependencies: [JobDependency(jobID: "parent", dependsOn: "dep00001", onFailure: .run)])
        var after = TaskRecord(
            id: "next0001", name: "report", kind: "report", input: Data("{}".utf8), createdAt: fixture.start)
        after.wait = .jobs
        after.waitingFor = "job parent"
        after.nextAttemptAt = JobWait.untilReleased
        try await fixture.store.insert(
            [after], events: [], dependencies: [JobDependency(jobID: "next0001", dependsOn: "parent", onFailure: .cancel)])
        _ = try await fixture.store.sendSignal(to: "parent", name: "approve", payload: Data(#"{"ok":true}"#.utf8), at: fixture.start)

        let text = try await fixture.run(["show", "parent"])
        #expect(text.status == 0, "\(text.stderr)")
        let out = text.stdout
        #expect(out.contains("batch parent") && out.contains("waiting") && out.contains("for 3 child jobs"), "\(out)")
        #expect(out.contains("child job c1 (part) running on worker w1 on host-a (pid 4242)"), "\(out)")
        #expect(out.contains("child job c2 (part) completed, ran on worker w2 on host-b (pid 4242)"), "\(out)")
        #expect(out.contains("child job c3 (part) pending, held by no worker"), "\(out)")
        #expect(out.contains("      step of c1  "), "the running child's steps below its link: \(out)")
        #expect(!out.contains("not expanded"))
        #expect(out.contains("runs after:") && out.contains("dep00001  load"), "\(out)")
        #expect(out.contains("if it fails: run"))
        #expect(out.contains("jobs that run after it:") && out.contains("next0001  report"), "\(out)")
        #expect(out.contains("signals:") && out.contains("approve") && out.contains("waiting to be taken"))
        #expect(out.contains(#"{"ok":true}"#))

        let json = try await fixture.run(["show", "parent", "--json"])
        let nodes = try jsonObjects(json.stdout)
        #expect(nodes.map { $0["id"] as? String } == ["parent", "parent.1", "c1", "c1.1", "parent.2", "parent.3"])
        #expect(nodes.map { $0["depth"] as? Int } == [0, 1, 2, 3, 1, 1])
        let keys = ["parentJobID", "childJobID", "waitingFor", "child", "parentJob", "dependencies", "dependents", "signals", "childJobsNotExpanded"]
        for node in nodes { #expect(keys.allSatisfy { node.keys.contains($0) }, "every key on \(node["id"] ?? "?")") }
        let head = nodes[0]
        #expect(head["state"] as? String == "waiting" && head["waitingFor"] as? String == "3 child jobs")
        #expect(head.isNull("nextAttemptAt"), "a wait until released has no time")
        #expect((head["dependencies"] as? [[String: Any]])?.first?["status"] as? String == "completed")
        #expect((head["dependencies"] as? [[String: Any]])?.first?["ifDependencyFails"] as? String == "run")
        #expect((head["dependents"] as? [[String: Any]])?.first?["id"] as? String == "next0001")
        #expect((head["signals"] as? [[String: Any]])?.first?["taken"] as? Bool == false)
        #expect(head["childJobsNotExpanded"] as? Int == 0 && head.isNull("parentJob") && head.isNull("child"))
        let link = nodes[1]
        #expect(link["childJobID"] as? String == "c1")
        let child = try #require(link["child"] as? [String: Any])
        #expect(child["status"] as? String == "running" && child["expanded"] as? Bool == true)
        #expect((child["worker"] as? [String: Any])?["host"] as? String == "host-a")
        #expect(nodes[2]["parentJobID"] as? String == "parent" && nodes[2].isNull("dependencies"))
        let pendingLink = try #require(nodes[5]["child"] as? [String: Any])
        #expect(pendingLink.isNull("worker") && pendingLink["expanded"] as? Bool == false)

        let childShow = try await fixture.run(["show", "c1"])
        #expect(childShow.stdout.contains("child job of parent (batch parent, waiting)"), "\(childShow.stdout)")
        let childJSON = try #require(try jsonObjects(try await fixture.run(["show", "c1", "--json"]).stdout).first)
        #expect((childJSON["parentJob"] as? [String: Any])?["id"] as? String == "parent")
        #expect(childJSON["parentJobID"] as? String == "parent")

        let list = try await fixture.run(["list", "--json"])
        let parentRow = try #require(try jsonObjects(list.stdout).first { $0["id"] as? String == "parent" })
        #expect(parentRow["state"] as? String == "waiting" && parentRow["waitingFor"] as? String == "3 child jobs")
        #expect(parentRow.isNull("parentJobID") && parentRow.isNull("childJobID"))
    }

    @Test func showExpandsAtMostTwentyChildJobsAndCountsTheOthers() async throws {
        let fixture = try Fixture()
        let children = (1...25).map { (id: String(format: "k%03d", $0), status: TaskStatus.running, owner: String?.none) }
        try await Self.waitingParent(fixture, children: children)
        let text = try await fixture.run(["show", "parent"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.components(separatedBy: "step of k").count - 1 == 20, "\(text.stdout)")
        #expect(text.stdout.contains("… 5 more unfinished child jobs not expanded (at most 20 are)"), "\(text.stdout)")
        let nodes = try jsonObjects(try await fixture.run(["show", "parent", "--json"]).stdout)
        #expect(nodes.first?["childJobsNotExpanded"] as? Int == 5)
        #expect(nodes.filter { ($0["child"] as? [String: Any])?["expanded"] as? Bool == true }.count == 20)
    }

    @Test func watchOfAParentFollowsItsChildJobsSteps() async throws {
        let fixture = try Fixture()
        try await Self.waitingParent(fixture, children: [("c1", .running, nil), ("c2", .pending, nil)])
        let watch = try CLI.start(
            ["--db", fixture.path, "watch", "parent", "--all", "--json", "--interval", "0.02"], in: fixture.directory)
        defer { watch.signal(SIGTERM) }
        #expect(await eventually { watch.stdout.contains(#""id":"c1.1""#) }, "the running child's step: \(watch.stdout)")
        #expect(watch.stdout.contains(#""id":"parent""#) && watch.stdout.contains(#""state":"waiting""#), "\(watch.stdout)")
        try await fixture.report("c1.1", 0.75, step: "three quarters")
        #expect(
            await eventually { watch.stdout.contains(#""step":"three quarters""#) },
            "a child job's step changed below the parent: \(watch.stdout)")
        watch.signal(SIGTERM)
        _ = try await watch.waitForEnd(timeout: .seconds(60))

        // Text lines say what a waiting job waits for where a running one has its step.
        let text = try CLI.start(["--db", fixture.path, "watch", "parent", "--interval", "0.02"], in: fixture.directory)
        defer { text.signal(SIGTERM) }
        #expect(await eventually { text.stdout.contains("parent waiting 25% for 2 child jobs\n") }, "\(text.stdout)")
        text.signal(SIGTERM)
        _ = try await text.waitForEnd(timeout: .seconds(60))
    }

    // MARK: changes

    @Test func aDirectCancelOfAParentReachesItsChildJobsWithNoWorkerRunning() async throws {
        let fixture = try Fixture()
        try await Self.waitingParent(fixture, children: [("c1", .running, "gone"), ("c2", .pending, nil), ("c3", .completed, nil)])
        let result = try await fixture.run(["cancel", "parent"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("cancel parent (batch parent): applied: pending → cancelled"), "\(result.stdout)")
        for id in ["c1", "c2"] {
            let child = try #require(try await fixture.store.task(id: id))
            #expect(child.status == .cancelled && child.ownerID == nil, "\(id) at once, no worker ran")
        }
        #expect(try await fixture.store.task(id: "c1.1")?.status == .cancelled)
        #expect(try await fixture.store.task(id: "c3")?.status == .completed)
        #expect(try await fixture.store.task(id: "parent.1")?.status == .cancelled, "the link follows its child")
    }

    @Test func aChangeAimedAtALinkActsOnItsChildJobAndRemovingAParentCountsItsChildJobs() async throws {
        let fixture = try Fixture()
        try await Self.waitingParent(fixture, children: [("c1", .pending, nil), ("c2", .running, nil)])
        let paused = try await fixture.run(["pause", "parent/part 0", "--json"])
        #expect(paused.status == 0, "\(paused.stderr)")
        let change = try #require(try jsonObjects(paused.stdout).first)
        #expect(change["id"] as? String == "c1" && change["link"] as? String == "parent.1", "\(change)")
        #expect(try await fixture.store.task(id: "c1")?.status == .paused)
        #expect(try await fixture.store.task(id: "parent.1")?.status == .paused, "the link follows at once")
        let text = try await fixture.run(["resume", "parent/part 0"])
        #expect(text.stdout.contains("resume c1 (part 0) (the child job of link parent.1): applied: paused → pending"), "\(text.stdout)")

        let removed = try await fixture.run(["remove", "parent", "--force", "--json"])
        #expect(removed.status == 0, "\(removed.stderr)")
        let document = try #require(try jsonObjects(removed.stdout).first)
        #expect(document["childJobs"] as? Int == 2)
        #expect(document["outcome"] as? String == "deleted 6 tasks with their history, 3 tasks of them in its 2 child jobs")
        for id in ["parent", "c1", "c2", "c2.1"] { #expect(try await fixture.store.task(id: id) == nil, "\(id)") }
    }
}
