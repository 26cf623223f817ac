/// What may be done to a task, and how long it may take.
///
/// Compose options fluently from a preset:
/// ```swift
/// let options = TaskOptions.default
///     .pausable()
///     .retryable()
///     .timeout(.seconds(30))
///     .retryPolicy(.exponential(maxAttempts: 3))
/// ```
public struct TaskOptions: Sendable, Hashable, Codable {
    /// Whether `cancel` may stop the task.
    public var canCancel: Bool
    /// Whether `pause` may suspend the task.
    public var canPause: Bool
    /// Whether `retry` may run the task again after it failed or was cancelled.
    public var canRetry: Bool
    /// The longest the task may run, paused time not counted; it then fails with ``TaskTimeoutError``.
    public var timeout: Duration?
    /// Automatic retries after a failure; `nil` retries only on request.
    public var retryPolicy: RetryPolicy?
    /// Higher runs first when the executor limits how many roots run at once.
    public var priority: Int
    /// When a running job counts as stalled and what its worker does then; `nil` (the default) for never.
    public var stall: StallRule?
    /// Set on a job submitted by another process that did not know its kind's registered options: only these fields
    /// were given; the others are the kind's, filled in by the executor that runs the job. `nil` otherwise.
    package var givenFields: Set<Field>?

    /// The fields of a task's options, as a submit may give them.
    package enum Field: String, Sendable, Hashable, Codable, CaseIterable {
        case canCancel, canPause, canRetry, timeout, retryPolicy, priority, stall
    }

    /// These options where given, the kind's registered `defaults` elsewhere (see ``givenFields``).
    package func filled(from defaults: TaskOptions) -> TaskOptions {
        guard let givenFields else { return self }
        var merged = defaults
        for field in givenFields {
            switch field {
            case .canCancel: merged.canCancel = canCancel
            case .canPause: merged.canPause = canPause
            case .canRetry: merged.canRetry = canRetry
            case .timeout: merged.timeout = timeout
            case .retryPolicy: merged.retryPolicy = retryPolicy
            case .priority: merged.priority = priority
            case .stall: merged.stall = stall
            }
        }
        merged.givenFields = nil
        return merged
    }

    /// Options; by default cancellable only.
    public init(
        canCancel: Bool = true, canPause: Bool = false, canRetry: Bool = false, timeout: Duration? = nil,
        retryPolicy: RetryPolicy? = nil, priority: Int = 0, stall: StallRule? = nil
    ) {
        self.canCancel = canCancel
        self.canPause = canPause
        self.canRetry = canRetry
        self.timeout = timeout
        self.retryPolicy = retryPolicy
        self.priority = priority
        self.stall = stall
    }

    /// Cancellable, not pausable, not retryable.
    public static let `default` = TaskOptions()
    /// Cancellable and pausable, not retryable: for tasks a person watches.
    public static let interactive = TaskOptions(canPause: true)
    /// Cannot be cancelled, paused or retried.
    public static let immutable = TaskOptions(canCancel: false)

    /// A copy that may (or may not) be cancelled.
    public func cancellable(_ value: Bool = true) -> TaskOptions { with { $0.canCancel = value } }
    /// A copy that may (or may not) be paused.
    public func pausable(_ value: Bool = true) -> TaskOptions { with { $0.canPause = value } }
    /// A copy that may (or may not) be retried after it failed or was cancelled.
    public func retryable(_ value: Bool = true) -> TaskOptions { with { $0.canRetry = value } }
    /// A copy with a timeout (paused time not counted); `nil` for none.
    public func timeout(_ value: Duration?) -> TaskOptions { with { $0.timeout = value } }
    /// Sets the automatic retry policy; a policy with more than one attempt also makes the task retryable.
    public func retryPolicy(_ value: RetryPolicy?) -> TaskOptions {
        with {
            $0.retryPolicy = value
            if let value, value.maxAttempts > 1 { $0.canRetry = true }
        }
    }
    /// A copy with a priority (higher runs first).
    public func priority(_ value: Int) -> TaskOptions { with { $0.priority = value } }

    func with(_ change: (inout TaskOptions) -> Void) -> TaskOptions {
        var copy = self
        change(&copy)
        return copy
    }
}
