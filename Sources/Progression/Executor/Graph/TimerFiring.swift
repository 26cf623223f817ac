import Foundation

/// The timer loop's deadlines coming due, decided on the graph alone: a timeout stops code that ran its time (paused
/// time not counted: a paused node's deadline is set again for the rest), and a root whose next attempt is due is
/// queued for a slot (or settles, idle, when it was paused, finished or the executor is stopping meanwhile), and a job
/// still for its stall limit is cancelled or failed for a retry, as its rule says.
///
/// `TimerFiringTests` runs each deadline on the state alone with chosen times.
extension GraphState {
    /// What firing the timers leaves to do once the lock is released.
    struct TimersFired {
        /// Roots given a slot, callers of roots that became idle, and whether the loop must wake for an earlier deadline.
        var dispatch: Dispatch
        /// Code whose timeout ran out, to cancel.
        var cancellation: Cancellation
    }

    /// Fires the deadlines due at `monotonicNow` (the executor's clock); `now` is the wall-clock time written in the
    /// records of roots started.
    mutating func fireTimers(now: Date, monotonicNow: Duration) -> TimersFired {
        var effects = GraphEffects()
        var cancellation = Cancellation()
        for action in timers.due(at: monotonicNow) {
            switch action {
            case .timeout(let handle):
                guard let node = nodes[handle], let execution = node.execution,
                    let timeout = node.record.options.timeout
                else { continue }
                let remaining = timeout - execution.activeTime(now: monotonicNow)
                if remaining > .zero {
                    // Paused time does not count: look again when the rest could have run out.
                    if timers.add(.timeout(handle), at: monotonicNow + remaining) { effects.wakesTimers = true }
                } else {
                    cancellation.actions += ExecutionEngine.stop(node, .timedOut(timeout)).actions
                }
            case .retry(let handle):
                guard let node = nodes[handle], node.phase == .delayed else { continue }
                guard node.record.status == .pending, !isShutDown else {
                    effects += setIdle(node)
                    continue
                }
                let held = node.record.kind.map { pausedKinds.contains($0) } ?? false
                // Every slot runs a root (queued roots of a paused kind do not count: they cannot take one).
                if !runQueue.hasFreeSlot || held, mayHandOff(node), handOff(node, now: now) {
                    // Due while no slot is free here (or its kind is paused): the fleet runs it.
                    continue
                }
                enqueue(node)
            case .stall(let handle, let run):
                // Running, paused, or resumed and waiting for a slot (pending, its code alive): a paused one is
                // looked at again a limit later.
                guard let node = nodes[handle], let execution = node.execution, execution.startedAt == run,
                    node.record.status == .running || node.record.status == .paused || node.waitsForSlot,
                    node.stopReason == nil, let rule = node.record.options.stall, rule.action != .flag
                else { continue }
                // Movement anywhere in the tree advances the root's last change (`markDirty`); a pause sets it anew
                // when the job resumes.
                let still = Duration.milliseconds(Int64((now.timeIntervalSince(node.record.updatedAt) * 1000).rounded(.down)))
                if node.isEffectivelyPaused || still <= rule.limit {
                    let rest = node.isEffectivelyPaused ? rule.limit : rule.limit - still + .milliseconds(1)
                    if timers.add(.stall(handle, run: run), at: monotonicNow + rest) { effects.wakesTimers = true }
                } else {
                    cancellation.actions += ExecutionEngine.stop(node, .stalled(rule.limit, retry: rule.action == .retry)).actions
                }
            }
        }
        var dispatch = dispatch(now: now, monotonicNow: monotonicNow)
        dispatch.effects += effects
        return TimersFired(dispatch: dispatch, cancellation: cancellation)
    }
}
