/// Where a task is in its life.
///
/// ```
/// pending ──▶ running ⇄ paused ──▶ completed | failed | cancelled
///    ▲                                          │         │
///    └───────────────── retry ──────────────────┴─────────┘
/// ```
/// `pending` covers a task that is queued, and one waiting for its next automatic retry.
public enum TaskStatus: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// Queued, waiting for a slot or for its next attempt's time.
    case pending
    /// Its code runs.
    case running
    /// Paused: its code waits at its next report (or has not started).
    case paused
    /// Its code returned.
    case completed
    /// Its code threw, it timed out, or it could not run again.
    case failed
    /// Cancelled.
    case cancelled

    /// `completed`, `failed` or `cancelled`: the task's code has ended.
    public var isFinished: Bool {
        switch self {
        case .completed, .failed, .cancelled: true
        case .pending, .running, .paused: false
        }
    }

    /// The status's name: `pending`, `running`, ….
    public var description: String { rawValue }
}
