import Foundation
import Synchronization

// A graceful stop's first step on the graph.

extension GraphState {
    /// What a graceful stop's first step leaves to do once the lock is released.
    struct ShutdownBegun {
        /// The run tasks of roots whose code was asked to stop: the stop waits for them (within its grace period).
        var running: [Task<Void, Never>] = []
        /// Roots given a slot whose run task is not made yet: the stop waits for them too, once they are launched.
        var unlaunched: [NodeHandle] = []
        var cancellation = Cancellation()
        /// Callers of roots handed back (idle now).
        var effects = GraphEffects()
    }

    /// No new work: the queue and the timers are emptied; roots whose code runs (or waits, paused) are asked to stop
    /// (their code records a release); queued, paused and waiting roots are handed back now.
    mutating func beginShutdown(now: Date) -> ShutdownBegun {
        isShutDown = true
        _ = runQueue.drain()
        _ = timers.removeAll()
        var begun = ShutdownBegun()
        for root in roots where !root.record.status.isFinished {
            if root.phase == .running || root.phase == .suspended || root.execution != nil {
                begun.cancellation.actions += ExecutionEngine.stop(root, .shutdown).actions
                if let task = root.runTask {
                    begun.running.append(task)
                } else if unlaunched.keys.contains(root.handle) {
                    begun.unlaunched.append(root.handle)
                }
            } else {
                // Queued, paused or waiting for its next attempt: handed back (a paused one stays paused); a job
                // queued unowned is the store's already.
                if root.committed.ownerID != nil {
                    _ = try? transition(root, .release, by: .system, now: now, silent: true)
                }
                begun.effects += setIdle(root)
            }
        }
        return begun
    }
}
