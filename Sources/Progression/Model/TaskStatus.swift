/// Where a task is in its life.
///
/// ```
/// pending ──▶ running ⇄ paused ──▶ completed | failed | cancelled
///    ▲                                          │         │
///    └───────────────── retry ──────────────────┴─────────┘
/// ```
/// `pending` covers a task that is queued, and one waiting for its next automatic retry.
public enum TaskStatus: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case pending
    case running
    case paused
    case completed
    case failed
    case cancelled

    /// `completed`, `failed` or `cancelled`: the task's code has ended.
    public var isFinished: Bool {
        switch self {
        case .completed, .failed, .cancelled: true
        case .pending, .running, .paused: false
        }
    }

    public var description: String { rawValue }
}
