import Foundation
import Progression
import Testing

/// The lifecycle as a table: every (transition, status) pair, for a root job and for a subtask, what it leads to (the
/// new status and the event written) or the refusal and its message; then the guards of options and requesters, and
/// what each transition writes into the record. The expected values are written out here from the state diagram, not
/// derived from the code under test.
struct TaskLifecycleTests {
    /// What a transition should do to a task in one status.
    enum Expected: CustomStringConvertible, Sendable {
        /// Allowed: the status after it (`nil`: deleted) and the event it writes.
        case to(TaskStatus?, TaskEvent.Kind?)
        /// Refused with this message.
        case refused(String)

        var description: String {
            switch self {
            case .to(let status, let event): "→ \(status.map(\.rawValue) ?? "deleted") (\(event.map(\.rawValue) ?? "no event"))"
            case .refused(let message): "refused: \(message)"
            }
        }
    }

    /// One row: a transition and what it does in each status, in the order of ``TaskStatus/allCases`` (pending,
    /// running, paused, completed, failed, cancelled).
    struct Row: CustomTestStringConvertible, Sendable {
        var transition: TaskLifecycle.Transition
        var isRoot: Bool
        var requester: TaskChangeRequester
        var expected: [Expected]

        var testDescription: String { "\(transition.name) (\(isRoot ? "root" : "subtask"), \(requester))" }
    }

    static let failure = TaskFailure(type: "Example.Error", description: "it broke")
    static let later = Date(timeIntervalSince1970: 1_800_000_000)

    /// "Task 't' is <status>: cannot <action>" for each status, in table order.
    static func cannot(_ action: String) -> (TaskStatus) -> Expected {
        { status in .refused("Task 't' is \(status): cannot \(action)") }
    }

    static func row(
        _ transition: TaskLifecycle.Transition, root: Bool = true, by requester: TaskChangeRequester = .user,
        _ cells: [TaskStatus: Expected], otherwise: (TaskStatus) -> Expected
    ) -> Row {
        Row(
            transition: transition, isRoot: root, requester: requester,
            expected: TaskStatus.allCases.map { cells[$0] ?? otherwise($0) })
    }

    static func notRetryableUnlessFinished(_ status: TaskStatus) -> Expected {
        .refused("Task 't' cannot be retried: it is \(status); only a failed or cancelled task can be retried")
    }

    /// Every transition against every status, for a root job whose options allow everything, asked by its executor's
    /// user; subtasks where they differ; the system where it may do more.
    static let table: [Row] = [
        row(.start, [.pending: .to(.running, .started)], otherwise: cannot("start it")),
        row(.rerun, [:], otherwise: cannot("run again it")),
        row(
            .rerun, root: false,
            [
                .pending: .to(.running, .started), .paused: .to(.paused, .started), .completed: .to(.running, .started),
                .failed: .to(.running, .started), .cancelled: .to(.running, .started),
            ], otherwise: cannot("run again it")),
        row(
            .pause, [.pending: .to(.paused, .paused), .running: .to(.paused, .paused), .paused: .to(.paused, nil)],
            otherwise: cannot("pause it")),
        row(.resume(codeRunning: true), [.paused: .to(.running, .resumed)], otherwise: cannot("resume it")),
        row(.resume(codeRunning: false), [.paused: .to(.pending, .resumed)], otherwise: cannot("resume it")),
        row(
            .complete(result: nil), [.running: .to(.completed, .completed), .paused: .to(.completed, .completed)],
            otherwise: cannot("complete it")),
        row(
            .fail(failure), [.running: .to(.failed, .failed), .paused: .to(.failed, .failed)],
            otherwise: cannot("fail it")),
        // Recovery fails a claimed root that cannot run again before it starts.
        row(
            .fail(failure), by: .system,
            [.pending: .to(.failed, .failed), .running: .to(.failed, .failed), .paused: .to(.failed, .failed)],
            otherwise: cannot("fail it")),
        row(
            .retryLater(failure, at: later), [.running: .to(.pending, .failed), .paused: .to(.paused, .failed)],
            otherwise: cannot("schedule a retry of it")),
        row(.retryLater(failure, at: later), root: false, [:], otherwise: cannot("schedule a retry of it")),
        row(
            .beginAttempt, [.pending: .to(.pending, .retried), .paused: .to(.paused, .retried)],
            otherwise: cannot("begin the next attempt of it")),
        row(
            .cancel,
            [.pending: .to(.cancelled, .cancelled), .running: .to(.cancelled, .cancelled), .paused: .to(.cancelled, .cancelled)],
            otherwise: cannot("cancel it")),
        row(
            .retry, [.failed: .to(.pending, .retried), .cancelled: .to(.pending, .retried)],
            otherwise: notRetryableUnlessFinished),
        row(
            .retry, root: false, [:],
            otherwise: { _ in .refused("Task 't' cannot be retried: it is a subtask: retry its root") }),
        row(
            .interrupt, [.running: .to(.pending, .interrupted), .pending: .to(.pending, nil), .paused: .to(.paused, nil)],
            otherwise: cannot("interrupt it")),
        row(
            .release, by: .system,
            [.running: .to(.pending, .interrupted), .pending: .to(.pending, nil), .paused: .to(.paused, nil)],
            otherwise: cannot("release it")),
        row(
            .remove, [.completed: .to(nil, nil), .failed: .to(nil, nil), .cancelled: .to(nil, nil)],
            otherwise: cannot("remove it before it has finished (cancel it first)")),
        // A root resumed while every slot was taken gets one: its code goes on (the resume wrote the event).
        row(.resumeRun, [.pending: .to(.running, nil)], otherwise: cannot("resume the run of it")),
        row(.resumeRun, root: false, [:], otherwise: cannot("resume the run of it")),
        // A durable sleep hands the root back until a time.
        row(
            .suspend(until: later), by: .system, [.running: .to(.pending, .sleeping), .paused: .to(.paused, .sleeping)],
            otherwise: cannot("suspend it")),
        row(.suspend(until: later), root: false, by: .system, [:], otherwise: cannot("suspend it")),
        // A durable wait for children, jobs or a signal hands the root back until the tree keeper releases it.
        row(
            .await(.children(all: true), description: "2 child jobs", until: later, progress: 0.5), by: .system,
            [.running: .to(.pending, .waiting), .paused: .to(.paused, .waiting)], otherwise: cannot("wait it")),
        row(
            .await(.signal("go"), description: "the signal 'go'", until: later, progress: nil), root: false,
            by: .system, [:], otherwise: cannot("wait it")),
        // Run now: only a pending or paused root that waits for a time (these records wait for none).
        row(
            .runNow,
            [
                .pending: .refused("Task 't' is pending: cannot run it now: it waits for no time"),
                .paused: .refused("Task 't' is paused: cannot run it now: it waits for no time"),
            ], otherwise: cannot("run it now")),
        row(.runNow, root: false, [:], otherwise: cannot("run a subtask now (run its root now)")),
        // progressctl without a live owner: no code runs, so a running task cannot be paused (only a pending one).
        row(
            .pause, by: .operatorWithoutOwner, [.pending: .to(.paused, .paused), .paused: .to(.paused, nil)],
            otherwise: { status in
                status == .running
                    ? .refused(
                        "Task 't' is running: cannot pause it while no running executor holds it "
                            + "(only a pending task can be paused then)")
                    : .refused("Task 't' is \(status): cannot pause it")
            }),
    ]

    static func record(status: TaskStatus, isRoot: Bool, kind: String? = "import", options: TaskOptions) -> TaskRecord {
        var record = TaskRecord(
            id: isRoot ? "t" : "t", name: "task", kind: isRoot ? kind : nil, options: options, status: status,
            createdAt: Date(timeIntervalSince1970: 1_700_000_000))
        if !isRoot {
            record.parentID = "r"
            record.rootID = "r"
        }
        record.attempt = 2
        record.startedAt = status == .pending ? nil : Date(timeIntervalSince1970: 1_700_000_001)
        if status.isFinished { record.finishedAt = Date(timeIntervalSince1970: 1_700_000_002) }
        return record
    }

    static let everything = TaskOptions(canCancel: true, canPause: true, canRetry: true)

    /// Time: a sleep stores its wake time and hands the root to no owner; run now clears a wait, on the root and (in
    /// the store) on the sleeps below it.
    @Test func aSleepAndARunNowWriteTheirTimes() throws {
        var record = Self.record(status: .running, isRoot: true, options: Self.everything)
        record.ownerID = "worker"
        let now = Date(timeIntervalSince1970: 1_700_000_100)
        let sleeping = try #require(try TaskLifecycle.apply(.suspend(until: Self.later), to: &record, now: now, by: .system))
        #expect(record.status == .pending && record.ownerID == nil && record.nextAttemptAt == Self.later)
        #expect(record.waitReason == .sleep && record.displayStatus == "sleeping")
        #expect(sleeping.kind == .sleeping && sleeping.message?.hasPrefix("until 2027-01-15") == true)
        let woken = try #require(try TaskLifecycle.apply(.runNow, to: &record, now: now, by: .operatorWithoutOwner))
        #expect(record.status == .pending && record.nextAttemptAt == nil && woken.kind == .scheduled)
        #expect(record.waitReason == nil && record.displayStatus == "pending")

        var scheduled = Self.record(status: .pending, isRoot: true, options: Self.everything)
        scheduled.nextAttemptAt = Self.later
        #expect(scheduled.waitReason == .runAt && scheduled.displayStatus == "scheduled")
        scheduled.errorDescription = "it broke"
        #expect(scheduled.waitReason == .retry && scheduled.displayStatus == "retrying")

        let child = TaskRecord(
            id: "t.1", parentID: "t", rootID: "t", name: "sleep", status: .pending, createdAt: now,
            nextAttemptAt: Self.later)
        let cascade = try TaskUpdate.cascade(of: .runNow, over: [child], at: now)
        #expect(cascade.map(\.record.nextAttemptAt) == [now] && cascade.map(\.columns) == [[.nextAttemptAt, .updatedAt]])
    }

    /// A wait records what the job waits for and hands it to no owner; run now refuses it (it waits for no time), and
    /// its start or end clears it.
    @Test func aWaitWritesWhatItWaitsForAndItsEndClearsIt() throws {
        var record = Self.record(status: .running, isRoot: true, options: Self.everything)
        record.ownerID = "worker"
        let now = Date(timeIntervalSince1970: 1_700_000_100)
        let waiting = try #require(
            try TaskLifecycle.apply(
                .await(.jobs, description: "job a", until: JobWait.untilReleased, progress: 0.25), to: &record, now: now,
                by: .system))
        #expect(record.status == .pending && record.ownerID == nil && record.nextAttemptAt == JobWait.untilReleased)
        #expect(record.wait == .jobs && record.waitingFor == "job a" && record.waitingProgress == 0.25)
        #expect(record.waitReason == .waiting && record.displayStatus == "waiting")
        #expect(waiting.kind == .waiting && waiting.message == "for job a")
        #expect(throws: ProgressionError.self) {
            try TaskLifecycle.apply(.runNow, to: &record, now: now, by: .operatorWithoutOwner)
        }
        try TaskLifecycle.apply(.cancel, to: &record, now: now, by: .operatorWithoutOwner)
        #expect(record.wait == nil && record.waitingFor == nil && record.waitingProgress == nil)
        #expect(record.waitReason == nil && record.displayStatus == "cancelled")
    }

    @Test(arguments: table)
    func everyTransitionInEveryStatus(row: Row) throws {
        for (status, expected) in zip(TaskStatus.allCases, row.expected) {
            var record = Self.record(status: status, isRoot: row.isRoot, options: Self.everything)
            let before = record
            let now = Date(timeIntervalSince1970: 1_700_000_100)
            let outcome: Result<TaskEvent?, ProgressionError>
            do {
                outcome = .success(try TaskLifecycle.apply(row.transition, to: &record, now: now, by: row.requester))
            } catch {
                outcome = .failure(error)
            }
            switch (expected, outcome) {
            case (.to(let next, let event), .success(let written)):
                if let next {
                    #expect(record.status == next, "\(row.testDescription) from \(status)")
                    #expect(record.updatedAt == now, "\(row.testDescription) from \(status): updatedAt")
                } else {
                    #expect(record == before, "\(row.testDescription) from \(status): a removal leaves the record")
                }
                #expect(written?.kind == event, "\(row.testDescription) from \(status): event")
                if let written {
                    #expect(written.taskID == record.id && written.rootID == record.rootID && written.at == now)
                    #expect(written.attempt == record.attempt)
                }
                let predicted = try TaskLifecycle.outcome(
                    of: row.transition, status: status, options: Self.everything, isRoot: row.isRoot,
                    hasKind: row.isRoot, taskID: "t", by: row.requester)
                #expect(predicted.status == next && predicted.event == event, "outcome(of:) agrees")
            case (.refused(let message), .failure(let error)):
                #expect(error.description == message, "\(row.testDescription) from \(status)")
                #expect(record == before, "\(row.testDescription) from \(status): a refusal changes nothing")
            default:
                Issue.record("\(row.testDescription) from \(status): expected \(expected), got \(outcome)")
            }
        }
    }

    /// Each option guards its action for the user and for progressctl without an owner, never for the system.
    @Test(arguments: [TaskChangeRequester.user, .operatorWithoutOwner, .system])
    func optionsGuardTheirActionsExceptForTheSystem(requester: TaskChangeRequester) throws {
        let guarded = requester != .system
        let cases: [(TaskOptions, TaskLifecycle.Transition, TaskStatus, String)] = [
            (.default, .pause, .pending, "Task 't' cannot be paused: its options do not allow it"),
            (.default, .resume(codeRunning: false), .paused, "Task 't' cannot be paused: its options do not allow it"),
            (.immutable, .cancel, .pending, "Task 't' cannot be cancelled: its options do not allow it"),
            (.default, .retry, .failed, "Task 't' cannot be retried: its options do not allow retries"),
        ]
        for (options, transition, status, message) in cases {
            var record = Self.record(status: status, isRoot: true, options: options)
            let before = record
            do {
                try TaskLifecycle.apply(transition, to: &record, now: Date(), by: requester)
                #expect(!guarded, "\(transition.name) by \(requester) should be refused")
            } catch {
                #expect(guarded, "\(transition.name) by the system must not be refused: \(error)")
                #expect(error.description == message)
                #expect(record == before)
            }
        }
    }

    /// A closure task (no kind) can be retried only by the process that has its code.
    @Test func aClosureTaskIsRetriedOnlyByAnExecutor() throws {
        var record = Self.record(status: .failed, isRoot: true, kind: nil, options: Self.everything)
        #expect(throws: ProgressionError.self) {
            try TaskLifecycle.apply(.retry, to: &record, now: Date(), by: .operatorWithoutOwner)
        }
        #expect(record.status == .failed)
        try TaskLifecycle.apply(.retry, to: &record, now: Date(), by: .user)
        #expect(record.status == .pending && record.attempt == 3)
    }

    /// What each transition writes into the record besides the status.
    @Test func transitionsWriteTheirFields() throws {
        let now = Date(timeIntervalSince1970: 1_700_000_500)
        func applied(_ transition: TaskLifecycle.Transition, from status: TaskStatus, root: Bool = true,
            by requester: TaskChangeRequester = .user, _ change: (inout TaskRecord) -> Void = { _ in }) throws -> TaskRecord
        {
            var record = Self.record(status: status, isRoot: root, options: Self.everything)
            record.ownerID = "owner-a"
            record.rate = 0.5
            change(&record)
            try TaskLifecycle.apply(transition, to: &record, now: now, by: requester)
            return record
        }

        let started = try applied(.start, from: .pending) {
            $0.errorType = "E"
            $0.errorDescription = "old"
            $0.nextAttemptAt = Self.later
        }
        #expect(started.startedAt == now && started.finishedAt == nil && started.errorType == nil)
        #expect(started.errorDescription == nil && started.nextAttemptAt == nil && started.rate == nil)

        let completed = try applied(.complete(result: Data("42".utf8)), from: .running)
        #expect(completed.finishedAt == now && completed.result == Data("42".utf8) && completed.progress == 1)

        let failed = try applied(.fail(Self.failure), from: .running)
        #expect(failed.finishedAt == now && failed.errorType == "Example.Error" && failed.errorDescription == "it broke")

        let waiting = try applied(.retryLater(Self.failure, at: Self.later), from: .running)
        #expect(waiting.nextAttemptAt == Self.later && waiting.finishedAt == nil && waiting.errorDescription == "it broke")
        #expect(waiting.attempt == 2, "the attempt counts up when it begins, not when it is scheduled")

        let next = try applied(.beginAttempt, from: .pending) { $0.nextAttemptAt = Self.later }
        #expect(next.attempt == 3 && next.nextAttemptAt == nil)

        let retried = try applied(.retry, from: .failed, by: .operatorWithoutOwner)
        #expect(retried.attempt == 3 && retried.finishedAt == nil && retried.errorType == nil)
        #expect(retried.ownerID == nil, "without an owner, the next executor that claims it runs it")
        #expect(try applied(.retry, from: .failed).ownerID == "owner-a", "an executor keeps its own retry")

        let interrupted = try applied(.interrupt, from: .running)
        #expect(interrupted.interruptions == 1 && interrupted.ownerID == "owner-a")
        #expect(try applied(.interrupt, from: .pending).interruptions == 0, "only a running task was interrupted")

        let released = try applied(.release, from: .running, by: .system)
        #expect(released.ownerID == nil && released.interruptions == 0 && released.rate == nil)

        let rerun = try applied(.rerun, from: .failed, root: false) { $0.result = Data("1".utf8) }
        #expect(rerun.attempt == 3 && rerun.result == nil && rerun.startedAt == now, "a step that had started: attempt + 1")
        let firstRun = try applied(.rerun, from: .pending, root: false)
        #expect(firstRun.attempt == 2, "a step that never started keeps its attempt")

        let cancelled = try applied(.cancel, from: .pending) { $0.nextAttemptAt = Self.later }
        #expect(cancelled.finishedAt == now && cancelled.nextAttemptAt == nil)
    }
}
