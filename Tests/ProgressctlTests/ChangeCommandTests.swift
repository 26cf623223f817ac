import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// The JSON of a change, as progressctl prints it.
struct ChangeDocument: Decodable {
    var id: String
    var action: String
    var via: String
    var ownerID: String?
    var status: String?
    var dryRun: Bool
    var outcome: String
}

@Suite struct ChangeCommandTests {
    @Test func submitInsertsAPendingJobAndHonoursTheIdempotencyKey() async throws {
        let fixture = try Fixture()
        let first = try await fixture.run(
            ["submit", "--allow-unregistered", "import", "--input", #"{"file": "a.csv"}"#, "--priority", "5", "--idempotency-key", "a.csv",
             "--retryable", "--pausable"])
        #expect(first.status == 0, "\(first.stderr)")
        let id = first.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let task = try #require(try await fixture.store.task(id: id))
        #expect(task.kind == "import" && task.status == .pending && task.ownerID == nil && task.isRoot)
        #expect(task.input == Data(#"{"file": "a.csv"}"#.utf8))
        #expect(task.options.canRetry && task.options.canPause && task.options.canCancel && task.priority == 5)
        #expect(try await fixture.store.events(of: id, after: nil, limit: 10).map(\.kind) == [.created])

        let again = try await fixture.run(["submit", "--allow-unregistered", "import", "--input", "{}", "--idempotency-key", "a.csv"])
        #expect(again.status == 0)
        #expect(again.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == id)
        #expect(try await fixture.store.roots(TaskQuery()).count == 1)

        let named = try await fixture.run(["submit", "--allow-unregistered", "export", "--input", "[1, 2]", "--id", "my-export", "--json"])
        struct SubmitDocument: Decodable { var id: String; var created: Bool }
        #expect(try decodeJSON(SubmitDocument.self, from: named.stdout).id == "my-export")
        let task2 = try #require(try await fixture.store.task(id: "my-export"))
        #expect(!task2.options.canRetry && !task2.options.canPause)

        // A stall rule from the command line (issue 37).
        let watched = try await fixture.run(
            ["submit", "--allow-unregistered", "export", "--input", "2", "--id", "watched", "--stall-limit", "90s",
             "--stall-action", "retry"])
        #expect(watched.status == 0, "\(watched.stderr)")
        #expect(try await fixture.store.task(id: "watched")?.options.stall == StallRule(limit: .seconds(90), action: .retry))

        let duplicate = try await fixture.run(["submit", "--allow-unregistered", "export", "--input", "1", "--id", "my-export"])
        #expect(duplicate.status != 0)
        #expect(duplicate.errorLines == ["progressctl: error: a task with id 'my-export' exists already"])
    }

    @Test func retryMakesAFailedJobPendingWithTheNextAttempt() async throws {
        let fixture = try Fixture()
        try await fixture.owner("gone", alive: false)
        try await fixture.root("job-1", status: .failed, options: .default.retryable(), progress: 0.4, step: "load",
                               owner: "gone", attempt: 2, error: ("IOError", "disk full"))
        let dry = try await fixture.run(["retry", "job", "--dry-run", "--json"])
        #expect(dry.status == 0, "\(dry.stderr)")
        let planned = try decodeJSON([ChangeDocument].self, from: dry.stdout)
        #expect(planned.first?.dryRun == true && planned.first?.status == "pending")
        #expect(try await fixture.store.task(id: "job-1")?.status == .failed)

        let result = try await fixture.run(["retry", "job-1"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("retry job-1"))
        let task = try #require(try await fixture.store.task(id: "job-1"))
        #expect(task.status == .pending && task.attempt == 3 && task.ownerID == nil)
        #expect(task.errorType == nil && task.errorDescription == nil && task.finishedAt == nil)
        #expect(task.progress == 0.4, "the progress it had stays: the next run does not show less")
        let last = try #require(try await fixture.store.events(of: "job-1", after: nil, limit: 10).last)
        #expect(last.kind == .retried && last.attempt == 3 && last.message == "retried by progressctl")
    }

    @Test func retryAllFailedOfAKind() async throws {
        let fixture = try Fixture()
        try await fixture.root("i1", kind: "import", status: .failed, options: .default.retryable())
        try await fixture.root("i2", kind: "import", status: .failed, options: .default.retryable())
        try await fixture.root("e1", kind: "export", status: .failed, options: .default.retryable())
        try await fixture.root("i3", kind: "import", status: .completed, options: .default.retryable())

        let dry = try await fixture.run(["retry", "--all-failed", "--kind", "import", "--dry-run"])
        #expect(dry.status == 0)
        #expect(dry.stdout.contains("would retry i1") && dry.stdout.contains("would retry i2") && !dry.stdout.contains("e1"))
        #expect(try await fixture.store.roots(TaskQuery(statuses: [.failed])).count == 3)

        let result = try await fixture.run(["retry", "--all-failed", "--kind", "import"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try await fixture.store.roots(TaskQuery(statuses: [.pending])).map(\.id).sorted() == ["i1", "i2"])
        #expect(try await fixture.store.task(id: "e1")?.status == .failed)
    }

    /// Refusals: the options or the state forbid the change, or another process cannot re-run a closure.
    @Test(arguments: [
        (["retry", "not-retryable"], "cannot be retried: its options do not allow retries"),
        (["retry", "closure"], "is a closure task"),
        (["retry", "running"], "only a failed or cancelled task can be retried"),
        (["pause", "not-pausable"], "cannot be paused: its options do not allow it"),
        (["pause", "done"], "is completed: cannot pause it"),
        (["resume", "running"], "is running: cannot resume it"),
        (["cancel", "immutable"], "cannot be cancelled: its options do not allow it"),
        (["cancel", "done"], "is completed: cannot cancel it"),
        (["remove", "running"], "use --force"),
    ])
    func refusedChangesWriteNothing(arguments: [String], message: String) async throws {
        let fixture = try Fixture()
        try await fixture.root("not-retryable", status: .failed)
        try await fixture.root("closure", kind: nil, status: .failed, options: .default.retryable())
        try await fixture.root("running", status: .running, options: .interactive.retryable())
        try await fixture.root("not-pausable", status: .pending)
        try await fixture.root("done", status: .completed, options: .interactive)
        try await fixture.root("immutable", status: .pending, options: .immutable)
        try await fixture.store.maintain(.passiveCheckpoint)
        let before = try await fixture.store.roots(TaskQuery())
        let eventsBefore = try await fixture.store.statistics().events

        let result = try await fixture.run(arguments)
        #expect(result.status != 0)
        #expect(result.errorLines.count == 1)
        #expect(result.errorLines.first?.hasPrefix("progressctl: error: ") == true)
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        #expect(try await fixture.store.roots(TaskQuery()) == before)
        #expect(try await fixture.store.statistics().events == eventsBefore)
    }

    @Test func pauseResumeAndCancelWithoutALiveOwner() async throws {
        let fixture = try Fixture()
        try await fixture.root("p1", status: .pending, options: .interactive)
        #expect(try await fixture.run(["pause", "p1"]).status == 0)
        #expect(try await fixture.store.task(id: "p1")?.status == .paused)
        #expect(try await fixture.run(["resume", "p1"]).status == 0)
        #expect(try await fixture.store.task(id: "p1")?.status == .pending)
        let cancelled = try await fixture.run(["cancel", "p1", "--json"])
        #expect(cancelled.status == 0)
        #expect(try decodeJSON([ChangeDocument].self, from: cancelled.stdout).first?.via == "direct")
        let task = try #require(try await fixture.store.task(id: "p1"))
        #expect(task.status == .cancelled && task.finishedAt != nil)
        let kinds = try await fixture.store.events(of: "p1", after: nil, limit: 10).map(\.kind)
        #expect(kinds == [.created, .paused, .resumed, .cancelled])
    }

    @Test func cancellingARunningTaskOfADeadOwnerCancelsItsTree() async throws {
        let fixture = try Fixture()
        try await fixture.owner("crashed", alive: false)
        let root = try await fixture.root("r1", status: .running, owner: "crashed")
        try await fixture.child("r1-a", of: root, name: "a", status: .running)
        try await fixture.child("r1-b", of: root, name: "b", status: .completed)
        let result = try await fixture.run(["cancel", "r1"])
        #expect(result.status == 0, "\(result.stderr)")
        let tree = try await fixture.store.tree(of: "r1")
        #expect(tree.map(\.status) == [.cancelled, .cancelled, .completed])
        #expect(tree.allSatisfy { $0.finishedAt != nil })
    }

    @Test func changesGoToALiveOwnerAsControlRequests() async throws {
        let fixture = try Fixture()
        try await fixture.owner("service", alive: true)
        try await fixture.root("live-1", status: .running, options: .interactive, owner: "service")
        try await fixture.root("live-2", status: .running, options: .interactive, owner: "service")

        // The owner: applies pause requests for live-1, refuses anything else. Commands wait for it up to 60 s (the
        // default 5 s was too short for this loop in the first seconds of a parallel run on two cores).
        let store = fixture.store
        let owner = Task {
            var handled: [ControlRequest] = []
            while !Task.isCancelled {
                // Cancelling this loop interrupts a store call: that ends it.
                guard let requests = try? await store.pendingControlRequests(for: "service") else { break }
                for request in requests {
                    let outcome = request.taskID == "live-1" ? "applied" : "the task is at a step that cannot stop"
                    guard (try? await store.completeControlRequest(id: request.id, outcome: outcome, at: Date())) != nil
                    else { break }
                    handled.append(request)
                }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return handled
        }
        defer { owner.cancel() }

        let applied = try await fixture.run(["pause", "live-1", "--json", "--wait", "60"])
        #expect(applied.status == 0, "\(applied.stderr)")
        let document = try #require(try decodeJSON([ChangeDocument].self, from: applied.stdout).first)
        #expect(document.via == "owner" && document.ownerID == "service" && document.outcome == "applied")
        // The owner applies it, not progressctl: the row is as it was.
        #expect(try await fixture.store.task(id: "live-1")?.status == .running)

        let refused = try await fixture.run(["cancel", "live-2", "--wait", "60"])
        #expect(refused.status == 1)
        #expect(refused.errorLines == [
            "progressctl: error: owner 'service' refused to cancel task 'live-2': the task is at a step that cannot stop",
        ])
        owner.cancel()
        let handled = await owner.value
        #expect(handled.map(\.action) == [.pause, .cancel])
        #expect(handled.map(\.taskID) == ["live-1", "live-2"])
    }

    @Test func removeForceAndRetryGoToALiveOwner() async throws {
        let fixture = try Fixture()
        try await fixture.owner("service", alive: true)
        try await fixture.root("held-running", status: .running, owner: "service")
        try await fixture.root("held-failed", status: .failed, options: .default.retryable(), owner: "service")
        let store = fixture.store
        let owner = Task {
            var handled: [ControlRequest] = []
            while !Task.isCancelled {
                // Cancelling this loop interrupts a store call: that ends it.
                guard let requests = try? await store.pendingControlRequests(for: "service") else { break }
                for request in requests {
                    guard (try? await store.completeControlRequest(id: request.id, outcome: "applied", at: Date())) != nil
                    else { break }
                    handled.append(request)
                }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return handled
        }
        defer { owner.cancel() }
        let removed = try await fixture.run(["remove", "held-running", "--force", "--wait", "60"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout.contains("by owner 'service'"))
        let retried = try await fixture.run(["retry", "held-failed", "--wait", "60"])
        #expect(retried.status == 0, "\(retried.stderr)")
        owner.cancel()
        let handled = await owner.value
        #expect(handled.map(\.action) == [.remove, .retry])
        // The owner applies the changes; progressctl wrote only the requests.
        #expect(try await fixture.store.task(id: "held-running")?.status == .running)
        #expect(try await fixture.store.task(id: "held-failed")?.status == .failed)
    }

    @Test func anUnhandledRequestTimesOutAndStaysQueued() async throws {
        let fixture = try Fixture()
        try await fixture.owner("busy-service", alive: true)
        try await fixture.root("slow", status: .running, options: .interactive, owner: "busy-service")
        let result = try await fixture.run(["pause", "slow", "--wait", "0.3"])
        #expect(result.status == 1)
        #expect(result.errorLines.count == 1)
        #expect(result.stderr.contains("did not handle the pause request"))
        let queued = try await fixture.store.pendingControlRequests(for: "busy-service")
        #expect(queued.map(\.action) == [.pause])
        #expect(try await fixture.store.task(id: "slow")?.status == .running)
    }

    @Test func removeDeletesAFinishedTreeAndForceCancelsFirst() async throws {
        let fixture = try Fixture()
        let done = try await fixture.root("done-1", status: .completed)
        try await fixture.child("done-1-a", of: done, name: "a", status: .completed)
        try await fixture.root("keep", status: .completed)
        try await fixture.root("pending-1", status: .pending)

        let removed = try await fixture.run(["remove", "done-1"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout.contains("deleted 2 tasks"))
        #expect(try await fixture.store.tree(of: "done-1").isEmpty)
        #expect(try await fixture.store.events(of: "done-1", after: nil, limit: 10).isEmpty)
        #expect(try await fixture.store.task(id: "keep") != nil)

        let forced = try await fixture.run(["remove", "pending-1", "--force"])
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try await fixture.store.task(id: "pending-1") == nil)
    }

    @Test func pruneDeletesOldFinishedTasks() async throws {
        let fixture = try Fixture()
        let old = Date().addingTimeInterval(-10 * 86400)
        try await fixture.root("old-done", status: .completed, createdAt: old, finishedAt: old)
        try await fixture.root("old-failed", status: .failed, createdAt: old, finishedAt: old)
        try await fixture.root("new-done", status: .completed, createdAt: Date(), finishedAt: Date())
        try await fixture.root("old-pending", status: .pending, createdAt: old)

        let onlyCompleted = try await fixture.run(["prune", "--older-than", "7d", "--status", "completed"])
        #expect(onlyCompleted.status == 0, "\(onlyCompleted.stderr)")
        #expect(onlyCompleted.stdout.hasPrefix("pruned 1 task"))
        #expect(try await fixture.store.roots(TaskQuery()).map(\.id).sorted() == ["new-done", "old-failed", "old-pending"])

        let rest = try await fixture.run(["prune", "--older-than", "7d"])
        #expect(rest.status == 0)
        #expect(try await fixture.store.roots(TaskQuery()).map(\.id).sorted() == ["new-done", "old-pending"])
    }
}
