/// Which changes are committed, and who waits for which: a part of the graph's state with no other state of its own.
///
/// Every change of the graph takes the next sequence number (``GraphState/changeSequence``); the writer reports each
/// commit with the sequence it covered. A wait for a sequence that is committed already returns at once; one made
/// after the ledger closed fails with the close's error. Its functions return what the caller resumes, once it left
/// the graph's lock: nothing here resumes anyone itself.
struct CommitLedger<Waiter> {
    /// What a wait for a sequence is to do.
    enum WaitOutcome {
        /// Committed already: go on.
        case committed
        /// The ledger closed before the commit: fail with this error.
        case closed(any Error)
        /// Registered: it is resumed by a later ``commit(upTo:)`` or ``close(_:)``.
        case waiting
    }

    /// Every change up to this sequence is committed.
    private(set) var committed: Int64 = 0
    private(set) var waiters: [(sequence: Int64, waiter: Waiter)] = []
    /// Set once the ledger closes: later waits fail with it.
    private(set) var closedError: (any Error)?

    var isClosed: Bool { closedError != nil }
    var hasWaiters: Bool { !waiters.isEmpty }

    /// Registers `waiter` for `sequence` unless it is committed already or the ledger closed.
    mutating func wait(for sequence: Int64, _ waiter: Waiter) -> WaitOutcome {
        if committed >= sequence { return .committed }
        if let closedError { return .closed(closedError) }
        waiters.append((sequence, waiter))
        return .waiting
    }

    /// Changes up to `sequence` are committed (a sequence below the committed one changes nothing). Returns who waited
    /// for them, in the order they started waiting.
    mutating func commit(upTo sequence: Int64) -> [Waiter] {
        committed = max(committed, sequence)
        var ready: [Waiter] = []
        waiters.removeAll { entry in
            guard entry.sequence <= committed else { return false }
            ready.append(entry.waiter)
            return true
        }
        return ready
    }

    /// Closes the ledger: later waits fail with `error`. Returns every waiter, to fail with it.
    mutating func close(_ error: any Error) -> [Waiter] {
        closedError = error
        defer { waiters.removeAll() }
        return waiters.map(\.waiter)
    }
}
