import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// The tree keeper on each store: what a change of one job of a tree means for the others, carried out from the queue
/// each write fills in its own transaction.
struct JobTreeStoreTests {
    let now = Date(timeIntervalSince1970: 1_700_000_100)

    /// A parent waiting for its children (no owner), with a link per child: `children` gives each child's id, share
    /// and status.
    func waitingParent(
        _ store: any TaskStoreBackend, id: String = "parent", all: Bool = true, progress: Double = 0.2,
        children: [(id: String, share: Double, status: TaskStatus, owner: String?)]
    ) async throws {
        var parent = makeRecord(id: id, kind: "batch")
        parent.options = parent.options.retryable()
        parent.progress = progress
        parent.startedAt = now
        parent.wait = .children(all: all)
        parent.waitingFor = "\(children.count) child jobs"
        parent.waitingProgress = progress
        parent.nextAttemptAt = JobWait.untilReleased
        var records = [parent]
        for (index, child) in children.enumerated() {
            var link = makeRecord(id: "\(id).\(index + 1)", parent: parent, name: "child \(index)")
            link.childJobID = child.id
            link.share = child.share
            link.awaited = true
            link.status = child.status
            link.finishedAt = child.status.isFinished ? now : nil
            var job = makeRecord(id: child.id, status: child.status, owner: child.owner, kind: "part")
            job.parentJobID = id
            records += [link, job]
        }
        try await store.insert(records, events: [])
    }

    /// Runs the tree keeper until nothing is queued; returns how many changes it carried out.
    @discardableResult
    func settle(_ store: any TaskStoreBackend) async throws -> Int {
        var total = 0
        for _ in 0..<20 {
            let taken = try await store.resolveJobTrees(at: now, limit: 100)
            if taken == 0 { return total }
            total += taken
        }
        Issue.record("the tree keeper did not settle")
        return total
    }

    func update(_ record: TaskRecord, owner: String? = nil, _ change: (inout TaskRecord) -> Void) -> TaskBatch {
        var changed = record
        change(&changed)
        return TaskBatch(updates: [TaskUpdate(changed, columns: TaskColumns.changed(from: record, to: changed))], owner: owner)
    }

    @Test(arguments: StoreKind.allCases)
    func aChildsProgressReachesItsLinkAndItsWaitingParentAndItsEndReleasesTheParent(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        try await waitingParent(
            store, children: [("c1", 0.5, .running, "w1"), ("c2", 0.3, .completed, nil)])
        let child = try #require(try await store.task(id: "c1"))
        _ = try await store.apply(update(child, owner: "w1") { $0.progress = 0.5; $0.step = "half" })
        try await settle(store)
        let link = try #require(try await store.task(id: "parent.1"))
        #expect(link.progress == 0.5 && link.step == "half" && link.status == .running)
        var parent = try #require(try await store.task(id: "parent"))
        #expect(abs((parent.progress ?? 0) - 0.45) < 1e-9)
        #expect((parent.rate ?? 0) > 0)
        #expect(parent.wait == .children(all: true))

        let running = try #require(try await store.task(id: "c1"))
        _ = try await store.apply(
            update(running, owner: "w1") {
                $0.status = .completed
                $0.progress = 1
                $0.finishedAt = now
                $0.result = Data("42".utf8)
            })
        try await settle(store)
        let done = try #require(try await store.task(id: "parent.1"))
        #expect(done.status == .completed && done.result == Data("42".utf8) && !done.awaited)
        parent = try #require(try await store.task(id: "parent"))
        #expect(parent.wait == nil && parent.nextAttemptAt == nil && parent.waitingFor == nil)
        #expect(abs((parent.progress ?? 0) - 0.7) < 1e-9)
    }

    @Test(arguments: StoreKind.allCases)
    func aParentWaitingForAnyChildIsReleasedByTheFirstToFinish(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        try await waitingParent(store, all: false, children: [("c1", 0.5, .running, "w1"), ("c2", 0.5, .pending, nil)])
        try await settle(store)
        #expect(try await store.task(id: "parent")?.wait == .children(all: false))
        let child = try #require(try await store.task(id: "c1"))
        _ = try await store.apply(
            update(child, owner: "w1") {
                $0.status = .failed
                $0.finishedAt = now
                $0.errorDescription = "no"
            })
        try await settle(store)
        #expect(try await store.task(id: "parent")?.wait == nil)
        #expect(try await store.task(id: "parent.1")?.errorDescription == "no")
    }

    @Test(arguments: StoreKind.allCases)
    func aParentThatBeginsToWaitForChildrenThatFinishedAlreadyIsReleasedAtOnce(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        try await waitingParent(store, children: [("c1", 0.5, .completed, nil), ("c2", 0.5, .completed, nil)])
        // The wait's write queues a recount, as the executor's batch does.
        _ = try await store.apply(TaskBatch(treeChanges: [TreeChange("parent", .recount)]))
        try await settle(store)
        let released = try #require(try await store.task(id: "parent"))
        #expect(released.wait == nil && released.nextAttemptAt == nil)
        #expect(try await store.task(id: "parent.1")?.awaited == false)
    }

    @Test(arguments: StoreKind.allCases)
    func aParentsEndCancelsItsUnfinishedChildrenAndTakesThemFromTheirOwners(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        try await waitingParent(
            store, children: [("c1", 0.3, .running, "w1"), ("c2", 0.3, .pending, nil), ("c3", 0.3, .completed, nil)])
        let c1 = try #require(try await store.task(id: "c1"))
        var step = makeRecord(id: "c1.1", parent: c1, status: .running)
        step.startedAt = now
        try await store.insert([step], events: [])
        _ = try await store.change(
            TaskChangeRequest(
                taskID: "parent", transition: .cancel, requester: .operatorWithoutOwner, expectedStatus: .pending,
                checksOwner: true, expectedOwner: nil, at: now))
        try await settle(store)
        for id in ["c1", "c2"] {
            let child = try #require(try await store.task(id: id))
            #expect(child.status == .cancelled && child.ownerID == nil, "\(id)")
        }
        #expect(try await store.task(id: "c1.1")?.status == .cancelled)
        #expect(try await store.task(id: "c3")?.status == .completed)
        #expect(try await store.task(id: "parent.1")?.status == .cancelled)
        #expect(try await store.task(id: "parent.2")?.status == .cancelled)
        // The executor that ran c1 finds its next write refused.
        let stale = makeRecord(id: "c1", status: .running, owner: "w1", kind: "part")
        let result = try await store.apply(update(stale, owner: "w1") { $0.progress = 0.9 })
        #expect(result.rejectedTaskIDs == ["c1"])
    }

    @Test(arguments: StoreKind.allCases)
    func pausingAndResumingAParentReachesItsChildren(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        try await waitingParent(store, children: [("c1", 0.5, .running, "w1"), ("c2", 0.5, .pending, nil)])
        _ = try await store.change(
            TaskChangeRequest(taskID: "parent", transition: .pause, requester: .operatorWithoutOwner, at: now))
        try await settle(store)
        for id in ["c1", "c2"] {
            let child = try #require(try await store.task(id: id))
            #expect(child.status == .paused && child.ownerID == nil, "\(id)")
        }
        _ = try await store.change(
            TaskChangeRequest(
                taskID: "parent", transition: .resume(codeRunning: false), requester: .operatorWithoutOwner, at: now))
        try await settle(store)
        for id in ["c1", "c2"] { #expect(try await store.task(id: id)?.status == .pending, "\(id)") }
        #expect(try await store.task(id: "parent")?.wait == .children(all: true))
    }

    /// What a parent's change queued for its children is carried out only if the parent still is as it was: a parent
    /// retried (or resumed) before the keeper came leaves its children alone, and an end queued twice does not cancel
    /// the children that its retry runs again.
    @Test(arguments: StoreKind.allCases)
    func aCascadeQueuedForAParentThatChangedAgainLeavesItsChildrenAlone(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        try await waitingParent(store, children: [("c1", 0.5, .running, "w1"), ("c2", 0.5, .pending, nil)])
        func change(_ transition: TaskLifecycle.Transition) async throws {
            _ = try await store.change(
                TaskChangeRequest(taskID: "parent", transition: transition, requester: .operatorWithoutOwner, at: now))
        }
        try await change(.pause)
        try await change(.resume(codeRunning: false))
        try await settle(store)
        for id in ["c1", "c2"] { #expect(try await store.task(id: id)?.status != .paused, "\(id)") }
        #expect(try await store.task(id: "c1")?.ownerID == "w1")

        try await change(.cancel)
        try await change(.retry)
        try await settle(store)
        #expect(try await store.task(id: "c1")?.status == .running)
        #expect(try await store.task(id: "c2")?.status == .pending)
        #expect(try await store.task(id: "parent")?.status.isFinished == false)
    }

    /// A job submitted after others, as a producer writes it.
    func dependent(_ id: String) -> TaskRecord {
        var job = makeRecord(id: id, kind: "report")
        job.wait = .jobs
        job.waitingFor = "jobs"
        job.nextAttemptAt = JobWait.untilReleased
        return job
    }

    func finish(_ store: any TaskStoreBackend, _ id: String, _ status: TaskStatus) async throws {
        let record = try #require(try await store.task(id: id))
        _ = try await store.apply(
            update(record) {
                $0.status = status
                $0.finishedAt = now
            })
    }

    @Test(arguments: StoreKind.allCases)
    func aJobAfterOthersRunsOnceTheyCompletedAndFollowsItsPolicyWhenOneFails(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        try await store.insert(["a", "b", "x", "y"].map { makeRecord(id: $0, kind: "load") }, events: [])
        try await store.insert(
            [dependent("after-ab"), dependent("cancelled-by-x"), dependent("runs-after-y")], events: [],
            dependencies: [
                JobDependency(jobID: "after-ab", dependsOn: "a", onFailure: .cancel),
                JobDependency(jobID: "after-ab", dependsOn: "b", onFailure: .cancel),
                JobDependency(jobID: "cancelled-by-x", dependsOn: "x", onFailure: .cancel),
                JobDependency(jobID: "runs-after-y", dependsOn: "y", onFailure: .run),
            ])
        try await settle(store)
        #expect(try await store.task(id: "after-ab")?.wait == .jobs)
        #expect(try await store.dependencies(of: "after-ab").map(\.dependsOn) == ["a", "b"])
        #expect(try await store.dependents(of: "a").map(\.jobID) == ["after-ab"])

        try await finish(store, "a", .completed)
        try await settle(store)
        #expect(try await store.task(id: "after-ab")?.wait == .jobs)
        try await finish(store, "b", .completed)
        try await finish(store, "x", .failed)
        try await finish(store, "y", .cancelled)
        try await settle(store)
        let released = try #require(try await store.task(id: "after-ab"))
        #expect(released.wait == nil && released.nextAttemptAt == nil && released.status == .pending)
        let cancelled = try #require(try await store.task(id: "cancelled-by-x"))
        #expect(cancelled.status == .cancelled)
        #expect(cancelled.errorDescription == "its dependency x failed")
        #expect(try await store.task(id: "runs-after-y")?.wait == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func aJobAfterAJobThatIsRemovedFollowsItsPolicy(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        try await store.insert([makeRecord(id: "a", status: .completed, kind: "load")], events: [])
        try await store.insert(
            [dependent("late")], events: [], dependencies: [JobDependency(jobID: "late", dependsOn: "a", onFailure: .cancel)])
        try await settle(store)
        #expect(try await store.task(id: "late")?.wait == nil)
        try await store.insert([makeRecord(id: "b", kind: "load")], events: [])
        try await store.insert(
            [dependent("orphan")], events: [], dependencies: [JobDependency(jobID: "orphan", dependsOn: "b", onFailure: .cancel)])
        try await finish(store, "b", .cancelled)
        _ = try await store.change(TaskChangeRequest(taskID: "b", transition: .remove, requester: .user, at: now))
        try await settle(store)
        #expect(try await store.task(id: "orphan")?.status == .cancelled)
    }

    @Test(arguments: StoreKind.allCases)
    func badDependenciesAreRefusedAndWriteNothing(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        let root = makeRecord(id: "root", kind: "load")
        try await store.insert([root, makeRecord(id: "root.1", parent: root)], events: [])
        await #expect(throws: JobDependencyError.unknownJob("gone")) {
            try await store.insert(
                [dependent("d1")], events: [], dependencies: [JobDependency(jobID: "d1", dependsOn: "gone", onFailure: .cancel)])
        }
        await #expect(throws: JobDependencyError.notAJob("root.1")) {
            try await store.insert(
                [dependent("d2")], events: [],
                dependencies: [JobDependency(jobID: "d2", dependsOn: "root.1", onFailure: .cancel)])
        }
        #expect(try await store.task(id: "d1") == nil)
        #expect(try await store.task(id: "d2") == nil)
        #expect(try await store.resolveJobTrees(at: now, limit: 10) == 0)
    }

    @Test(arguments: StoreKind.allCases)
    func aSignalIsKeptUntilAStepTakesItAndIsTakenOnce(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        try await store.insert([makeRecord(id: "job", status: .running, owner: "w1", kind: "approval")], events: [])
        let sent = try await store.sendSignal(to: "job", name: "approve", payload: Data("{\"by\":\"ann\"}".utf8), at: now)
        _ = try await store.sendSignal(to: "job", name: "approve", payload: Data("2".utf8), at: now)
        let first = try await store.takeSignal(job: "job", name: "approve", step: "job.1", owner: "w1", at: now)
        #expect(first?.sequence == sent.sequence && first?.payload == sent.payload && first?.consumedBy == "job.1")
        // The same step (its job ran again) gets the same signal; another step the next one; then none is left.
        #expect(try await store.takeSignal(job: "job", name: "approve", step: "job.1", owner: "w1", at: now)?.sequence == sent.sequence)
        #expect(try await store.takeSignal(job: "job", name: "approve", step: "job.2", owner: "w1", at: now)?.payload == Data("2".utf8))
        #expect(try await store.takeSignal(job: "job", name: "approve", step: "job.3", owner: "w1", at: now) == nil)
        let refused = await #expect(throws: TaskStoreError.self) {
            _ = try await store.takeSignal(job: "job", name: "approve", step: "job.4", owner: "w2", at: now)
        }
        #expect(refused?.reason == .conflict)
        #expect(try await store.signals(of: "job").count == 2)
        #expect(try await store.events(of: "job").filter { $0.kind == .signaled }.count == 2)
    }

    @Test(arguments: StoreKind.allCases)
    func signalsToUnknownOrFinishedJobsOrWithBadNamesAreRefusedAndWriteNothing(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        let done = makeRecord(id: "done", status: .completed, kind: "approval")
        try await store.insert([done, makeRecord(id: "done.1", parent: done), makeRecord(id: "live", kind: "a")], events: [])
        await #expect(throws: ProgressionError.self) { _ = try await store.sendSignal(to: "nope", name: "go", payload: nil, at: now) }
        await #expect(throws: ProgressionError.self) { _ = try await store.sendSignal(to: "done", name: "go", payload: nil, at: now) }
        await #expect(throws: ProgressionError.self) { _ = try await store.sendSignal(to: "done.1", name: "go", payload: nil, at: now) }
        await #expect(throws: ProgressionError.self) { _ = try await store.sendSignal(to: "live", name: "", payload: nil, at: now) }
        await #expect(throws: ProgressionError.self) { _ = try await store.sendSignal(to: "live", name: "a\u{1B}b", payload: nil, at: now) }
        #expect(try await store.signals(of: "done").isEmpty)
        #expect(try await store.signals(of: "live").isEmpty)
        #expect(try await store.events(of: "live").isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func aJobWaitingForASignalIsReleasedWhenItIsSentAndOneSentBeforeItWaitedCounts(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        var waiting = makeRecord(id: "waits", kind: "approval")
        waiting.wait = .signal("approve")
        waiting.waitingFor = "signal 'approve'"
        waiting.nextAttemptAt = JobWait.untilReleased
        var early = makeRecord(id: "early", status: .running, owner: "w1", kind: "approval")
        early.startedAt = now
        try await store.insert([waiting, early], events: [])
        _ = try await store.sendSignal(to: "waits", name: "other", payload: nil, at: now)
        #expect(try await store.task(id: "waits")?.wait == .signal("approve"))
        _ = try await store.sendSignal(to: "waits", name: "approve", payload: nil, at: now)
        #expect(try await store.task(id: "waits")?.wait == nil)
        #expect(try await store.task(id: "waits")?.nextAttemptAt == nil)

        // Sent while the job ran; it then begins to wait (its batch queues a recount): released at once.
        _ = try await store.sendSignal(to: "early", name: "approve", payload: nil, at: now)
        let running = try #require(try await store.task(id: "early"))
        var batch = update(running, owner: "w1") {
            $0.status = .pending
            $0.ownerID = nil
            $0.wait = .signal("approve")
            $0.waitingFor = "signal 'approve'"
            $0.nextAttemptAt = JobWait.untilReleased
        }
        batch.treeChanges = [TreeChange("early", .recount)]
        _ = try await store.apply(batch)
        try await settle(store)
        #expect(try await store.task(id: "early")?.wait == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func removingAParentRemovesItsChildJobsWithTheirTrees(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        defer { Task { await close(store) } }
        try await waitingParent(store, children: [("c1", 0.5, .completed, nil), ("c2", 0.5, .cancelled, nil)])
        let c1 = try #require(try await store.task(id: "c1"))
        try await store.insert([makeRecord(id: "c1.1", parent: c1, status: .completed)], events: [])
        try await finish(store, "parent", .cancelled)
        try await settle(store)
        let removed = try await store.change(TaskChangeRequest(taskID: "parent", transition: .remove, requester: .user, at: now))
        #expect(removed.deleted == 6)
        for id in ["parent", "parent.1", "parent.2", "c1", "c1.1", "c2"] { #expect(try await store.task(id: id) == nil, "\(id)") }
    }
}
