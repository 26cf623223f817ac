import Foundation

/// Pauses: a node is paused when its own status is `paused`; its code, and the code of every node below it, waits
/// at its next report, push or checkpoint (any number of waiters), and its timeout does not tick meanwhile.
extension GraphState {
    /// Starts or stops the paused-time clock of every node below `top` whose code runs, after `top` was paused or
    /// resumed; returns the waiters to wake (those no longer paused).
    mutating func pauseChanged(below top: TaskNode, now: Duration) -> [CheckedContinuation<Void, any Error>] {
        var wake: [CheckedContinuation<Void, any Error>] = []
        for node in top.subtree {
            let paused = node.isEffectivelyPaused
            if var execution = node.execution {
                if paused, execution.pausedSince == nil {
                    execution.pausedSince = now
                } else if !paused, let since = execution.pausedSince {
                    execution.pausedTotal += now - since
                    execution.pausedSince = nil
                }
                node.execution = execution
            }
            if paused {
                node.rate.restart()
            } else if !node.pauseWaiters.isEmpty {
                wake += node.pauseWaiters.values
                node.pauseWaiters.removeAll()
            }
        }
        return wake
    }

    /// Registers a waiter for `node` to be resumed; `nil` when it waits, else what to resume it with at once.
    mutating func waitWhilePaused(
        _ handle: NodeHandle, token: Int, _ continuation: CheckedContinuation<Void, any Error>, cancelled: Bool
    ) -> Result<Void, any Error>? {
        guard let node = nodes[handle], !node.removed, node.isEffectivelyPaused else { return .success(()) }
        if cancelled { return .failure(CancellationError()) }
        node.pauseWaiters[token] = continuation
        return nil
    }

    mutating func nextToken() -> Int {
        nextWaiterToken += 1
        return nextWaiterToken
    }
}

extension GraphState {
    /// The waiter `token` of a paused node, taken out to be resumed with `CancellationError` (its task was cancelled);
    /// `nil` when it was woken already.
    mutating func cancelPauseWait(_ handle: NodeHandle, token: Int) -> CheckedContinuation<Void, any Error>? {
        nodes[handle]?.pauseWaiters.removeValue(forKey: token)
    }

    /// The kinds paused across the fleet, read from the store; when they changed, the run queue gives slots again (a
    /// kind resumed lets its queued roots start).
    mutating func setPausedKinds(_ names: Set<String>, now: Date, monotonicNow: Duration) -> Dispatch {
        guard pausedKinds != names else { return Dispatch() }
        pausedKinds = names
        return dispatch(now: now, monotonicNow: monotonicNow)
    }
}
