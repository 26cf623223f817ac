import CoreMetrics
import Foundation
import Synchronization
import Logging
import ProgressionSQLite

/// The one writer of an executor: the only route from the executor's tasks to the store.
///
/// It waits for changes, lets them gather for the batching window (skipped when someone waits for a commit), and
/// stores every changed node's changed columns with the queued events in one transaction. It runs on a serial executor
/// of its own (a dispatch queue), so that task code that reports in a tight loop, keeping every thread of Swift's
/// cooperative pool busy, cannot starve it.
///
/// A failed batch (a full disk, an I/O error, a lock held too long) is not a task's failure: its content goes back into
/// the write set, the graph says the storage is failing, a warning is logged once, and the writer tries again with
/// backoff; who waits for a commit waits until a batch succeeds.
actor StoreWriter {
    private let engine: ExecutionEngine
    private let executor: UnownedSerialExecutor
    /// The queue of its own, when the store names no executor to share.
    private let queue: DispatchSerialExecutor?

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor }

    init(engine: ExecutionEngine) {
        self.engine = engine
        if let shared = engine.store.writerExecutor {
            queue = nil
            executor = shared
        } else {
            let queue = DispatchSerialExecutor(label: "progression.writer")
            self.queue = queue
            executor = queue.asUnownedSerialExecutor()
        }
    }

    /// The wait before the next try after `failures` failed batches in a row: 25 ms, doubling, at most a second (a
    /// full disk freed is noticed within a second).
    static func backoff(afterFailures failures: Int) -> Duration {
        .milliseconds(min(1_000, 25 << min(failures - 1, 6)))
    }

    /// The pause before the next batch, right after a commit that took `commit` and resumed `resumed` waiters, while
    /// more changes wait: a tenth of the commit, at most `limit`; none when nobody was resumed (nothing is coming) or
    /// when it would be shorter than 20 µs (a fast store gains nothing from it).
    static func gatheringPause(afterCommitOf commit: Duration, resumed: Int, limit: Duration) -> Duration? {
        guard resumed > 0, limit > .zero else { return nil }
        let pause = min(limit, commit / 10)
        return pause >= .microseconds(20) ? pause : nil
    }

    /// Writes until the graph closes, then stores what is left (giving up when the store keeps failing).
    func run() async {
        let engine = engine
        let window = engine.configuration.writeWindow
        let gathering = engine.configuration.commitGatheringWindow
        var failures = 0
        for await _ in engine.writerSignals {
            await batchingWindow(window)
            var pause: Duration?
            while true {
                if let pause { await Self.sleep(pause) }
                guard let taken = takeBatch() else { break }
                if let written = await write(taken) {
                    failures = 0
                    pause = Self.gatheringPause(afterCommitOf: written.duration, resumed: written.resumed, limit: gathering)
                } else {
                    failures += 1
                    pause = nil
                    do {
                        try await engine.clock.sleep(Self.backoff(afterFailures: failures))
                    } catch {
                        break
                    }
                }
                // More changed meanwhile and someone waits: go on (group commit under load), after the pause that lets
                // the tasks this commit resumed add their next changes.
                guard engine.locked({ $0.hasPendingWrites && $0.awaitsCommit }) else { break }
            }
            if engine.locked({ $0.hasPendingWrites }) { engine.wakeWriter(urgent: false) }
        }
        // Closing: store what is left.
        while let taken = takeBatch() {
            guard await write(taken) != nil else { break }
        }
    }

    /// The next batch; `nil` when nothing changed (then everything is committed, and who waited is resumed).
    private func takeBatch() -> GraphState.TakenBatch? {
        let now = engine.now()
        let interval = engine.configuration.progressSampleInterval.seconds
        let owner = engine.ownerID
        switch engine.locked({ state in state.takeWrites(now: now, sampleInterval: interval, owner: owner) }) {
        case .batch(let taken):
            return taken
        case .allCommitted(let committed):
            engine.perform(committed.effects)
            for waiter in committed.waiters { waiter.resume() }
            return nil
        }
    }

    /// What a committed batch took: its commit's duration, and how many waiters it resumed.
    struct Written {
        var duration: Duration
        var resumed: Int
    }

    /// Stores one batch; returns what it took when it committed, `nil` when it failed.
    private func write(_ taken: GraphState.TakenBatch) async -> Written? {
        let started = ContinuousClock.now
        do {
            LatencyTimeline.mark(.batchBegan)
            let result = try await engine.store.apply(taken.batch)
            LatencyTimeline.mark(.batchCommitted)
            let duration = ContinuousClock.now - started
            engine.metrics.commitDuration.recordNanoseconds(Self.nanoseconds(duration))
            engine.metrics.batchSize.record(
                taken.batch.inserts.count + taken.batch.updates.count + taken.batch.events.count)
            // The ends of roots this batch wrote, for a JobClient of this process that waits for one.
            let ends = engine.capabilities.beacons?.ends
            let (committed, children, told) = engine.locked { state in
                // Whether anyone watches is asked under the lock that marks the batch committed: a waiter that began
                // watching after this look finds the end committed when it asks this executor whether it will tell it
                // (``GraphState/willTellEnd(of:owner:)``), and reads the job.
                let ended =
                    ends?.isWatched == true
                    ? Self.endedRoots(
                        taken.batch, rejected: result.rejectedTaskIDs, conflicting: result.conflictingTaskIDs) : []
                // The row as committed goes with an end when this executor alone writes it: the waiter returns it
                // without reading it back (a call to its store: two hand-offs between threads and a statement).
                let told = ended.map { end in
                    RootEnd(id: end.id, record: end.record.flatMap { state.writesAlone($0) ? $0 : nil })
                }
                // Conflicts first, so that who waits for the commit sees them when woken.
                let children = result.conflictingTaskIDs.isEmpty ? [] : state.markConflicted(result.conflictingTaskIDs)
                var committed = state.committed(upTo: taken.sequence)
                if !result.rejectedTaskIDs.isEmpty { committed.effects += state.markRejected(result.rejectedTaskIDs) }
                return (committed, children, told)
            }
            // Fenced roots are marked before anyone waiting for this commit is woken: a step or a checkpoint whose
            // write was rejected must not return as if it had been committed.
            let stopped = result.rejectedTaskIDs.isEmpty ? [] : engine.stopLost(result.rejectedTaskIDs)
            if !children.isEmpty { engine.leaseLost(children) }
            engine.perform(committed.effects)
            for waiter in committed.waiters { waiter.resume() }
            if let ends, !told.isEmpty {
                ends.post(told)
                LatencyTimeline.mark(.endTold)
            }
            if taken.batch.changesJobTrees { engine.treeSignal.signal() }
            engine.noteStorageRecovered()
            engine.publisherSignal.signal()
            // Who took them, read once everyone is told (rare: a refusal of a root this executor still held). Only
            // then: the call leaves the writer's executor and comes back, two hand-offs that a batch without refusals
            // must not pay (paid on every batch, they took SQLite's jobs_per_s from 20,000 to 16,000 a second).
            if !stopped.isEmpty { await engine.sayWhoTook(stopped) }
            return Written(duration: duration, resumed: committed.waiters.count)
        } catch {
            engine.metrics.writerFailures.increment()
            if Task.isCancelled {
                // The executor stops while this batch is on its way (the store too slow or gone past the grace
                // period): the store keeps these tasks as it last had them, and the log says what it did not get.
                engine.logger.warning(
                    "stopped before task changes were stored",
                    metadata: [
                        "changes": "\(taken.batch.inserts.count + taken.batch.updates.count + taken.batch.events.count)",
                        "error": "\(ProgressionError.describe(error))",
                    ])
            } else {
                ExecutionEngine.noteStorageFailure(
                    error, outage: engine.storageOutage, logger: engine.logger, what: "writing task changes")
            }
            let now = engine.now()
            engine.locked { $0.requeue(taken, error: error, now: now) }
            engine.publisherSignal.signal()
            return nil
        }
    }

    /// The roots whose end (a finished status) a committed batch wrote, each with the row as written when the batch
    /// wrote it as this executor's: not a root queued here that any worker may claim (its write is guarded by its
    /// status alone, and others may change its row meanwhile). A row the store refused (`rejected`) or did not insert
    /// because another has its id (`conflicting`) is not ended.
    static func endedRoots(_ batch: TaskBatch, rejected: [String], conflicting: [String] = []) -> [RootEnd] {
        var ended: [RootEnd] = []
        for update in batch.updates
        where update.columns.contains(.status) && update.record.isRoot && update.record.status.isFinished {
            ended.append(RootEnd(id: update.record.id, record: update.unownedWithStatus == nil ? update.record : nil))
        }
        for insert in batch.inserts where insert.isRoot && insert.status.isFinished {
            ended.append(RootEnd(id: insert.id, record: insert))
        }
        guard !rejected.isEmpty || !conflicting.isEmpty, !ended.isEmpty else { return ended }
        let refused = Set(rejected).union(conflicting)
        return ended.filter { !refused.contains($0.id) }
    }

    /// Sleeps `duration` on a dispatch timer (as the batching window does: task code keeping every thread of Swift's
    /// cooperative pool busy cannot make it longer).
    static func sleep(_ duration: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds(duration)))) {
                continuation.resume()
            }
        }
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }

    /// The batching window: waits `window` for more changes to gather, unless someone waits for a commit. The timer
    /// is a dispatch timer, so the window ends on time even while task code keeps every thread of Swift's cooperative
    /// pool busy.
    private func batchingWindow(_ window: Duration) async {
        let engine = engine
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = engine.locked { $0.waitForWindow(continuation) }
            if now {
                continuation.resume()
                return
            }
            let nanoseconds = window.components.seconds * 1_000_000_000 + window.components.attoseconds / 1_000_000_000
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) {
                let waiter = engine.locked { $0.endWindow(urgent: false) }
                waiter?.resume()
            }
        }
    }
}
