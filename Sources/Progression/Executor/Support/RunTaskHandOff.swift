import Synchronization

/// A root's run task on its way into the graph (``GraphState/launched(_:_:)``), recorded by whichever comes second of
/// the two that meet it: the launcher, which has the task once `Task.detached` returns it, and the run task itself, in
/// its first entry of the graph's lock, which it makes anyway.
///
/// Recorded by the run, a launch costs no entry of the graph's lock of its own. That entry, made right after the end of
/// the run that freed the slot, was the most contended of a job's (`perf record` of the in-memory jobs loop put 2.7 %
/// of its CPU in `Mutex._lockSlow` under `launch`: docs/performance.md, eleventh pass). The hand-off's own lock is
/// entered by those two only, once each.
final class RunTaskHandOff: Sendable {
    private enum State {
        case waiting
        case made(Task<Void, Never>)
        case passed
    }

    private let state = Mutex(State.waiting)

    init() {}

    /// The launcher's side, once it has made the task. Returns `true` when the run went by first: then the launcher
    /// records the task itself.
    func made(_ task: Task<Void, Never>) -> Bool {
        state.withLock { state in
            if case .passed = state { return true }
            state = .made(task)
            return false
        }
    }

    /// The run's side, in its first entry of the graph's lock: the task when the launcher made it (the run records
    /// it), else `nil`, and the launcher records it once made.
    func take() -> Task<Void, Never>? {
        state.withLock { state in
            switch state {
            case .made(let task):
                state = .passed
                return task
            case .waiting, .passed:
                state = .passed
                return nil
            }
        }
    }
}
