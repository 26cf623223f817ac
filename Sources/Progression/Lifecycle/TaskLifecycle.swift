import Foundation

/// Who asks for a change of a task: it decides which guards apply.
package enum TaskChangeRequester: String, Sendable, Hashable, CaseIterable {
    /// Code through the executor's API, or progressctl through the live executor that holds the task: the task's
    /// options apply.
    case user
    /// progressctl changing the row itself because no live executor holds the task: the options apply, and only
    /// changes that need no running code are allowed (no code runs for such a task).
    case operatorWithoutOwner
    /// The executor itself: a parent's cancellation reaching its subtasks, a timeout, a graceful stop, recovery. The
    /// options do not apply.
    case system
}

/// Why a task failed, as stored.
package struct TaskFailure: Sendable, Hashable {
    /// The Swift type of the error (`String(reflecting:)`).
    package var type: String
    /// The error for people.
    package var description: String

    package init(type: String, description: String) {
        self.type = type
        self.description = description
    }

    /// The failure of `error`.
    package init(_ error: any Error) {
        type = String(reflecting: Swift.type(of: error))
        description = ProgressionError.describe(error)
    }
}

/// Every legal change of a task's status, with its guards and the event it writes: the one place that knows the state
/// machine. The executor, recovery, progressctl's direct changes and the stores' compare-and-set writes all change a
/// status through ``apply(_:to:now:by:message:)``; nothing else assigns one.
///
/// ```
///              start              complete | fail | cancel
///   pending ─────────▶ running ───────────────────────────▶ completed | failed | cancelled
///     ▲  │ pause  resume ▲ │ pause                                      │        │
///     │  ▼               │ ▼                                            │        │
///     │  paused ─────────┘ (resume: running while its code runs, else pending)   │
///     │    retryLater (a failed attempt with retries left), interrupt (its process died),
///     │    release (a graceful stop), suspend (a durable sleep) lead back to pending (a paused task
///     │    stays paused); resumeRun: a resumed root whose code waited for a slot gets one
///     └────────────────────────── retry ──────────────────────────────┴────────┘
/// ```
///
/// A pending or paused root may wait for a time (``TaskRecord/nextAttemptAt``: a run-at, a retry's backoff, the end of
/// a durable sleep); `runNow` ends the wait.
///
/// A transition of a node does not change its descendants' rows: a node below a paused one is shown paused (its code
/// waits at its next report) but keeps its own status; cancelling a node cancels its descendants' code, and each of
/// them records its own end.
package enum TaskLifecycle {
    /// A change asked of a task.
    package enum Transition: Sendable, Hashable {
        /// Its code starts: pending → running.
        case start
        /// A subtask's code runs again because its parent runs again (after a crash or a retry) and it had not
        /// completed, or its stored result cannot be used: → running (a paused subtask stays paused), a new attempt
        /// once it had started.
        case rerun
        /// Suspend its code at its next report: pending | running → paused.
        case pause
        /// Undo a pause: paused → running when its code still runs (`codeRunning`), else pending.
        case resume(codeRunning: Bool)
        /// A root resumed while no slot was free (its code waits, suspended) gets a slot: pending → running. No event:
        /// the resume was recorded.
        case resumeRun
        /// A durable sleep: the root's code stops and gives its slot back until `until`, when any worker continues it:
        /// running → pending (paused stays paused), no owner, next attempt at `until`.
        case suspend(until: Date)
        /// A job's code stops to wait durably for its child jobs, other jobs or a signal: running → pending (paused
        /// stays paused), no owner, its time `until` (a signal's timeout, else ``JobWait/untilReleased``), what it waits
        /// for recorded with the progress its tree adds up to now (`progress`, which its children raise meanwhile).
        case await(JobWait, description: String, until: Date, progress: Double?)
        /// A root that waits for a time (a run-at, a retry's backoff, a durable sleep) runs as soon as a worker can
        /// take it: its next attempt time is cleared.
        case runNow
        /// Its code returned: running | paused → completed, with the step's stored value.
        case complete(result: Data?)
        /// Its code threw (or it timed out, or cannot run again): → failed.
        case fail(TaskFailure)
        /// Its code threw and its retry policy allows another attempt at `at`: → pending (paused stays paused).
        case retryLater(TaskFailure, at: Date)
        /// The next automatic attempt begins: attempt + 1 (the task stays pending or paused).
        case beginAttempt
        /// Stop it: pending | running | paused → cancelled.
        case cancel
        /// Run a failed or cancelled root again: → pending, attempt + 1.
        case retry
        /// The process running it died: running → pending, interruptions + 1.
        case interrupt
        /// A graceful stop hands it back: running → pending; a paused task stays paused; no owner holds it.
        case release
        /// Delete a finished task with its subtree and history.
        case remove

        /// The transition's name, as progressctl and errors say it.
        package var name: String {
            switch self {
            case .start: "start"
            case .rerun: "run again"
            case .pause: "pause"
            case .resume: "resume"
            case .resumeRun: "resume the run of"
            case .suspend: "suspend"
            case .await: "wait"
            case .runNow: "run now"
            case .complete: "complete"
            case .fail: "fail"
            case .retryLater: "schedule a retry of"
            case .beginAttempt: "begin the next attempt of"
            case .cancel: "cancel"
            case .retry: "retry"
            case .interrupt: "interrupt"
            case .release: "release"
            case .remove: "remove"
            }
        }
    }

    /// What a transition does: the status after it (`nil`: the task is deleted) and the event it writes (`nil`: none,
    /// the change is silent or nothing changes).
    package struct Outcome: Sendable, Hashable {
        package var status: TaskStatus?
        package var event: TaskEvent.Kind?
    }

    /// Whether `transition` is allowed for a task in `status` with `options`, and what it leads to; nothing changes.
    ///
    /// - Throws: ``ProgressionError`` saying why not: `notPausable`, `notCancellable`, `notRetryable`,
    ///   `invalidState`.
    package static func outcome(
        of transition: Transition, status: TaskStatus, options: TaskOptions, isRoot: Bool, hasKind: Bool,
        taskID: String, by requester: TaskChangeRequester
    ) throws(ProgressionError) -> Outcome {
        let guarded = requester != .system
        func refuse(_ action: String? = nil) -> ProgressionError {
            .invalidState(taskID: taskID, status: status, action: action ?? "\(transition.name) it")
        }
        switch transition {
        case .start:
            guard status == .pending else { throw refuse() }
            return Outcome(status: .running, event: .started)

        case .rerun:
            guard !isRoot, status != .running else { throw refuse() }
            return Outcome(status: status == .paused ? .paused : .running, event: .started)

        case .pause:
            if guarded, !options.canPause { throw .notPausable(taskID: taskID) }
            switch status {
            case .paused: return Outcome(status: .paused, event: nil)
            case .pending: return Outcome(status: .paused, event: .paused)
            case .running:
                guard requester != .operatorWithoutOwner else {
                    throw .invalidState(
                        taskID: taskID, status: status,
                        action: "pause it while no running executor holds it (only a pending task can be paused then)")
                }
                return Outcome(status: .paused, event: .paused)
            case .completed, .failed, .cancelled: throw refuse()
            }

        case .resume(let codeRunning):
            if guarded, !options.canPause { throw .notPausable(taskID: taskID) }
            guard status == .paused else { throw refuse() }
            return Outcome(status: codeRunning ? .running : .pending, event: .resumed)

        case .resumeRun:
            guard status == .pending, isRoot else { throw refuse() }
            return Outcome(status: .running, event: nil)

        case .suspend:
            guard isRoot, status == .running || status == .paused else { throw refuse() }
            return Outcome(status: status == .paused ? .paused : .pending, event: .sleeping)

        case .await:
            guard isRoot, status == .running || status == .paused else { throw refuse() }
            return Outcome(status: status == .paused ? .paused : .pending, event: .waiting)

        case .runNow:
            guard isRoot else {
                throw .invalidState(taskID: taskID, status: status, action: "run a subtask now (run its root now)")
            }
            guard status == .pending || status == .paused else { throw refuse("run it now") }
            return Outcome(status: status, event: .scheduled)

        case .complete:
            guard status == .running || status == .paused else { throw refuse() }
            return Outcome(status: .completed, event: .completed)

        case .fail:
            switch status {
            case .running, .paused: return Outcome(status: .failed, event: .failed)
            // Recovery fails a claimed task that cannot run again (a closure task, a crash loop) before it starts.
            case .pending where requester == .system: return Outcome(status: .failed, event: .failed)
            default: throw refuse()
            }

        case .retryLater:
            guard status == .running || status == .paused, isRoot else { throw refuse() }
            return Outcome(status: status == .paused ? .paused : .pending, event: .failed)

        case .beginAttempt:
            guard status == .pending || status == .paused, isRoot else { throw refuse() }
            return Outcome(status: status, event: .retried)

        case .cancel:
            if guarded, !options.canCancel { throw .notCancellable(taskID: taskID) }
            guard !status.isFinished else { throw refuse() }
            return Outcome(status: .cancelled, event: .cancelled)

        case .retry:
            guard isRoot else { throw .notRetryable(taskID: taskID, reason: "it is a subtask: retry its root") }
            if guarded, !options.canRetry {
                throw .notRetryable(taskID: taskID, reason: "its options do not allow retries")
            }
            guard status == .failed || status == .cancelled else {
                throw .notRetryable(taskID: taskID, reason: "it is \(status); only a failed or cancelled task can be retried")
            }
            if requester == .operatorWithoutOwner, !hasKind {
                throw .notRetryable(
                    taskID: taskID,
                    reason: "it is a closure task: only the process that defined its code can run it again, "
                        + "and no running executor holds it")
            }
            return Outcome(status: .pending, event: .retried)

        case .interrupt:
            switch status {
            case .running: return Outcome(status: .pending, event: .interrupted)
            case .pending, .paused: return Outcome(status: status, event: nil)
            case .completed, .failed, .cancelled: throw refuse()
            }

        case .release:
            switch status {
            case .running: return Outcome(status: .pending, event: .interrupted)
            case .pending, .paused: return Outcome(status: status, event: nil)
            case .completed, .failed, .cancelled: throw refuse()
            }

        case .remove:
            guard status.isFinished else {
                throw .invalidState(taskID: taskID, status: status, action: "remove it before it has finished (cancel it first)")
            }
            return Outcome(status: nil, event: nil)
        }
    }

    /// Applies `transition` to `record` (status, times, attempt, error, result, owner) and returns the event to store
    /// with it, if any. `remove` leaves the record as it is (the caller deletes it).
    ///
    /// - Throws: as ``outcome(of:status:options:isRoot:hasKind:taskID:by:)``; `record` is unchanged then.
    @discardableResult
    package static func apply(
        _ transition: Transition, to record: inout TaskRecord, now: Date, by requester: TaskChangeRequester,
        message: String? = nil
    ) throws(ProgressionError) -> TaskEvent? {
        let outcome = try outcome(
            of: transition, status: record.status, options: record.options, isRoot: record.isRoot,
            hasKind: record.kind != nil, taskID: record.id, by: requester)
        guard let status = outcome.status else { return nil }
        var eventMessage = message
        var errorType: String?
        switch transition {
        case .start:
            record.startedAt = now
            record.finishedAt = nil
            record.errorType = nil
            record.errorDescription = nil
            record.nextAttemptAt = nil
            record.rate = nil
        case .rerun:
            if record.startedAt != nil { record.attempt += 1 }
            record.startedAt = now
            record.finishedAt = nil
            record.errorType = nil
            record.errorDescription = nil
            record.result = nil
            record.nextAttemptAt = nil
            record.rate = nil
        case .pause, .resume, .resumeRun:
            break
        case .suspend(let until):
            record.ownerID = nil
            record.nextAttemptAt = until
            record.rate = nil
            eventMessage = eventMessage ?? "until \(until.formatted(.iso8601))"
        case .await(let wait, let description, let until, let progress):
            record.ownerID = nil
            record.nextAttemptAt = until
            record.wait = wait
            record.waitingFor = description
            record.waitingProgress = progress
            eventMessage = eventMessage ?? "for \(description)"
        case .runNow:
            if record.wait != nil {
                throw .invalidState(
                    taskID: record.id, status: record.status,
                    action: "run it now: it waits for \(record.waitingFor ?? "its children, jobs or a signal"), not a time")
            }
            guard record.nextAttemptAt != nil else {
                throw .invalidState(taskID: record.id, status: record.status, action: "run it now: it waits for no time")
            }
            record.nextAttemptAt = nil
            eventMessage = eventMessage ?? "run now"
        case .complete(let result):
            record.finishedAt = now
            record.result = result
            record.progress = 1
            record.nextAttemptAt = nil
            record.rate = nil
        case .fail(let failure):
            record.finishedAt = now
            record.errorType = failure.type
            record.errorDescription = failure.description
            record.nextAttemptAt = nil
            record.rate = nil
            eventMessage = eventMessage ?? failure.description
            errorType = failure.type
        case .retryLater(let failure, let at):
            record.errorType = failure.type
            record.errorDescription = failure.description
            record.nextAttemptAt = at
            record.rate = nil
            eventMessage = eventMessage ?? failure.description
            errorType = failure.type
        case .beginAttempt:
            record.attempt += 1
            record.nextAttemptAt = nil
            eventMessage = eventMessage ?? "attempt \(record.attempt)"
        case .cancel:
            record.finishedAt = now
            record.nextAttemptAt = nil
            record.rate = nil
        case .retry:
            record.attempt += 1
            record.finishedAt = nil
            record.errorType = nil
            record.errorDescription = nil
            record.nextAttemptAt = nil
            record.rate = nil
            // Run again by whichever worker claims it, unless its own executor retries it in memory.
            if requester != .user { record.ownerID = nil }
            eventMessage = eventMessage ?? "attempt \(record.attempt)"
        case .interrupt:
            if record.status == .running { record.interruptions += 1 }
            record.rate = nil
        case .release:
            record.ownerID = nil
            record.rate = nil
        case .remove:
            return nil
        }
        record.status = status
        record.updatedAt = now
        switch transition {
        case .start, .complete, .fail, .cancel, .retry:
            // A job that runs or has ended waits for nothing.
            record.wait = nil
            record.waitingFor = nil
            record.waitingProgress = nil
        default:
            break
        }
        guard let kind = outcome.event else { return nil }
        return TaskEvent(
            taskID: record.id, rootID: record.rootID, kind: kind, at: now, attempt: record.attempt,
            progress: record.progress, message: eventMessage, errorType: errorType)
    }
}
