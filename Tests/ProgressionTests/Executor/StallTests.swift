import Foundation
import ProgressionTestSupport
import Testing

@testable import Progression

/// Stalled jobs (issue 37): the rule on times passed in, the stall check of the timer loop on the graph alone, an
/// executor on a manual clock whose job's subtask moves it and whose still job is cancelled or retried, the gauges'
/// count, and bad input refused.
struct StallTests {
    static let moved = Date(timeIntervalSince1970: 1_000_000)

    // MARK: The rule

    /// (seconds since the last movement, status, a root, stalled): stalled only past the limit (2 s), running, a root.
    static let rules: [(still: Double, status: TaskStatus, root: Bool, stalled: Bool)] = [
        (1.999, .running, true, false),
        (2.0, .running, true, false),  // at the limit: not yet
        (2.001, .running, true, true),
        (60, .running, true, true),
        (60, .paused, true, false),  // a pause is not a stall
        (60, .pending, true, false),
        (60, .running, false, false),  // a subtask's rule is its job's
    ]

    @Test(arguments: rules.indices)
    func aJobIsStalledOnlyWhileItRunsPastItsLimit(row: Int) {
        let row = Self.rules[row]
        var record = makeRecord(id: "job", status: row.status, kind: "k")
        if !row.root { record.parentID = "parent" }
        record.options = TaskOptions.default.stallLimit(.seconds(2))
        record.updatedAt = Self.moved
        let now = Self.moved.addingTimeInterval(row.still)
        #expect((record.stalledFor(at: now) != nil) == row.stalled)
        #expect((record.displayStatus(at: now) == "stalled") == row.stalled)
        if row.stalled { #expect(record.stalledFor(at: now) == .milliseconds(Int64((row.still * 1000).rounded()))) }
        record.options.stall = nil
        #expect(record.stalledFor(at: now) == nil, "no rule, never stalled")
    }

    // MARK: The stall check on the graph alone

    /// (action, seconds since the last movement when the check fires, paused): whether the code is stopped, and when
    /// (seconds on the executor's clock, the check firing at 10) the check is set again otherwise.
    static let checks: [(action: StallAction, still: Double, paused: Bool, waitsForSlot: Bool, stops: StopReason?, next: Duration?)] = [
        (.cancel, 3.5, false, false, .stalled(.seconds(3), retry: false), nil),
        (.retry, 3.5, false, false, .stalled(.seconds(3), retry: true), nil),
        (.cancel, 1, false, false, nil, .seconds(12) + .milliseconds(1)),  // moved 1 s ago: 2 s left
        (.cancel, 3, false, false, nil, .seconds(10) + .milliseconds(1)),  // at the limit: not yet
        (.cancel, 30, true, false, nil, .seconds(13)),  // paused: looked at again a limit later
        (.cancel, 30, false, true, nil, .seconds(13)),  // resumed, waiting for a slot: the same (not dropped)
    ]

    @Test(arguments: checks.indices)
    func theStallCheckStopsAStillJobOrLooksAgainWhenItCouldBe(row: Int) {
        let row = Self.checks[row]
        var state = GraphState.alone(slots: 1)
        var record = TaskRecord(
            id: "job", name: "job", kind: "k", options: TaskOptions.interactive.stallLimit(.seconds(3), then: row.action),
            status: row.paused ? .paused : row.waitsForSlot ? .pending : .running, ownerID: "owner", createdAt: Self.moved)
        record.updatedAt = Self.moved
        let root = state.addRoot(record, stored: true)
        _ = state.runQueue.take(root.handle)
        root.phase = .running
        root.waitsForSlot = row.waitsForSlot
        let cancelled = Counter()
        let started = Duration.seconds(2)
        root.execution = Execution(cancel: { cancelled.increment() }, startedAt: started, pausedSince: nil)
        _ = state.timers.add(.stall(root.handle, run: started), at: .seconds(10))
        _ = state.timers.add(.stall(root.handle, run: .seconds(1)), at: .seconds(10))  // an earlier run's: dropped
        let fired = state.fireTimers(now: Self.moved.addingTimeInterval(row.still), monotonicNow: .seconds(10))
        fired.cancellation.run()
        #expect(root.stopReason == row.stops)
        #expect(cancelled.count == (row.stops == nil ? 0 : 1))
        #expect(state.timers.earliest == row.next)
    }

    // MARK: An executor on a manual clock

    /// A subtask's report moves its job (the job's last change follows it), so the check that comes due finds it
    /// moving and looks again; once nothing moves for the limit, the job is cancelled, saying why.
    @Test func aSubtaskMovesItsJobAndAStillJobIsCancelledAfterItsLimit() async throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock()
        let executor = try await makeExecutor(.memory, in: directory, clock: clock)
        let (started, proceed, reported) = (Gate(), Gate(), Gate())
        let id = try await executor.addTask(
            name: "job", options: TaskOptions.interactive.stallLimit(.seconds(2), then: .cancel)
        ) { context in
            try await context.push("child") { child in
                started.open()
                await proceed.wait()
                try await child.report(.progress(0.5))
                reported.open()
                try await Task.sleep(for: .seconds(3_600))
            }
        }
        await started.wait()
        let armed = try #require(executor.engine.locked { $0.timers.earliest }, "the stall check")
        clock.advance(by: .milliseconds(1_500))
        proceed.open()
        await reported.wait()
        let movedAt = executor.engine.now()
        try await waitUntil("the job's last change to follow its subtask's report") {
            executor.snapshot(of: id)?.updatedAt == movedAt
        }
        clock.advance(by: .milliseconds(1_000))  // past the first check, 1 s after the movement
        try await waitUntil("the check to look again for the rest") {
            executor.engine.locked { $0.timers.earliest }.map { $0 > armed } ?? false
        }
        #expect(executor.snapshot(of: id)?.status == .running)
        #expect(executor.snapshot(of: id)?.stalledFor(at: executor.engine.now()) == nil)
        clock.advance(by: .milliseconds(1_100))  // 2.1 s without movement
        let ended = try await executor.finished(id)
        #expect(ended.status == .cancelled)
        let events = try await executor.store.events(EventQuery(taskID: id))
        #expect(events.contains { $0.kind == .cancelled && $0.message?.contains("stalled") == true }, "\(events)")
        await executor.shutdown()
    }

    /// With `.retry`, a still attempt fails as stalled and the retry policy runs the job again.
    @Test func aStillAttemptFailsAsStalledAndTheRetryPolicyRunsItAgain() async throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock()
        let executor = try await makeExecutor(.memory, in: directory, clock: clock)
        let attempts = Counter()
        let began = Gate()
        let options = TaskOptions.interactive.stallLimit(.seconds(2), then: .retry)
            .retryPolicy(.exponential(maxAttempts: 2, initialBackoff: .seconds(1), jitter: 0))
        let id = try await executor.addTask(name: "job", options: options) { _ in
            attempts.increment()
            if attempts.count == 1 {
                began.open()
                try await Task.sleep(for: .seconds(3_600))
            }
        }
        await began.wait()
        clock.advance(by: .milliseconds(2_500))
        try await waitUntil("the attempt to fail as stalled and wait for its retry") {
            executor.snapshot(of: id).map { $0.status == .pending && $0.nextAttemptAt != nil } ?? false
        }
        #expect(executor.snapshot(of: id)?.errorDescription == TaskStalledError(limit: .seconds(2)).description)
        clock.advance(by: .milliseconds(1_500))
        #expect(try await executor.finished(id).status == .completed)
        #expect(attempts.count == 2)
        await executor.shutdown()
    }

    // MARK: Gauges and bad input

    @Test func theGaugesCountTheStalledJobsOfEachKind() {
        let now = Self.moved.addingTimeInterval(100)
        func running(_ id: String, kind: String, still: Double, limit: Duration?) -> TaskRecord {
            var record = makeRecord(id: id, status: .running, kind: kind)
            record.options = TaskOptions.default.stallLimit(limit)
            record.updatedAt = now.addingTimeInterval(-still)
            return record
        }
        let gauges = FleetGauges(
            now: now, unfinished: [UnfinishedRootGroup(kind: "a", status: .running, waiting: false, due: true, count: 4, earliest: nil)],
            failedByKind: [:], owners: [], schedules: [],
            running: [
                running("still", kind: "a", still: 90, limit: .seconds(60)),
                running("moving", kind: "a", still: 5, limit: .seconds(60)),
                running("no-rule", kind: "a", still: 90, limit: nil),
                running("other", kind: "b", still: 90, limit: .seconds(1)),
            ],
            ownerStaleAfter: .seconds(15))
        #expect(gauges.kinds["a"]?.stalled == 1 && gauges.kinds["a"]?[.running] == 4)
        #expect(gauges.kinds["b"]?.stalled == 1)
        #expect(gauges.prometheusText.contains("progression_jobs_stalled{kind=\"a\"} 1\n"))
    }

    struct Hanging: JobKind {
        struct Input: Codable, Sendable {}
        static let name = "hanging"
        static let options = TaskOptions.default.stallLimit(.zero)
        func run(_ input: Input, context: any TaskContext) async throws {}
    }

    @Test(arguments: [Duration.zero, .seconds(-1)])
    func aStallLimitThatIsNotPositiveIsRefusedAndWritesNothing(limit: Duration) async throws {
        func saysWhy(_ error: any Error) -> Bool {
            guard case .invalidArgument(let message)? = error as? ProgressionError else { return false }
            return message.hasPrefix("a stall limit must be positive")
        }
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(.memory, in: directory, clock: ManualClock())
        #expect(performing: { try executor.register(Hanging()) }, throws: saysWhy)
        await #expect(
            performing: { _ = try await executor.addTask(name: "bad", options: TaskOptions.default.stallLimit(limit)) { _ in } },
            throws: saysWhy)
        #expect(try await executor.store.roots(TaskQuery()).isEmpty)
        let store = InMemoryTaskStore()
        let client = JobClient(store: store)
        await #expect(
            performing: {
                _ = try await client.submit(
                    Hanging.self, input: .init(), options: JobOptions(options: TaskOptions.default.stallLimit(limit)))
            }, throws: saysWhy)
        #expect(await store.roots(TaskQuery()).isEmpty)
        #expect(performing: { try StallAction(parsing: "sometimes") }, throws: { error in
            guard case .invalidArgument(let message)? = error as? ProgressionError else { return false }
            return message == "unknown stall action 'sometimes': use flag, cancel, retry"
        })
        await executor.shutdown()
    }
}
