import Foundation
import Progression
import ProgressionTestSupport
import Testing

@testable import progressctl
import ProgressionOperator

/// `cancel`, `retry`, `remove`, `pause` and `resume` by filters (issue 14): dry runs, the question on a terminal,
/// `--yes`, refusals one line each on stderr, and the one-line summary.
@Suite struct BulkChangeTests {
    /// The summary of a change by filter, as `--json` prints it.
    struct SummaryDocument: Decodable {
        struct Refusal: Decodable { var id: String; var message: String }
        var action: String
        var dryRun: Bool
        var matched: Int
        var changed: Int
        var changes: [ChangeDocument]
        var refused: [Refusal]
    }

    /// Imports: two pending, one that cannot be cancelled, one running for a dead owner, one completed; an export.
    func fixture() async throws -> Fixture {
        let fixture = try Fixture()
        try await fixture.owner("crashed", alive: false)
        let start = fixture.start
        try await fixture.root("imp-1", name: "nightly import 1", status: .pending, options: .interactive, createdAt: start)
        try await fixture.root("imp-2", name: "nightly import 2", status: .pending, options: .interactive, createdAt: start.addingTimeInterval(10))
        try await fixture.root("imp-fixed", name: "fixed import", status: .pending, options: .immutable, createdAt: start.addingTimeInterval(20))
        try await fixture.root("imp-run", name: "big import", status: .running, owner: "crashed", createdAt: start.addingTimeInterval(30))
        try await fixture.root("imp-done", name: "old import", status: .completed, createdAt: start.addingTimeInterval(40))
        try await fixture.root("exp-1", name: "export", kind: "export", status: .pending, options: .interactive, createdAt: start.addingTimeInterval(50))
        return fixture
    }

    func statuses(_ fixture: Fixture) async throws -> [String: TaskStatus] {
        Dictionary(uniqueKeysWithValues: try await fixture.store.roots(TaskQuery(limit: 100)).map { ($0.id, $0.status) })
    }

    @Test func aDryRunShowsWhatWouldChangeAndWritesNothing() async throws {
        let fixture = try await fixture()
        let before = fixture.bytes()
        let statusesBefore = try await statuses(fixture)

        let result = try await fixture.run(["cancel", "--kind", "import", "--dry-run"])
        #expect(result.status == 1, "one task would be refused: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasPrefix("would cancel imp-") }.count == 3, "\(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("would cancel imp-run (big import): running → cancelled") })
        #expect(!result.stdout.contains("imp-done") && !result.stdout.contains("exp-1"))
        #expect(lines.last == "would cancel 3 of 4 tasks (1 refused: imp-fixed)")
        #expect(result.errorLines.count == 1)
        #expect(result.errorLines.first?.hasPrefix("progressctl: refused: ") == true)
        #expect(result.stderr.contains("imp-fixed") && result.stderr.contains("cannot be cancelled"))

        #expect(fixture.bytes() == before, "a dry run leaves the database file and its WAL as they were")
        #expect(try await statuses(fixture) == statusesBefore)
    }

    @Test func yesChangesEveryMatchReportsRefusalsAndSummarises() async throws {
        let fixture = try await fixture()
        let result = try await fixture.run(["cancel", "--kind", "import", "--yes"])
        #expect(result.status == 1, "a refused task makes the status 1")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.last == "cancelled 3 of 4 tasks (1 refused: imp-fixed)", "\(result.stdout)")
        #expect(lines.filter { $0.hasPrefix("cancel ") && $0.contains("applied") }.count == 3)
        #expect(result.errorLines.count == 1 && result.errorLines[0].hasPrefix("progressctl: refused: Task 'imp-fixed' cannot be cancelled"))
        let after = try await statuses(fixture)
        #expect(after["imp-1"] == .cancelled && after["imp-2"] == .cancelled && after["imp-run"] == .cancelled)
        #expect(after["imp-fixed"] == .pending && after["imp-done"] == .completed && after["exp-1"] == .pending)
        let events = try await fixture.store.events(of: "imp-1").map(\.kind)
        #expect(events.last == .cancelled)
    }

    @Test func withNothingRefusedTheStatusIsZero() async throws {
        let fixture = try await fixture()
        let result = try await fixture.run(["pause", "--name", "NIGHTLY", "--yes"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").last == "paused 2 of 2 tasks")
        #expect(result.stderr.isEmpty)
        let after = try await statuses(fixture)
        #expect(after["imp-1"] == .paused && after["imp-2"] == .paused)

        // resume chooses the paused ones by default.
        let resumed = try await fixture.run(["resume", "--kind", "import", "--yes"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.split(separator: "\n").last == "resumed 2 of 2 tasks")
        #expect(try await statuses(fixture)["imp-1"] == .pending)
    }

    /// `--since` and `--until` take durations and dates; `--status` overrides the action's default statuses.
    @Test func theFiltersCombine() async throws {
        let fixture = try await fixture()
        let since = ISO8601DateFormatter().string(from: fixture.start.addingTimeInterval(5))
        let until = ISO8601DateFormatter().string(from: fixture.start.addingTimeInterval(35))
        let result = try await fixture.run(
            ["cancel", "--since", since, "--until", until, "--status", "pending,completed", "--dry-run", "--json"])
        let summary = try decodeJSON(SummaryDocument.self, from: result.stdout)
        #expect(summary.action == "cancel" && summary.dryRun)
        #expect(summary.matched == 2 && summary.changed == 1)
        #expect(summary.changes.map(\.id) == ["imp-2"])
        #expect(summary.refused.map(\.id) == ["imp-fixed"])

        let old = try await fixture.run(["cancel", "--until", "1d", "--kind", "export", "--yes"])
        #expect(old.status == 0, "\(old.stderr)")
        #expect(try await statuses(fixture)["exp-1"] == .cancelled)
        let recent = try await fixture.run(["cancel", "--since", "1d", "--yes"])
        #expect(recent.stdout == "cancelled 0 of 0 tasks\n")
    }

    @Test func theJSONSummaryHasEveryField() async throws {
        let fixture = try await fixture()
        let result = try await fixture.run(["cancel", "--kind", "import", "--yes", "--json"])
        #expect(result.status == 1)
        let summary = try decodeJSON(SummaryDocument.self, from: result.stdout)
        #expect(!summary.dryRun && summary.matched == 4 && summary.changed == 3)
        #expect(summary.refused.first?.message.contains("cannot be cancelled") == true)
        let changes = try #require(try jsonObjects(result.stdout).first?["changes"] as? [[String: Any]])
        let pending = try #require(changes.first { $0["id"] as? String == "imp-1" })
        #expect(pending.isNull("ownerID"), "an unowned task's owner is null, not a missing key")
        #expect(pending["status"] as? String == "cancelled")
    }

    @Test(arguments: [
        (["cancel", "--status", "pending"], "give --yes to go ahead"),
        (["remove", "--kind", "import"], "give --yes to go ahead"),
        (["cancel"], "give a task id or filters"),
        (["pause", "imp-1", "--kind", "import"], "not both"),
        (["retry", "--all-failed", "--status", "failed"], "--all-failed is --status failed"),
        (["cancel", "--since", "1h", "--until", "2h", "--yes"], "--since is later than --until"),
    ])
    func withoutATerminalOrWithBadFiltersNothingHappens(arguments: [String], message: String) async throws {
        let fixture = try await fixture()
        let before = fixture.bytes()
        let result = try await fixture.run(arguments)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.errorLines.count == 1 && result.stderr.contains(message), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        #expect(fixture.bytes() == before)
    }

    @Test func onATerminalItAsksFirst() async throws {
        let fixture = try await fixture()
        let terminal = try PseudoTerminal(rows: 24, columns: 100)
        defer { terminal.close() }
        let declined = try terminal.start(["--db", fixture.path, "cancel", "--kind", "export"])
        #expect(await terminal.waitForOutput { $0.contains("cancel 1 task (1 pending)? [y/N] ") }, "\(terminal.output)")
        terminal.type("n\n")
        #expect(try await declined.waitForExit(timeout: .seconds(120)) == 1)
        // Waited for: the terminal's reader may not have read the last line when the process has exited (a CI run).
        #expect(
            await terminal.waitForOutput { $0.contains("not confirmed; nothing was changed") }, "\(terminal.output)")
        #expect(try await statuses(fixture)["exp-1"] == .pending)

        let second = try PseudoTerminal(rows: 24, columns: 100)
        defer { second.close() }
        let confirmed = try second.start(["--db", fixture.path, "cancel", "--kind", "export"])
        #expect(await second.waitForOutput { $0.contains("[y/N] ") })
        second.type("y\n")
        #expect(try await confirmed.waitForExit(timeout: .seconds(120)) == 0, "\(second.output)")
        #expect(await second.waitForOutput { $0.contains("cancelled 1 of 1 task") }, "\(second.output)")
        #expect(try await statuses(fixture)["exp-1"] == .cancelled)
    }

    @Test func retryByFilterTakesFailedAndCancelledAndAllFailedStillWorks() async throws {
        let fixture = try Fixture()
        try await fixture.root("f-1", status: .failed, options: .default.retryable())
        try await fixture.root("c-1", status: .cancelled, options: .default.retryable())
        try await fixture.root("f-stuck", status: .failed)
        try await fixture.root("done", status: .completed, options: .default.retryable())

        let onlyFailed = try await fixture.run(["retry", "--all-failed", "--dry-run"])
        #expect(onlyFailed.status == 1)
        #expect(onlyFailed.stdout.contains("would retry f-1") && !onlyFailed.stdout.contains("c-1"))
        #expect(onlyFailed.stdout.hasSuffix("would retry 1 of 2 tasks (1 refused: f-stuck)\n"))

        let result = try await fixture.run(["retry", "--kind", "import", "--yes"])
        #expect(result.status == 1)
        #expect(result.stdout.hasSuffix("retried 2 of 3 tasks (1 refused: f-stuck)\n"), "\(result.stdout)")
        #expect(result.stderr.contains("its options do not allow retries"))
        #expect(try await fixture.store.task(id: "f-1")?.status == .pending)
        #expect(try await fixture.store.task(id: "c-1")?.attempt == 2)
        #expect(try await fixture.store.task(id: "done")?.status == .completed)
    }

    @Test func removeByFilterTakesFinishedTasksAndUnfinishedOnlyWithForce() async throws {
        let fixture = try Fixture()
        let old = fixture.start
        try await fixture.root("old-done", status: .completed, createdAt: old)
        try await fixture.root("old-failed", status: .failed, createdAt: old)
        try await fixture.root("old-pending", status: .pending, createdAt: old)
        try await fixture.root("new-done", status: .completed, createdAt: Date())

        let finished = try await fixture.run(["remove", "--until", "1d", "--yes"])
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(finished.stdout.hasSuffix("removed 2 of 2 tasks\n"))
        #expect(try await fixture.store.roots(TaskQuery()).map(\.id).sorted() == ["new-done", "old-pending"])

        let unforced = try await fixture.run(["remove", "--status", "pending", "--yes"])
        #expect(unforced.status == 1)
        #expect(unforced.stderr.contains("only a finished task is removed (use --force"))
        #expect(try await fixture.store.task(id: "old-pending") != nil)

        let forced = try await fixture.run(["remove", "--status", "pending", "--force", "--yes"])
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try await fixture.store.task(id: "old-pending") == nil)
    }

    /// Tasks of a live owner are changed by control requests, written first and awaited together: this owner answers
    /// none until all five are queued, so a command that waited for each request before writing the next would get no
    /// answer at all.
    @Test func tasksOfALiveOwnerAreAskedOfItTogether() async throws {
        let fixture = try Fixture()
        try await fixture.owner("service", alive: true)
        for index in 0..<5 {
            try await fixture.root("live-\(index)", status: .running, options: .interactive, owner: "service")
        }
        let store = fixture.store
        let owner = Task {
            var handled: [ControlRequest] = []
            while !Task.isCancelled {
                // Cancelling this loop interrupts a store call: that ends it.
                guard let requests = try? await store.pendingControlRequests(for: "service") else { break }
                let allQueued = requests.count + handled.count == 5
                for request in requests where allQueued {
                    let outcome = request.taskID == "live-3" ? "the task is at a step that cannot stop" : "applied"
                    guard (try? await store.completeControlRequest(id: request.id, outcome: outcome, at: Date())) != nil
                    else { break }
                    handled.append(request)
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
            return handled
        }
        defer { owner.cancel() }
        let result = try await fixture.run(["pause", "--status", "running", "--yes", "--wait", "60"])
        #expect(result.status == 1)
        #expect(result.stdout.hasSuffix("paused 4 of 5 tasks (1 refused: live-3)\n"), "\(result.stdout)")
        #expect(result.stderr.contains("owner 'service' refused to pause task 'live-3'"))
        owner.cancel()
        #expect(await owner.value.count == 5)
    }

    /// Without `--status`, a change by filter chooses what the lifecycle lets the action change (as the README says).
    @Test func theDefaultStatusesComeFromTheLifecycle() {
        #expect(TaskControl.statuses(changedBy: .cancel) == [.pending, .running, .paused])
        #expect(TaskControl.statuses(changedBy: .pause) == [.pending, .running])
        #expect(TaskControl.statuses(changedBy: .resume) == [.paused])
        #expect(TaskControl.statuses(changedBy: .retry) == [.failed, .cancelled])
        #expect(TaskControl.statuses(changedBy: .remove) == Set(TaskStatus.allCases))
        #expect(TaskControl.statuses(changedBy: .remove).filter(\.isFinished) == Set([.completed, .failed, .cancelled]))
    }
}
