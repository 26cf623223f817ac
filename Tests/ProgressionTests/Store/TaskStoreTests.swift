import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// The contract every store shares, run over each implementation.
struct TaskStoreTests {
    /// The stores whose calls run on a serial executor of their own name it, so that the executor's writer runs its
    /// batches on it and switches no thread on the way into the store and back (the in-memory store's actor on the
    /// cooperative pool cost two hand-offs a batch: docs/performance.md, eleventh pass).
    @Test(arguments: [StoreKind.sqlite, .memory])
    func aStoreOnASerialExecutorOfItsOwnSharesItWithTheWriter(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        #expect(store.writerExecutor != nil)
    }

    @Test(arguments: StoreKind.allCases)
    func everyColumnRoundTrips(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
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
            createdAt: created, startedAt: created.addingTimeInterval(1),
            updatedAt: created.addingTimeInterval(2), finishedAt: created.addingTimeInterval(3),
            nextAttemptAt: created.addingTimeInterval(4), total: 300_000_000, rate: 0.0125)
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
        #expect(storedChild.total == nil && storedChild.rate == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func insertingAnExistingIDIsAConflictAndWritesNothing(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
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
        let store = try await kind.make(in: directory)
        let root = makeRecord(id: "root")
        let other = makeRecord(id: "other")
        try await store.insert([root, other], events: [])
        var running = root
        running.status = .running
        running.progress = 0.5
        var invalid = other
        invalid.progress = 1.5
        let event = TaskEvent(taskID: "root", rootID: "root", kind: .started, at: Date(), attempt: 1)
        let error = await #expect(throws: TaskStoreError.self) {
            _ = try await store.apply(
                TaskBatch(
                    inserts: [makeRecord(id: "new")],
                    updates: [TaskUpdate(running, columns: .all), TaskUpdate(invalid, columns: [.progress])],
                    events: [event]))
        }
        #expect(error?.reason == .constraint)
        #expect(try await store.task(id: "root") == root)
        #expect(try await store.task(id: "other") == other)
        #expect(try await store.task(id: "new") == nil)
        #expect(try await store.events(of: "root").isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func aBatchWritesNewRowsChangedColumnsAndEvents(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let root = makeRecord(id: "root", owner: "me")
        let theirs = makeRecord(id: "theirs", owner: "someone else")
        try await store.insert([root, theirs], events: [])
        let child = makeRecord(id: "child", parent: root)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        var progressed = root
        progressed.progress = 0.75
        progressed.step = "copying"
        progressed.updatedAt = now
        var theirsProgressed = theirs
        theirsProgressed.progress = 0.1
        let result = try await store.apply(
            TaskBatch(
                inserts: [child],
                updates: [
                    TaskUpdate(progressed, columns: TaskColumns.report),
                    TaskUpdate(theirsProgressed, columns: [.progress]),
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
        let events = try await store.events(of: "root")
        #expect(events.map(\.kind) == [.step])
        #expect(events.first?.message == "copying")
        #expect(try await store.events(of: "theirs").isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func narrowUpdatesWriteTheirColumnsOfExistingRowsOnly(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let root = makeRecord(id: "root", owner: "me")
        try await store.insert([root, makeRecord(id: "theirs", owner: "them")], events: [])
        var changed = root
        changed.status = .completed
        changed.finishedAt = root.createdAt.addingTimeInterval(9)
        changed.progress = 1
        changed.attempt = 2
        changed.result = Data("42".utf8)
        changed.name = "renamed"  // an identity column: never written by an update
        changed.step = "not written"  // not among the columns below
        var theirs = makeRecord(id: "theirs", owner: "them")
        theirs.progress = 0.5
        let missing = makeRecord(id: "missing", owner: "me")
        let columns: TaskColumns = [.status, .finishedAt, .progress, .attempt, .result]
        let result = try await store.apply(
            TaskBatch(
                updates: [
                    TaskUpdate(changed, columns: columns), TaskUpdate(theirs, columns: [.progress]),
                    TaskUpdate(missing, columns: [.progress]),
                ], owner: "me"))
        #expect(result.rejectedTaskIDs.sorted() == ["missing", "theirs"])
        var expected = changed
        expected.name = root.name
        expected.step = root.step
        #expect(try await store.task(id: "root") == expected)
        #expect(try await store.task(id: "theirs")?.progress == nil)
        #expect(try await store.task(id: "missing") == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func aSubtaskIsFencedByItsRootsOwner(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let root = makeRecord(id: "root", status: .running, owner: "old")
        var child = makeRecord(id: "root.1", parent: root, status: .running)
        try await store.insert([root, child], events: [])
        // Another owner takes the tree: the old owner's writes to it are rejected, the new owner's go through.
        _ = try await store.claimRoots(RootClaim(fromOwners: ["old"], kinds: nil, newOwner: "new", limit: 10))
        child.progress = 0.5
        let late = try await store.apply(
            TaskBatch(
                inserts: [makeRecord(id: "root.2", parent: root, name: "late")],
                updates: [TaskUpdate(child, columns: [.progress])],
                events: [
                    TaskEvent(taskID: "root.1", rootID: "root", kind: .step, at: Date(), attempt: 1),
                    TaskEvent(taskID: "root.2", rootID: "root", kind: .created, at: Date(), attempt: 1),
                ],
                owner: "old"))
        #expect(late.rejectedTaskIDs.sorted() == ["root.1", "root.2"])
        #expect(try await store.task(id: "root.1")?.progress == nil)
        #expect(try await store.task(id: "root.2") == nil)
        #expect(try await store.events(of: "root").isEmpty)
        let current = try await store.apply(TaskBatch(updates: [TaskUpdate(child, columns: [.progress])], owner: "new"))
        #expect(current.rejectedTaskIDs.isEmpty)
        #expect(try await store.task(id: "root.1")?.progress == 0.5)
    }

    /// A root's own row is fenced like its subtasks (``BatchFence``), and a job queued unowned in a writer's memory
    /// is written only while it is still unowned with the status the writer read.
    @Test(arguments: StoreKind.allCases)
    func aRootIsWrittenByItsOwnerAndAQueuedJobWhileNobodyTookIt(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        var mine = makeRecord(id: "mine", status: .running, owner: "o")
        var theirs = makeRecord(id: "theirs", status: .running, owner: "p")
        var queued = makeRecord(id: "queued", status: .pending, owner: nil)
        var taken = makeRecord(id: "taken", status: .pending, owner: nil)
        try await store.insert([mine, theirs, queued, taken], events: [])
        _ = try await store.transferTree(of: "taken", ifStatusIn: [.pending], from: nil, to: "p")
        mine.priority = 5
        theirs.priority = 5
        queued.priority = 5
        taken.priority = 5
        let result = try await store.apply(
            TaskBatch(
                updates: [
                    TaskUpdate(mine, columns: [.priority]), TaskUpdate(theirs, columns: [.priority]),
                    TaskUpdate(queued, columns: [.priority], unownedWithStatus: .pending),
                    TaskUpdate(taken, columns: [.priority], unownedWithStatus: .pending),
                ],
                events: ["mine", "theirs", "queued", "taken"].map {
                    TaskEvent(taskID: $0, rootID: $0, kind: .step, at: Date(), attempt: 1)
                },
                owner: "o"))
        #expect(result.rejectedTaskIDs == ["theirs", "taken"])
        #expect(try await store.task(id: "mine")?.priority == 5)
        #expect(try await store.task(id: "queued")?.priority == 5)
        #expect(try await store.task(id: "theirs")?.priority == 0)
        #expect(try await store.task(id: "taken")?.priority == 0)
        var counts: [String: Int] = [:]
        for id in ["mine", "theirs", "queued", "taken"] { counts[id] = try await store.events(of: id).count }
        #expect(counts == ["mine": 1, "theirs": 0, "queued": 1, "taken": 0])
    }

    /// A batch that inserts a root whose id another owner's row has (a tool's batch: the executor draws fresh ids)
    /// writes none of that tree's updates.
    @Test(arguments: StoreKind.allCases)
    func aRootInsertThatFindsItsIDTakenLeavesTheStoredTreeAlone(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        try await store.insert([makeRecord(id: "r", status: .running, owner: "p")], events: [])
        var mine = makeRecord(id: "r", status: .running, owner: "o")
        mine.priority = 9
        let result = try await store.apply(
            TaskBatch(inserts: [mine], updates: [TaskUpdate(mine, columns: [.priority])], owner: "o"))
        #expect(result.conflictingTaskIDs == ["r"] && result.rejectedTaskIDs == ["r"])
        #expect(try await store.task(id: "r")?.priority == 0)
        #expect(try await store.task(id: "r")?.ownerID == "p")
    }

    @Test(arguments: StoreKind.allCases)
    func aChangeGoesThroughTheLifecycleWithACompareAndSet(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        var root = makeRecord(id: "root", status: .running, owner: "a", kind: "job")
        root.options = TaskOptions.interactive.retryable()
        let child = makeRecord(id: "root.1", parent: root, status: .running, owner: "a")
        let done = makeRecord(id: "root.2", parent: root, name: "done", status: .completed, owner: "a")
        try await store.insert([root, child, done], events: [])
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func request(
            _ transition: TaskLifecycle.Transition, status: TaskStatus, owner: String?,
            requester: TaskChangeRequester = .operatorWithoutOwner
        ) -> TaskChangeRequest {
            TaskChangeRequest(
                taskID: "root", transition: transition, requester: requester, expectedStatus: status,
                checksOwner: true, expectedOwner: owner, message: "by test", at: now)
        }
        // What was read no longer holds: nothing is written.
        let stale = await #expect(throws: TaskStoreError.self) {
            try await store.change(request(.cancel, status: .pending, owner: "a"))
        }
        #expect(stale?.reason == .conflict)
        let otherOwner = await #expect(throws: TaskStoreError.self) {
            try await store.change(request(.cancel, status: .running, owner: "b"))
        }
        #expect(otherOwner?.reason == .conflict)
        // The lifecycle refuses: nothing is written.
        let refused = await #expect(throws: ProgressionError.self) {
            try await store.change(request(.pause, status: .running, owner: "a"))
        }
        #expect(refused?.description.contains("no running executor holds it") == true)
        #expect(try await store.task(id: "root") == root)
        // Cancelling cancels the unfinished subtasks with it, with one event.
        let cancelled = try await store.change(request(.cancel, status: .running, owner: "a"))
        #expect(cancelled.after?.status == .cancelled && cancelled.cascaded == 1)
        let statuses = Dictionary(uniqueKeysWithValues: try await store.tree(of: "root").map { ($0.id, $0.status) })
        #expect(statuses == ["root": .cancelled, "root.1": .cancelled, "root.2": .completed])
        let events = try await store.events(of: "root")
        #expect(events.map(\.kind) == [.cancelled] && events.first?.message == "by test")
        // Retried without an owner: pending, next attempt, no owner.
        let retried = try await store.change(request(.retry, status: .cancelled, owner: "a"))
        #expect(retried.after?.status == .pending && retried.after?.attempt == 2 && retried.after?.ownerID == nil)
        // Removing a finished task deletes its tree and history.
        _ = try await store.change(request(.cancel, status: .pending, owner: nil))
        let removed = try await store.change(request(.remove, status: .cancelled, owner: nil))
        #expect(removed.deleted == 3)
        #expect(try await store.tree(of: "root").isEmpty)
        #expect(try await store.events(of: "root").isEmpty)
        let missing = await #expect(throws: TaskStoreError.self) {
            try await store.change(request(.cancel, status: .running, owner: "a"))
        }
        #expect(missing?.reason == .notFound)
    }

    @Test(arguments: StoreKind.allCases)
    func treesComeParentsFirstInCreationOrder(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let root = makeRecord(id: "r", createdAt: t0)
        let b = makeRecord(id: "b", parent: root, name: "b", createdAt: t0.addingTimeInterval(2))
        let a = makeRecord(id: "a", parent: root, name: "a", createdAt: t0.addingTimeInterval(1))
        let a1 = makeRecord(id: "a1", parent: a, name: "x", createdAt: t0.addingTimeInterval(3))
        let a2 = makeRecord(id: "a2", parent: a, name: "x", occurrence: 1, createdAt: t0.addingTimeInterval(3))
        try await store.insert([a2, b, a1, a, root], events: [])
        #expect(try await store.tree(of: "r").map(\.id) == ["r", "a", "a1", "a2", "b"])
        #expect(try await store.tree(of: "a").map(\.id) == ["a", "a1", "a2"])
        #expect(try await store.tree(of: "missing").isEmpty)

        let twin = makeRecord(id: "twin", parent: a, name: "x", occurrence: 1)
        let error = await #expect(throws: TaskStoreError.self) { try await store.insert([twin], events: []) }
        #expect(error?.reason == .conflict)
    }

    @Test(arguments: StoreKind.allCases)
    func rootsAreListedWithFiltersSortsPagesAndACount(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        var records: [TaskRecord] = []
        for index in 0..<10 {
            var record = makeRecord(
                id: "t\(index)", name: index.isMultiple(of: 3) ? "Nightly Import \(index)" : "export \(index)",
                status: index.isMultiple(of: 2) ? .completed : .failed, createdAt: t0.addingTimeInterval(Double(index)),
                kind: index < 5 ? "import" : nil)
            record.progress = Double(10 - index) / 10
            record.updatedAt = t0.addingTimeInterval(Double(100 - index))
            records.append(record)
        }
        records.append(makeRecord(id: "child", parent: records[0]))
        records.append(makeRecord(id: "waiting", status: .pending, createdAt: t0.addingTimeInterval(20)))
        try await store.insert(records, events: [])

        #expect(try await store.roots(TaskQuery(limit: 3)).map(\.id) == ["waiting", "t9", "t8"])
        #expect(try await store.roots(TaskQuery(limit: 3, offset: 9)).map(\.id) == ["t1", "t0"])
        #expect(try await store.roots(TaskQuery(statuses: [.failed], limit: 2)).map(\.id) == ["t9", "t7"])
        #expect(try await store.roots(TaskQuery(statuses: [.pending])).map(\.id) == ["waiting"])
        #expect(try await store.roots(TaskQuery(statuses: [.pending, .failed], limit: 2)).map(\.id) == ["waiting", "t9"])
        #expect(try await store.roots(TaskQuery(kind: "import")).map(\.id) == ["t4", "t3", "t2", "t1", "t0"])
        let window = TaskQuery(
            statuses: [.completed], createdSince: t0.addingTimeInterval(2), createdUntil: t0.addingTimeInterval(8))
        #expect(try await store.roots(window).map(\.id) == ["t6", "t4", "t2"])
        #expect(try await store.roots(TaskQuery(nameContains: "nightly")).map(\.id) == ["t9", "t6", "t3", "t0"])
        #expect(try await store.roots(TaskQuery(sort: .created, reverse: true, limit: 2)).map(\.id) == ["t0", "t1"])
        #expect(try await store.roots(TaskQuery(sort: .updated, limit: 2)).map(\.id) == ["t0", "t1"])
        #expect(try await store.roots(TaskQuery(sort: .progress, limit: 2)).map(\.id) == ["t0", "t1"])
        #expect(try await store.roots(TaskQuery(sort: .progress, reverse: true, limit: 2)).map(\.id) == ["waiting", "t9"])
        #expect(try await store.roots(TaskQuery(statuses: [])).isEmpty)
        #expect(try await store.roots(TaskQuery(limit: 0)).isEmpty)
        #expect(try await store.countRoots(TaskQuery(limit: 1)) == 11)
        #expect(try await store.countRoots(TaskQuery(), upTo: 4) == 4, "a bound stops the count")
        #expect(try await store.countRoots(TaskQuery(), upTo: 100) == 11)
        #expect(try await store.countRoots(TaskQuery(statuses: [.failed]), upTo: 0) == 0)
        #expect(try await store.countRoots(TaskQuery(statuses: [.failed], kind: "import")) == 2)
        let statistics = try await store.statistics()
        #expect(statistics.rootsByStatus == ["completed": 5, "failed": 5, "pending": 1])
        #expect(statistics.rootsByKind == ["import": 5, "": 6])
        #expect(statistics.oldestPendingCreatedAt == t0.addingTimeInterval(20))
    }

    @Test(arguments: StoreKind.allCases)
    func historyIsReadBySubtreeKindTimeAndTail(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let root = makeRecord(id: "r")
        let child = makeRecord(id: "c", parent: root)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let events = (0..<6).map { index in
            TaskEvent(
                taskID: index.isMultiple(of: 2) ? "r" : "c", rootID: "r", kind: index < 4 ? .step : .progress,
                at: now.addingTimeInterval(Double(index)), attempt: 1, progress: Double(index) / 10,
                message: "step \(index)")
        }
        try await store.insert([root, child], events: events)
        let all = try await store.events(of: "r")
        #expect(all.map(\.message) == (0..<6).map { "step \($0)" })
        #expect(all.map(\.progress) == [0, 0.1, 0.2, 0.3, 0.4, 0.5])
        #expect(try await store.events(of: "c").map(\.message) == ["step 1", "step 3", "step 5"])
        #expect(try await store.events(of: "r", after: all[1].sequence, limit: 2).map(\.message) == ["step 2", "step 3"])
        #expect(try await store.events(EventQuery(taskID: "r", limit: 2, tail: true)).map(\.message) == ["step 4", "step 5"])
        #expect(try await store.events(EventQuery(taskID: "c", limit: 2, tail: true)).map(\.message) == ["step 3", "step 5"])
        #expect(try await store.events(EventQuery(taskID: "r", kinds: [.progress])).map(\.message) == ["step 4", "step 5"])
        #expect(
            try await store.events(EventQuery(taskID: "r", since: now.addingTimeInterval(3))).map(\.message)
                == ["step 3", "step 4", "step 5"])
        #expect(try await store.events(EventQuery(taskID: "r", limit: 0)).isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func claimsTakeUnfinishedRootsOfDeadOwnersByPriorityThenAge(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let old = makeRecord(id: "old", status: .running, createdAt: t0, owner: "dead")
        var urgent = makeRecord(id: "urgent", status: .pending, createdAt: t0.addingTimeInterval(5), owner: nil)
        urgent.priority = 10
        let done = makeRecord(id: "done", status: .completed, createdAt: t0, owner: "dead")
        let alive = makeRecord(id: "alive", status: .running, createdAt: t0, owner: "alive")
        let paused = makeRecord(id: "paused", status: .paused, createdAt: t0.addingTimeInterval(1), owner: "dead")
        try await store.insert([old, urgent, done, alive, paused], events: [])

        let claimed = try await store.claimRoots(
            RootClaim(fromOwners: ["dead", nil], kinds: nil, newOwner: "me", limit: 2))
        #expect(claimed.map(\.id) == ["urgent", "old"])
        #expect(claimed.map(\.status) == [.pending, .running])
        #expect(try await store.task(id: "old")?.ownerID == "me")
        #expect(try await store.task(id: "old")?.status == .running, "a claim changes the owner only")
        // A paused root is not claimed: it is changed in the store directly, and claimed once resumed.
        let rest = try await store.claimRoots(RootClaim(fromOwners: ["dead", nil], kinds: nil, newOwner: "me", limit: 10))
        #expect(rest.isEmpty)
        #expect(try await store.task(id: "paused")?.ownerID == "dead")
        #expect(try await store.task(id: "done")?.ownerID == "dead")
        #expect(try await store.task(id: "alive")?.ownerID == "alive")
        #expect(try await store.claimRoots(RootClaim(fromOwners: ["dead", nil], kinds: nil, newOwner: "x", limit: 9)).isEmpty)

        let job = makeRecord(id: "job", status: .pending, kind: "export")
        let foreign = makeRecord(id: "foreign", status: .pending, kind: "unknown")
        let closure = makeRecord(id: "closure", status: .pending)
        try await store.insert([job, foreign, closure], events: [])
        let jobs = try await store.claimRoots(RootClaim(fromOwners: [nil], kinds: ["export"], newOwner: "me", limit: 10))
        #expect(Set(jobs.map(\.id)) == ["job", "closure"])
        #expect(try await store.task(id: "foreign")?.ownerID == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func removingATreeDeletesItsNodesAndHistory(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let root = makeRecord(id: "r", status: .completed)
        let a = makeRecord(id: "a", parent: root, name: "a", status: .completed)
        let a1 = makeRecord(id: "a1", parent: a, name: "a1", status: .completed)
        let b = makeRecord(id: "b", parent: root, name: "b", status: .completed)
        let other = makeRecord(id: "other")
        let now = Date()
        let events = ["r", "a", "a1", "b", "other"].map {
            TaskEvent(taskID: $0, rootID: $0 == "other" ? "other" : "r", kind: .created, at: now, attempt: 1)
        }
        try await store.insert([root, a, a1, b, other], events: events)
        let removeA = TaskChangeRequest(taskID: "a", transition: .remove, requester: .user, at: now)
        #expect(try await store.change(removeA).deleted == 2)
        #expect(try await store.tree(of: "r").map(\.id) == ["r", "b"])
        #expect(try await store.events(of: "r").map(\.taskID) == ["r", "b"])
        // An unfinished task is not removed; deleteTree cancels it first.
        let unfinished = await #expect(throws: ProgressionError.self) {
            try await store.change(TaskChangeRequest(taskID: "other", transition: .remove, requester: .user, at: now))
        }
        #expect(unfinished?.description.contains("cancel it first") == true)
        #expect(try await store.deleteTree(of: "r") == 2)
        #expect(try await store.task(id: "r") == nil)
        #expect(try await store.events(of: "other").count == 1)
        #expect(try await store.deleteTree(of: "r") == 0)
        #expect(try await store.deleteTree(of: "other") == 1)
    }

    @Test(arguments: StoreKind.allCases)
    func pruneDeletesOldFinishedRootsOfTheGivenStatusesAndADryRunCounts(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let oldDone = makeRecord(id: "old-done", status: .completed, createdAt: t0)
        let oldFailed = makeRecord(id: "old-failed", status: .failed, createdAt: t0)
        let newDone = makeRecord(id: "new-done", status: .completed, createdAt: t0.addingTimeInterval(100))
        let running = makeRecord(id: "running", status: .running, createdAt: t0)
        let child = makeRecord(id: "old-child", parent: oldDone, status: .completed, createdAt: t0)
        try await store.insert([oldDone, oldFailed, newDone, running, child], events: [])
        let cutoff = t0.addingTimeInterval(50)
        let dry = try await store.prune(finishedBefore: cutoff, statuses: [.completed, .running], dryRun: true)
        #expect(dry == PruneResult(roots: 1, tasks: 2))
        #expect(try await store.task(id: "old-done") != nil)
        let pruned = try await store.prune(finishedBefore: cutoff, statuses: [.completed, .running], dryRun: false)
        #expect(pruned == PruneResult(roots: 1, tasks: 2))
        #expect(try await store.task(id: "old-done") == nil)
        #expect(try await store.task(id: "old-child") == nil)
        #expect(try await store.task(id: "old-failed") != nil)
        #expect(try await store.prune(finishedBefore: cutoff, statuses: Set(TaskStatus.allCases), dryRun: false).roots == 1)
        #expect(try await store.roots(TaskQuery()).map(\.id).sorted() == ["new-done", "running"])
    }

    @Test(arguments: StoreKind.allCases)
    func idempotencyKeysAndIDPrefixesFindTasks(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        var job = makeRecord(id: "abc-1", kind: "import")
        job.idempotencyKey = "2026-11-21"
        let child = makeRecord(id: "abc-1.1", parent: job)
        try await store.insert([job, child, makeRecord(id: "abd-2"), makeRecord(id: "x%_")], events: [])
        #expect(try await store.root(kind: "import", idempotencyKey: "2026-11-21")?.id == "abc-1")
        #expect(try await store.root(kind: "export", idempotencyKey: "2026-11-21") == nil)
        var twin = makeRecord(id: "abc-3", kind: "import")
        twin.idempotencyKey = "2026-11-21"
        let error = await #expect(throws: TaskStoreError.self) { try await store.insert([twin], events: []) }
        #expect(error?.reason == .conflict)
        #expect(try await store.taskIDs(withPrefix: "ab", limit: 5) == ["abc-1", "abc-1.1", "abd-2"])
        #expect(try await store.taskIDs(withPrefix: "abc", rootsOnly: true, limit: 5) == ["abc-1"])
        #expect(try await store.taskIDs(withPrefix: "x%", limit: 5) == ["x%_"])
        #expect(try await store.taskIDs(withPrefix: "%", limit: 5).isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func identifierReservationsAreDisjointAndIncreasing(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let first = try await store.reserveIdentifiers(10)
        let second = try await store.reserveIdentifiers(1000)
        #expect(first.count == 10 && second.count == 1000)
        #expect(first.upperBound <= second.lowerBound)
        #expect(first.lowerBound >= 0 && second.upperBound < 1 << 40)
        let ids = (first.lowerBound..<first.upperBound).map(TaskIdentifier.root)
        #expect(ids.allSatisfy { $0.count == 8 })
        #expect(ids == ids.sorted())
    }

    /// A claim for an executor may return a claimed root's tree (PostgreSQL and SQLite do for a root with no subtasks,
    /// saving the executor a read): when it does, it is the tree as stored after the claim.
    @Test(arguments: StoreKind.allCases)
    func aTreeReturnedByAClaimIsTheStoredTree(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let fresh = makeRecord(id: "fresh", status: .pending, kind: "job")
        let ran = makeRecord(id: "ran", status: .running, owner: "dead", kind: "job")
        try await store.insert(
            [fresh, ran, makeRecord(id: "ran.1", parent: ran, status: .completed, owner: "dead")], events: [])
        let claimed = try await store.claimRoots(
            RootClaim(fromOwners: [nil, "dead"], kinds: nil, newOwner: "me", limit: 10, readsTrees: true))
        #expect(Set(claimed.map(\.id)) == ["fresh", "ran"])
        for root in claimed {
            if let tree = root.tree { #expect(tree == (try await store.tree(of: root.id))) }
        }
        if kind != .memory {
            #expect(claimed.first { $0.id == "fresh" }?.tree?.map(\.id) == ["fresh"])
            #expect(claimed.first { $0.id == "fresh" }?.tree?.first?.ownerID == "me")
            #expect(claimed.first { $0.id == "ran" }?.tree == nil, "a root with subtasks is read after the claim")
        }
        // Without `readsTrees` no store returns one.
        try await store.insert([makeRecord(id: "later", status: .pending, kind: "job")], events: [])
        let plain = try await store.claimRoots(RootClaim(fromOwners: [nil], kinds: nil, newOwner: "me", limit: 10))
        #expect(plain.map(\.id) == ["later"] && plain.allSatisfy { $0.tree == nil })
    }

    /// A claim reads the heartbeat of each owner it judged dead again, in its own transaction: an owner that wrote one
    /// since the judgement (slow, not dead) keeps its roots; one whose heartbeat is the judged one, or whose row is
    /// gone, loses them.
    @Test(arguments: StoreKind.allCases)
    func anOwnerWhoseHeartbeatMovedSinceItWasJudgedDeadKeepsItsRoots(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000.25)
        for id in ["slow", "dead"] {
            try await store.saveOwner(OwnerRecord(id: id, host: "h", pid: 1, startedAt: t0, heartbeatAt: t0))
        }
        try await store.insert(
            [makeRecord(id: "s", status: .running, owner: "slow"), makeRecord(id: "d", status: .running, owner: "dead"),
             makeRecord(id: "g", status: .running, owner: "gone")], events: [])
        // "slow" writes a heartbeat after the claimer read t0.
        try await store.saveOwner(OwnerRecord(id: "slow", host: "h", pid: 1, startedAt: t0, heartbeatAt: t0 + 3))
        let judged = ["slow": t0, "dead": t0, "gone": t0]
        let claimed = try await store.claimRoots(
            RootClaim(
                fromOwners: ["slow", "dead", "gone"], kinds: nil, newOwner: "me", limit: 10, judgedHeartbeats: judged))
        #expect(Set(claimed.map(\.id)) == ["d", "g"])
        #expect(try await store.task(id: "s")?.ownerID == "slow")
        // Judged again by its latest heartbeat, still unchanged at the claim: taken.
        let later = try await store.claimRoots(
            RootClaim(fromOwners: ["slow"], kinds: nil, newOwner: "me", limit: 10, judgedHeartbeats: ["slow": t0 + 3]))
        #expect(later.map(\.id) == ["s"])
        #expect(try await store.task(id: "s")?.ownerID == "me")
    }

    @Test(arguments: StoreKind.allCases)
    func ownersAndControlRequestsRoundTrip(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
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

    /// Issue 20: dead owners accumulated (30 after 30 kills, read by every claim). Those that hold no unfinished root
    /// are deleted; one that holds a running root stays until it is claimed; one not asked for stays.
    @Test(arguments: StoreKind.allCases)
    func deadOwnersThatHoldNothingUnfinishedAreForgotten(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        for id in ["holding", "finished", "idle", "alive"] {
            try await store.saveOwner(OwnerRecord(id: id, host: "h", pid: 1, startedAt: t0, heartbeatAt: t0))
        }
        let running = makeRecord(id: "r1", status: .running, owner: "holding")
        try await store.insert(
            [running, makeRecord(id: "r1.1", parent: running, status: .completed, owner: "finished"),
             makeRecord(id: "r2", status: .completed, owner: "finished")], events: [])
        #expect(try await store.forgetIdleOwners(["holding", "finished", "idle", "unknown"]) == 2)
        #expect(Set(try await store.owners().map(\.id)) == ["holding", "alive"])
        #expect(try await store.task(id: "r2")?.ownerID == "finished", "finished tasks keep the id")
        #expect(try await store.forgetIdleOwners([]) == 0)
    }
}
