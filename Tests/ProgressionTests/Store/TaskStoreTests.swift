import Foundation
import Progression
import Testing

/// The behaviour every ``TaskStore`` shares, run over the SQLite and the in-memory implementation.
struct TaskStoreTests {
    @Test(arguments: StoreKind.allCases)
    func everyColumnRoundTrips(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let created = Date(timeIntervalSince1970: 1_700_000_000.123)
        let megabyte = String(repeating: "ü'\"; DROP TABLE tasks; --", count: 1_048_576 / 26)
        let root = TaskRecord(
            id: "root-'quoted'-\u{1F600}", name: megabyte, kind: "import", input: Data([0, 1, 2, 255]),
            idempotencyKey: "key-1",
            options: TaskOptions.interactive.retryable().timeout(.milliseconds(1500))
                .retryPolicy(.exponential(maxAttempts: 4, initialBackoff: .milliseconds(20))).priority(7),
            status: .failed, progress: 0.25, step: "étape \"deux\"", weight: 2.5, attempt: 3, interruptions: 2,
            errorType: "MyApp.Failure", errorDescription: String(repeating: "e", count: 1_000_000),
            result: Data("{\"a\":1}".utf8), checkpoint: Data(), ownerID: "owner-1",
            leaseExpiresAt: created.addingTimeInterval(30), createdAt: created, startedAt: created.addingTimeInterval(1),
            updatedAt: created.addingTimeInterval(2), finishedAt: created.addingTimeInterval(3),
            nextAttemptAt: created.addingTimeInterval(4))
        let child = TaskRecord(
            id: "child", parentID: root.id, rootID: root.id, name: "步骤", occurrence: 1, status: .pending,
            createdAt: created)
        try await store.insert([root, child], events: [])

        let storedRoot = try #require(try await store.task(id: root.id))
        #expect(storedRoot == root)
        #expect(storedRoot.options.priority == 7)
        #expect(storedRoot.priority == 7)
        #expect(storedRoot.checkpoint == Data())
        let storedChild = try #require(try await store.task(id: "child"))
        #expect(storedChild == child)
        #expect(storedChild.progress == nil && storedChild.input == nil && storedChild.finishedAt == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func insertingAnExistingIDIsAConflictAndWritesNothing(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        try await store.insert([makeRecord(id: "a")], events: [])
        let error = await #expect(throws: TaskStoreError.self) {
            try await store.insert([makeRecord(id: "b"), makeRecord(id: "a")], events: [])
        }
        #expect(error?.reason == .conflict)
        #expect(try await store.task(id: "b") == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func aBatchFailingAtItsLastItemRollsBackWhole(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let root = makeRecord(id: "root")
        try await store.insert([root], events: [])
        var running = root
        running.status = .running
        running.progress = 0.5
        var invalid = makeRecord(id: "other")
        invalid.progress = 1.5
        let event = TaskEvent(taskID: "root", rootID: "root", kind: .started, at: Date(), attempt: 1)
        let error = await #expect(throws: TaskStoreError.self) {
            _ = try await store.apply(TaskBatch(records: [running, invalid], events: [event]))
        }
        #expect(error?.reason == .constraint)
        #expect(try await store.task(id: "root") == root)
        #expect(try await store.task(id: "other") == nil)
        #expect(try await store.events(of: "root", after: nil, limit: 10).isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func aBatchWritesRecordsProgressAndEvents(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let root = makeRecord(id: "root", owner: "me")
        let child = makeRecord(id: "child", parent: root, owner: "me")
        let theirs = makeRecord(id: "theirs", owner: "someone else")
        try await store.insert([root, theirs], events: [])
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let result = try await store.apply(
            TaskBatch(
                records: [child],
                progress: [
                    TaskProgressRecord(id: "root", progress: 0.75, step: "copying", updatedAt: now),
                    TaskProgressRecord(id: "theirs", progress: 0.1, step: nil, updatedAt: now),
                ],
                events: [
                    TaskEvent(taskID: "root", rootID: "root", kind: .step, at: now, attempt: 1, message: "copying"),
                    TaskEvent(taskID: "theirs", rootID: "theirs", kind: .step, at: now, attempt: 1),
                ],
                owner: "me"))
        #expect(result.rejectedTaskIDs == ["theirs"])
        let stored = try #require(try await store.task(id: "root"))
        #expect(stored.progress == 0.75 && stored.step == "copying" && stored.updatedAt == now)
        #expect(try await store.task(id: "child") == child)
        #expect(try await store.task(id: "theirs") == theirs)
        let events = try await store.events(of: "root", after: nil, limit: 10)
        #expect(events.map(\.kind) == [.step])
        #expect(events.first?.message == "copying")
        #expect(try await store.events(of: "theirs", after: nil, limit: 10).isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func narrowUpdatesChangeMutableColumnsOfExistingRowsOnly(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let root = makeRecord(id: "root", owner: "me")
        try await store.insert([root, makeRecord(id: "theirs", owner: "them")], events: [])
        var changed = root
        changed.status = .completed
        changed.finishedAt = root.createdAt.addingTimeInterval(9)
        changed.progress = 1
        changed.attempt = 2
        changed.result = Data("42".utf8)
        changed.name = "renamed"  // an identity column: not written by an update
        var theirs = makeRecord(id: "theirs", owner: "them")
        theirs.progress = 0.5
        let missing = makeRecord(id: "missing", owner: "me")
        let result = try await store.apply(TaskBatch(updates: [changed, theirs, missing], owner: "me"))
        #expect(result.rejectedTaskIDs.sorted() == ["missing", "theirs"])
        var expected = changed
        expected.name = root.name
        #expect(try await store.task(id: "root") == expected)
        #expect(try await store.task(id: "theirs")?.progress == nil)
        #expect(try await store.task(id: "missing") == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func updateIsACompareAndSetOnStatusAndOwner(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let root = makeRecord(id: "root", status: .running, owner: "a")
        try await store.insert([root], events: [])
        var completed = root
        completed.status = .completed
        completed.finishedAt = root.createdAt.addingTimeInterval(5)
        let event = TaskEvent(taskID: "root", rootID: "root", kind: .completed, at: Date(), attempt: 1)
        #expect(try await store.update(completed, ifStatusIn: [.pending], ownerIs: "a", events: [event]) == false)
        #expect(try await store.update(completed, ifStatusIn: [.running], ownerIs: "b", events: [event]) == false)
        #expect(try await store.update(completed, ifStatusIn: [.running], ownerIs: nil, events: [event]) == false)
        #expect(try await store.task(id: "root")?.status == .running)
        #expect(try await store.update(completed, ifStatusIn: [.running, .paused], ownerIs: "a", events: [event]))
        #expect(try await store.task(id: "root") == completed)
        #expect(try await store.events(of: "root", after: nil, limit: 10).map(\.kind) == [.completed])
        #expect(try await store.update(completed, ifStatusIn: [.running], ownerIs: "a", events: []) == false)
    }

    @Test(arguments: StoreKind.allCases)
    func treesComeParentsFirstInCreationOrder(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let root = makeRecord(id: "r", createdAt: t0)
        let b = makeRecord(id: "b", parent: root, name: "b", createdAt: t0.addingTimeInterval(2))
        let a = makeRecord(id: "a", parent: root, name: "a", createdAt: t0.addingTimeInterval(1))
        let a1 = makeRecord(id: "a1", parent: a, name: "x", createdAt: t0.addingTimeInterval(3))
        let a2 = makeRecord(id: "a2", parent: a, name: "x", occurrence: 1, createdAt: t0.addingTimeInterval(3))
        // Inserted children first: the foreign key is checked at commit.
        try await store.insert([a2, b, a1, a, root], events: [])
        #expect(try await store.tree(of: "r").map(\.id) == ["r", "a", "a1", "a2", "b"])
        #expect(try await store.tree(of: "a").map(\.id) == ["a", "a1", "a2"])
        #expect(try await store.tree(of: "missing").isEmpty)

        let twin = makeRecord(id: "twin", parent: a, name: "x", occurrence: 1)
        let error = await #expect(throws: TaskStoreError.self) { try await store.insert([twin], events: []) }
        #expect(error?.reason == .conflict)
        let orphan = makeRecord(id: "orphan", parent: makeRecord(id: "nobody"))
        let orphanError = await #expect(throws: TaskStoreError.self) { try await store.insert([orphan], events: []) }
        #expect(orphanError?.reason == .constraint)
    }

    @Test(arguments: StoreKind.allCases)
    func rootsAreListedNewestFirstWithFiltersAndPages(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        var records: [TaskRecord] = []
        for index in 0..<10 {
            records.append(
                makeRecord(
                    id: "t\(index)", status: index.isMultiple(of: 2) ? .completed : .failed,
                    createdAt: t0.addingTimeInterval(Double(index)), kind: index < 5 ? "import" : nil))
        }
        records.append(makeRecord(id: "child", parent: records[0]))
        try await store.insert(records, events: [])

        #expect(try await store.roots(TaskQuery(limit: 3)).map(\.id) == ["t9", "t8", "t7"])
        #expect(try await store.roots(TaskQuery(limit: 3, offset: 8)).map(\.id) == ["t1", "t0"])
        #expect(try await store.roots(TaskQuery(statuses: [.failed], limit: 2)).map(\.id) == ["t9", "t7"])
        #expect(try await store.roots(TaskQuery(kind: "import")).map(\.id) == ["t4", "t3", "t2", "t1", "t0"])
        #expect(
            try await store.roots(TaskQuery(statuses: [.completed], createdSince: t0.addingTimeInterval(5))).map(\.id)
                == ["t8", "t6"])
        #expect(try await store.roots(TaskQuery(statuses: [])).isEmpty)
        let statistics = try await store.statistics()
        #expect(statistics.rootsByStatus == ["completed": 5, "failed": 5])
        #expect(statistics.rootsByKind == ["import": 5, "": 5])
    }

    @Test(arguments: StoreKind.allCases)
    func eventsOfASubtreeAreItsNodesOnlyInOrder(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let root = makeRecord(id: "r")
        let child = makeRecord(id: "c", parent: root)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let events = (0..<5).map { index in
            TaskEvent(
                taskID: index.isMultiple(of: 2) ? "r" : "c", rootID: "r", kind: .step, at: now, attempt: 1,
                progress: Double(index) / 10, message: "step \(index)")
        }
        try await store.insert([root, child], events: events)
        let all = try await store.events(of: "r", after: nil, limit: 100)
        #expect(all.map(\.message) == (0..<5).map { "step \($0)" })
        #expect(all.map(\.progress) == [0, 0.1, 0.2, 0.3, 0.4])
        let ofChild = try await store.events(of: "c", after: nil, limit: 100)
        #expect(ofChild.map(\.message) == ["step 1", "step 3"])
        let page = try await store.events(of: "r", after: all[1].sequence, limit: 2)
        #expect(page.map(\.message) == ["step 2", "step 3"])
    }

    @Test(arguments: StoreKind.allCases)
    func claimingTakesUnfinishedRootsOfDeadOwnersOnly(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let old = makeRecord(id: "old", status: .running, createdAt: t0, owner: "dead")
        var urgent = makeRecord(id: "urgent", status: .pending, createdAt: t0.addingTimeInterval(5), owner: nil)
        urgent.priority = 10
        let done = makeRecord(id: "done", status: .completed, createdAt: t0, owner: "dead")
        let alive = makeRecord(id: "alive", status: .running, createdAt: t0, owner: "alive")
        let child = makeRecord(id: "old-child", parent: old, status: .running, owner: "dead")
        try await store.insert([old, urgent, done, alive, child], events: [])

        let claimed = try await store.claimRoots(
            heldBy: ["dead", nil], statuses: [.pending, .running, .paused], kinds: nil, newOwner: "me", limit: 10,
            now: Date())
        #expect(claimed.map(\.id) == ["urgent", "old"])
        #expect(claimed.map(\.ownerID) == [nil, "dead"])
        #expect(try await store.task(id: "old")?.ownerID == "me")
        #expect(try await store.task(id: "old-child")?.ownerID == "me")
        #expect(try await store.task(id: "done")?.ownerID == "dead")
        #expect(try await store.task(id: "alive")?.ownerID == "alive")
        let again = try await store.claimRoots(
            heldBy: ["dead", nil], statuses: [.pending, .running], kinds: nil, newOwner: "other", limit: 10, now: Date())
        #expect(again.isEmpty)

        let job = makeRecord(id: "job", status: .pending, kind: "export")
        let foreign = makeRecord(id: "foreign", status: .pending, kind: "unknown")
        try await store.insert([job, foreign], events: [])
        let jobs = try await store.claimRoots(
            heldBy: [nil], statuses: [.pending], kinds: ["export"], newOwner: "me", limit: 10, now: Date())
        #expect(jobs.map(\.id) == ["job"])
        #expect(try await store.task(id: "foreign")?.ownerID == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func deletingATreeRemovesItsNodesAndHistory(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let root = makeRecord(id: "r")
        let a = makeRecord(id: "a", parent: root, name: "a")
        let a1 = makeRecord(id: "a1", parent: a, name: "a1")
        let b = makeRecord(id: "b", parent: root, name: "b")
        let other = makeRecord(id: "other")
        let now = Date()
        let events = ["r", "a", "a1", "b", "other"].map {
            TaskEvent(taskID: $0, rootID: $0 == "other" ? "other" : "r", kind: .created, at: now, attempt: 1)
        }
        try await store.insert([root, a, a1, b, other], events: events)
        #expect(try await store.deleteTree(of: "a") == 2)
        #expect(try await store.tree(of: "r").map(\.id) == ["r", "b"])
        #expect(try await store.events(of: "r", after: nil, limit: 10).map(\.taskID) == ["r", "b"])
        #expect(try await store.deleteTree(of: "r") == 2)
        #expect(try await store.task(id: "r") == nil)
        #expect(try await store.task(id: "other") != nil)
        #expect(try await store.events(of: "other", after: nil, limit: 10).count == 1)
        #expect(try await store.deleteTree(of: "r") == 0)
        // With a status check: a task that is not in one of the statuses stays.
        #expect(try await store.deleteTree(of: "other", ifStatusIn: [.completed, .failed]) == nil)
        #expect(try await store.task(id: "other") != nil)
        #expect(try await store.deleteTree(of: "other", ifStatusIn: [.pending]) == 1)
    }

    @Test(arguments: StoreKind.allCases)
    func pruneDeletesOldFinishedRootsOfTheGivenStatuses(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let oldDone = makeRecord(id: "old-done", status: .completed, createdAt: t0)
        let oldFailed = makeRecord(id: "old-failed", status: .failed, createdAt: t0)
        let newDone = makeRecord(id: "new-done", status: .completed, createdAt: t0.addingTimeInterval(100))
        let running = makeRecord(id: "running", status: .running, createdAt: t0)
        let child = makeRecord(id: "old-child", parent: oldDone, status: .completed, createdAt: t0)
        try await store.insert([oldDone, oldFailed, newDone, running, child], events: [])
        let cutoff = t0.addingTimeInterval(50)
        #expect(try await store.prune(finishedBefore: cutoff, statuses: [.completed, .running]) == 1)
        #expect(try await store.task(id: "old-done") == nil)
        #expect(try await store.task(id: "old-child") == nil)
        #expect(try await store.task(id: "old-failed") != nil)
        #expect(try await store.prune(finishedBefore: cutoff, statuses: Set(TaskStatus.allCases)) == 1)
        #expect(try await store.roots(TaskQuery()).map(\.id).sorted() == ["new-done", "running"])
    }

    @Test(arguments: StoreKind.allCases)
    func idempotencyKeysAndIDPrefixesFindTasks(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        var job = makeRecord(id: "abc-1", kind: "import")
        job.idempotencyKey = "2026-11-21"
        try await store.insert([job, makeRecord(id: "abd-2"), makeRecord(id: "x%_")], events: [])
        #expect(try await store.root(kind: "import", idempotencyKey: "2026-11-21")?.id == "abc-1")
        #expect(try await store.root(kind: "export", idempotencyKey: "2026-11-21") == nil)
        var twin = makeRecord(id: "abc-3", kind: "import")
        twin.idempotencyKey = "2026-11-21"
        let error = await #expect(throws: TaskStoreError.self) { try await store.insert([twin], events: []) }
        #expect(error?.reason == .conflict)
        #expect(try await store.taskIDs(withPrefix: "ab", limit: 5) == ["abc-1", "abd-2"])
        #expect(try await store.taskIDs(withPrefix: "abc", limit: 5) == ["abc-1"])
        #expect(try await store.taskIDs(withPrefix: "x%", limit: 5) == ["x%_"])
        #expect(try await store.taskIDs(withPrefix: "%", limit: 5).isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func ownersAndControlRequestsRoundTrip(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000.5)
        var owner = OwnerRecord(id: "o1", host: "host-a", pid: 4242, startedAt: t0, heartbeatAt: t0)
        try await store.saveOwner(owner)
        owner.heartbeatAt = t0.addingTimeInterval(3)
        owner.stoppedAt = t0.addingTimeInterval(4)
        try await store.saveOwner(owner)
        #expect(try await store.owners() == [owner])

        let first = try await store.addControlRequest(
            ControlRequest(taskID: "t1", action: .pause, ownerID: "o1", requestedAt: t0))
        let second = try await store.addControlRequest(
            ControlRequest(taskID: "t2", action: .retry, ownerID: nil, requestedAt: t0))
        #expect(first != second)
        #expect(try await store.pendingControlRequests(for: "o1").map(\.taskID) == ["t1"])
        #expect(try await store.pendingControlRequests(for: nil).map(\.action) == [.retry])
        try await store.completeControlRequest(id: first, outcome: "applied", at: t0.addingTimeInterval(1))
        #expect(try await store.pendingControlRequests(for: "o1").isEmpty)
        let handled = try #require(try await store.controlRequest(id: first))
        #expect(handled.outcome == "applied" && handled.handledAt == t0.addingTimeInterval(1))
    }
}
