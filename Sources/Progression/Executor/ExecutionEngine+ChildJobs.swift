import Foundation
import Logging
import Synchronization

/// Child jobs and durable waits: what a job's code calls to start jobs that any worker runs, to wait for them or for
/// a signal without holding a slot, and how this executor keeps its view of children that run elsewhere.
///
/// A child job is a root of its own in the store (unowned until a worker claims it) with a *link* in its parent's
/// tree: a node that stands for it there, whose status, progress and result the fleet's tree keeper keeps in line with
/// the child's (``JobTreeKeeper``). The parent's progress counts the link by its weight, as it counts a step. A parent
/// that waits gives its slot back (its code stops, as in a durable sleep) and is released by the tree keeper when what
/// it waits for has happened; any worker then runs its code again, which finds its children (and their results) by
/// name.
extension ExecutionEngine {
    // MARK: Starting children

    /// Starts child jobs of the job that runs `handle`'s code, in one commit; returns them in order (the same ones
    /// again when the code runs again).
    ///
    /// - Throws: see ``TaskContext/startChild(_:input:options:)``.
    func startChildJobs(_ handle: NodeHandle, _ requests: [ChildJobRequest]) async throws -> [ChildJobReference] {
        try Task.checkCancellation()
        guard !requests.isEmpty else { return [] }
        let jobTrees = try capabilities.jobTreesOrRefusal
        for request in requests {
            guard request.weight.isFinite, request.weight > 0 else {
                throw ProgressionError.invalidProgressValue(
                    "weight \(request.weight) of child job '\(request.name)' must be a positive number")
            }
            guard !request.name.isEmpty else { throw ProgressionError.invalidArgument("a child job needs a name") }
            guard request.input.count <= configuration.maxInputBytes else {
                throw JobInputTooLargeError(kind: request.kind, bytes: request.input.count, limit: configuration.maxInputBytes)
            }
        }
        // Each kind must be one a worker of the database can run (as `progressctl submit` checks), and its options are
        // the children's unless they give their own.
        var kindOptions: [String: TaskOptions] = [:]
        var unknown: [String] = []
        for kind in Set(requests.map(\.kind)).sorted() {
            if let registered = registry.kind(kind) { kindOptions[kind] = registered.options } else { unknown.append(kind) }
        }
        if !unknown.isEmpty {
            // Without the fleet's kinds, a kind not registered here is not known to exist.
            var stored: [String: StoredKind] = [:]
            if let fleet = capabilities.fleet {
                try await retryingStorage("reading the registered kinds") { stored = try await fleet.registeredKinds() }
            }
            for kind in unknown {
                if let known = stored[kind] {
                    kindOptions[kind] = known.options
                } else if !requests.contains(where: { $0.kind == kind && $0.allowsUnregisteredKind }) {
                    throw ProgressionError.unknownKind(kind)
                }
            }
        }
        try await waitWhilePaused(handle)
        try Task.checkCancellation()
        let slots = try locked { state throws(ProgressionError) in
            try state.placeChildJobs(under: handle, names: requests.map(\.name))
        }
        let newCount = slots.count { $0.existing == nil }
        // Children found again in a new attempt of their parent: how they ended, as their own rows say (a link may
        // not follow its child yet), decides which run again.
        let earlier = locked { $0.childrenOfEarlierAttempts(slots) }
        var earlierChildren: [String: TaskRecord] = [:]
        if !earlier.isEmpty {
            var rows: [TaskRecord] = []
            try await retryingStorage("reading child jobs") { rows = try await jobTrees.tasks(ids: earlier) }
            for row in rows { earlierChildren[row.id] = row }
        }
        var identifiers: Range<Int64> = 0..<0
        if newCount > 0 {
            try await retryingStorage("reserving task ids") { identifiers = try await store.reserveIdentifiers(newCount) }
        }
        let now = now()
        let started = try locked { state throws(ProgressionError) in
            try state.createChildJobs(
                under: handle, requests, slots: slots, identifiers: identifiers, kindOptions: kindOptions,
                earlierChildren: earlierChildren, now: now)
        }
        wakeWriter(urgent: true)
        // The links' reset is committed before their children run again: written after, it would put back over a
        // restarted child's mirrored end (a quick one) the pending state of its link, and nothing would mirror it again.
        if !started.restarts.isEmpty { try await waitForCommit(started.sequence) }
        for child in started.restarts {
            do {
                _ = try await store.change(
                    TaskChangeRequest(taskID: child, transition: .retry, requester: .system, at: now))
            } catch let error as ProgressionError {
                // Retried (or removed) meanwhile by someone else: it runs, or its await says what became of it.
                logger.info("child job not run again", metadata: ["child": "\(child)", "reason": "\(error)"])
            }
        }
        try await waitForCommit(started.sequence)
        try checkNotFenced(handle)
        if newCount > 0 || !started.restarts.isEmpty {
            // Any worker (this one too) claims them.
            storeChanged.store(true, ordering: .relaxed)
            claimSignal.signal()
        }
        return started.references
    }

    // MARK: Awaiting children

    /// Waits durably for child jobs: returns how those that finished ended once all of `ids` have (`all`) or at least
    /// one; otherwise stops the root's code to wait (`CancellationError`).
    func awaitChildJobs(_ handle: NodeHandle, _ ids: [String], all: Bool) async throws -> [ChildJobOutcome] {
        try Task.checkCancellation()
        guard !ids.isEmpty else { return [] }
        try await waitWhilePaused(handle)
        try Task.checkCancellation()
        let jobTrees = try capabilities.jobTreesOrRefusal
        try locked { state throws(ProgressionError) in try state.checkChildren(ids, under: handle) }
        // What the children's own rows say now (their links follow them a moment later): a child that finished a
        // moment ago is seen without waiting, and a link's row that the tree keeper wrote from the child's earlier
        // attempt (the child cancelled, then run again here) is never taken for its end.
        var rows: [TaskRecord] = []
        try await retryingStorage("reading child jobs") { rows = try await jobTrees.tasks(ids: ids) }
        let now = now()
        let decision = try locked { state throws(ProgressionError) in
            state.applyChildRows(rows, now: now)
            return try state.awaitChildren(ids, under: handle, all: all, now: now)
        }
        switch decision {
        case .done(let outcomes):
            publisherSignal.signal()
            return outcomes
        case .wait(let cancellation):
            cancellation.run()
            wakeWriter(urgent: true)
            throw CancellationError()
        }
    }

    /// Reads the child jobs that the running roots here wait on in their code (started, not awaited yet) and brings
    /// their state into their links in memory, so that a running parent's progress moves with children on other hosts.
    func refreshLinks() async {
        let ids = locked { $0.unfinishedChildIDs(limit: 2_000) }
        guard !ids.isEmpty, let jobTrees = capabilities.jobTrees, let rows = try? await jobTrees.tasks(ids: ids) else {
            return
        }
        let now = now()
        locked { $0.applyChildRows(rows, now: now) }
        publisherSignal.signal()
    }

    // MARK: Signals

    /// Waits durably for a signal: returns its payload (taken once, by this call's step), or stops the root's code to
    /// wait for it (`CancellationError`).
    func waitForSignal(_ handle: NodeHandle, _ name: String, timeout: Duration?) async throws -> Data? {
        try JobSignalRecord.checkName(name)
        let jobTrees = try capabilities.jobTreesOrRefusal
        if let timeout, timeout < .zero {
            throw ProgressionError.invalidArgument("a signal's timeout cannot be negative (\(timeout))")
        }
        try Task.checkCancellation()
        try await waitWhilePaused(handle)
        try Task.checkCancellation()
        var now = now()
        let deadline = timeout.map { now.addingTimeInterval($0.seconds).roundedToMilliseconds }
        let step = try locked { state throws(ProgressionError) in
            try state.signalStep(under: handle, name: name, deadline: deadline, now: now)
        }
        let look: GraphState.SignalStep.Look
        switch step {
        case .received(let payload):
            return payload
        case .timedOut:
            throw SignalTimeoutError(name: name, timeout: timeout ?? .zero)
        case .look(let stepLook):
            look = stepLook
        }
        if let sequence = look.sequence { try await waitForCommit(sequence) }
        try checkNotFenced(handle)
        var taken: JobSignalRecord?
        do {
            try await retryingStorage("taking a signal") {
                taken = try await jobTrees.takeSignal(
                    job: look.rootID, name: name, step: look.stepID, owner: ownerID, at: self.now())
            }
        } catch let error as TaskStoreError where error.reason == .conflict {
            // Another owner holds the job now: its code stops here.
            leaseLost([look.rootID])
            throw CancellationError()
        }
        now = self.now()
        let outcome = try locked { state throws(ProgressionError) in
            try state.endSignalStep(look.step, name: name, taken: taken, now: now)
        }
        switch outcome {
        case .received(let sequence, let payload):
            try await waitForCommit(sequence)
            try checkNotFenced(handle)
            return payload
        case .timedOut(let sequence):
            try await waitForCommit(sequence)
            throw SignalTimeoutError(name: name, timeout: timeout ?? .zero)
        case .wait(let cancellation):
            cancellation.run()
            wakeWriter(urgent: true)
            throw CancellationError()
        }
    }
}
