import Foundation

/// A child job to start from a job's code: its kind, input (JSON) and how it counts in the parent. The typed
/// ``TaskContext/startChild(_:input:options:)`` and ``TaskContext/startChildren(_:inputs:options:)`` make these.
public struct ChildJobRequest: Sendable, Hashable {
    /// The child's job kind.
    public var kind: String
    /// Its input, as JSON.
    public var input: Data
    /// Its name in the parent's tree: with the number of earlier children of that name started from the same task,
    /// its identity (so that a parent that runs again finds it instead of starting it again).
    public var name: String
    /// Its share of the parent's progress, as a subtask's (``TaskContext/push(_:weight:options:_:)->()``).
    public var weight: Double
    /// Its options; `nil`: its kind's.
    public var options: TaskOptions?
    /// Its priority; `nil`: its parent's.
    public var priority: Int?
    /// Start it even when no worker of the database ever registered its kind (it waits until one does).
    public var allowsUnregisteredKind: Bool

    /// A request; see each property.
    public init(
        kind: String, input: Data, name: String? = nil, weight: Double = 1, options: TaskOptions? = nil,
        priority: Int? = nil, allowsUnregisteredKind: Bool = false
    ) {
        self.kind = kind
        self.input = input
        self.name = name ?? kind
        self.weight = weight
        self.options = options
        self.priority = priority
        self.allowsUnregisteredKind = allowsUnregisteredKind
    }
}

/// A child job that a job's code started: what awaiting it needs.
public struct ChildJob<Kind: JobKind>: Sendable, Hashable, Identifiable {
    /// The child job's id (a job of its own in the store: `progressctl show ID` shows it).
    public let id: String
    /// Its name in the parent's tree.
    public let name: String

    /// A handle of the child job `id` named `name`.
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// How a child job is started (``TaskContext/startChild(_:input:options:)``).
public struct ChildJobOptions: Sendable, Hashable {
    /// Its name in the parent's tree (with its occurrence, its identity there); the kind's name when `nil`.
    public var name: String?
    /// Its share of the parent's progress: units of the parent's declared total, else relative to the steps and
    /// children started in the same step (<doc:ProgressRule>).
    public var weight: Double
    /// Its options; its kind's when `nil`.
    public var options: TaskOptions?
    /// Its priority; its parent's when `nil`.
    public var priority: Int?
    /// Start it even when no worker of the database ever registered its kind (it waits until one does).
    public var allowsUnregisteredKind: Bool

    /// Options; by default the kind's name, weight 1, the kind's options and the parent's priority.
    public init(
        name: String? = nil, weight: Double = 1, options: TaskOptions? = nil, priority: Int? = nil,
        allowsUnregisteredKind: Bool = false
    ) {
        self.name = name
        self.weight = weight
        self.options = options
        self.priority = priority
        self.allowsUnregisteredKind = allowsUnregisteredKind
    }
}

/// How a child job ended, as its parent reads it.
public struct ChildJobOutcome: Sendable, Hashable {
    /// The child job's id.
    public var id: String
    /// Its name in the parent's tree.
    public var name: String
    /// `completed`, `failed` or `cancelled`.
    public var status: TaskStatus
    /// Its result (JSON), when it completed with one.
    public var result: Data?
    /// Its error, for people, when it failed.
    public var errorDescription: String?
    /// When it finished.
    public var finishedAt: Date?

    /// An outcome as the parent's tree records it.
    public init(
        id: String, name: String, status: TaskStatus, result: Data? = nil, errorDescription: String? = nil,
        finishedAt: Date? = nil
    ) {
        self.id = id
        self.name = name
        self.status = status
        self.result = result
        self.errorDescription = errorDescription
        self.finishedAt = finishedAt
    }

    /// The error its parent's code sees when it awaits a child that did not complete:
    /// ``ProgressionError/subtaskFailed(name:underlying:)`` with a ``JobFailedError``.
    public var failure: ProgressionError? {
        guard status != .completed else { return nil }
        return .subtaskFailed(
            name: name, underlying: JobFailedError(id: id, status: status, reason: errorDescription))
    }
}

/// A child job's end, yielded by ``TaskContext/completions(of:)`` in the order the children finished.
public struct ChildJobCompletion<Kind: JobKind>: Sendable {
    /// The child job.
    public var child: ChildJob<Kind>
    /// How it ended.
    public var outcome: ChildJobOutcome

    /// Its output.
    ///
    /// - Throws: ``ProgressionError/subtaskFailed(name:underlying:)`` when it failed or was cancelled;
    ///   `DecodingError` when its stored result is not a `Kind.Output`.
    public func output() throws -> Kind.Output where Kind.Output: Decodable {
        if let failure = outcome.failure { throw failure }
        return try JobCoding.decoder.decode(Kind.Output.self, from: outcome.result ?? Data("null".utf8))
    }
}

/// The ends of child jobs as they come, in the order the children finished (as their workers' clocks say): the ones
/// that finished first, then, waiting durably in between, the others. Each step of the iteration that must wait ends
/// the parent's code (`CancellationError`, which it lets through) and gives its slot back; when a child finishes, any
/// worker runs the parent's code again, this sequence yields again the ends it had yielded (from the store) and goes
/// on with the new ones. Code between two ends should therefore do its work in steps (``TaskContext/push(_:_:)->()``),
/// which run once.
public struct ChildJobCompletions<Kind: JobKind>: AsyncSequence, Sendable {
    public typealias Element = ChildJobCompletion<Kind>

    let context: any TaskContext
    let children: [ChildJob<Kind>]

    public func makeAsyncIterator() -> Iterator {
        Iterator(context: context, children: children)
    }

    /// The iterator of ``ChildJobCompletions``.
    public struct Iterator: AsyncIteratorProtocol {
        let context: any TaskContext
        let byID: [String: ChildJob<Kind>]
        var waiting: [String]
        var ready: [ChildJobOutcome] = []

        init(context: any TaskContext, children: [ChildJob<Kind>]) {
            self.context = context
            var byID: [String: ChildJob<Kind>] = [:]
            var waiting: [String] = []
            for child in children where byID[child.id] == nil {
                byID[child.id] = child
                waiting.append(child.id)
            }
            self.byID = byID
            self.waiting = waiting
        }

        public mutating func next() async throws -> ChildJobCompletion<Kind>? {
            if ready.isEmpty {
                guard !waiting.isEmpty else { return nil }
                let finished = try await context.awaitChildJobs(waiting, all: false)
                ready = finished.sorted { ($0.finishedAt ?? .distantPast, $0.id) < ($1.finishedAt ?? .distantPast, $1.id) }
                let done = Set(finished.map(\.id))
                waiting.removeAll { done.contains($0) }
            }
            guard !ready.isEmpty else { return nil }
            let outcome = ready.removeFirst()
            guard let child = byID[outcome.id] else { return nil }
            return ChildJobCompletion(child: child, outcome: outcome)
        }
    }
}

extension TaskContext {
    /// Starts a child job: a job of its own that any worker of the fleet claims, as it claims other jobs (its kind, the
    /// kind's limits, priorities and pauses apply), whose progress counts in this task's by `options.weight`.
    ///
    /// Starting is a step: it returns once the child and its place in this task's tree are committed, and when this
    /// job's code runs again (after a crash, a wait, a retry) the same call finds the same child instead of starting
    /// another. A child this job's code no longer awaits still runs; this job's end cancels it.
    ///
    /// ```swift
    /// let child = try await context.startChild(Resize.self, input: .init(path: "a.png", width: 200))
    /// let output = try await context.result(of: child)     // waits durably: this job holds no slot meanwhile
    /// ```
    ///
    /// - Throws: ``ProgressionError/unknownKind(_:)`` when no worker ever registered the kind (unless allowed),
    ///   ``ProgressionError/notResumable(taskID:reason:)`` in a closure task (only a job can be continued when its
    ///   children have finished), ``ProgressionError/invalidProgressValue(_:)`` for a weight that is not positive,
    ///   ``JobInputTooLargeError``, `EncodingError`; `CancellationError` when this task is cancelled.
    public func startChild<Kind: JobKind>(
        _ kind: Kind.Type, input: Kind.Input, options: ChildJobOptions = ChildJobOptions()
    ) async throws -> ChildJob<Kind> {
        try await startChildren(kind, inputs: [input], options: { _ in options })[0]
    }

    /// Starts child jobs in one transaction; see ``startChild(_:input:options:)``. Children of the same name (the
    /// kind's, by default) are told apart by their order.
    ///
    /// - Throws: as ``startChild(_:input:options:)``.
    public func startChildren<Kind: JobKind>(
        _ kind: Kind.Type, inputs: [Kind.Input], options: (Kind.Input) -> ChildJobOptions = { _ in ChildJobOptions() }
    ) async throws -> [ChildJob<Kind>] {
        let encoder = JSONEncoder()
        var requests: [ChildJobRequest] = []
        requests.reserveCapacity(inputs.count)
        for input in inputs {
            let given = options(input)
            requests.append(
                ChildJobRequest(
                    kind: Kind.name, input: try encoder.encode(input), name: given.name ?? Kind.name,
                    weight: given.weight, options: given.options, priority: given.priority,
                    allowsUnregisteredKind: given.allowsUnregisteredKind))
        }
        return try await startChildJobs(requests).map { ChildJob(id: $0.id, name: $0.name) }
    }

    /// Waits durably until a child job has finished, and returns its output.
    ///
    /// A child that finished already returns at once. Otherwise this job's code stops (`CancellationError`: let it
    /// through) and gives its slot back; the job is *waiting* (no owner, no memory) until the child finishes, when any
    /// worker runs its code again — completed steps skipped, its checkpoint read back — and this call returns.
    ///
    /// - Throws: ``ProgressionError/subtaskFailed(name:underlying:)`` (with a ``JobFailedError``) when the child failed
    ///   or was cancelled; ``ProgressionError/notAChildJob(taskID:jobID:)`` when `child` is not a child of this job;
    ///   `DecodingError` when its result is not a `Kind.Output`.
    public func result<Kind: JobKind>(of child: ChildJob<Kind>) async throws -> Kind.Output
    where Kind.Output: Decodable {
        try await results(of: [child])[0]
    }

    /// Waits durably until every one of these child jobs has finished (see ``result(of:)``), and returns their outputs
    /// in their order.
    ///
    /// - Throws: as ``result(of:)``, for the first of them (in their order) that did not complete.
    public func results<Kind: JobKind>(of children: [ChildJob<Kind>]) async throws -> [Kind.Output]
    where Kind.Output: Decodable {
        let outcomes = try await wait(for: children)
        let decoder = JSONDecoder()
        return try outcomes.map { try decoder.decode(Kind.Output.self, from: $0.result ?? Data("null".utf8)) }
    }

    /// Waits durably until every one of these child jobs has finished (see ``result(of:)``); returns how each ended.
    ///
    /// - Throws: as ``result(of:)``, for the first of them (in their order) that did not complete.
    @discardableResult
    public func wait<Kind: JobKind>(for children: [ChildJob<Kind>]) async throws -> [ChildJobOutcome] {
        guard !children.isEmpty else { return [] }
        let outcomes = try await awaitChildJobs(children.map(\.id), all: true)
        let byID = Dictionary(outcomes.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var ordered: [ChildJobOutcome] = []
        for child in children {
            guard let outcome = byID[child.id] else { throw ProgressionError.notAChildJob(taskID: taskID, jobID: child.id) }
            if let failure = outcome.failure { throw failure }
            ordered.append(outcome)
        }
        return ordered
    }

    /// The ends of these child jobs as they come; see ``ChildJobCompletions``.
    ///
    /// ```swift
    /// for try await done in context.completions(of: children) {
    ///     let output = try done.output()
    ///     try await context.push("merge \(done.child.name)") { _ in try merge(output) }
    /// }
    /// ```
    public func completions<Kind: JobKind>(of children: [ChildJob<Kind>]) -> ChildJobCompletions<Kind> {
        ChildJobCompletions(context: self, children: children)
    }

    /// Waits durably for a signal of this name sent to this job (``JobClient/signal(_:name:payload:)``,
    /// `progressctl signal`), and returns its payload.
    ///
    /// A signal sent before the job waits for it is kept, and taken at once. Otherwise the job's code stops
    /// (`CancellationError`: let it through) and gives its slot back; the job is *waiting* until the signal comes (or
    /// the timeout passes), across restarts, when any worker runs its code again and this call returns. Each call is a
    /// step named after the signal (its occurrence counts): a signal is taken once, by one call, and a job that waits
    /// in a loop takes one per iteration.
    ///
    /// - Throws: ``SignalTimeoutError`` when `timeout` passed first; `DecodingError` when the payload is not a
    ///   `Payload`; ``ProgressionError/notResumable(taskID:reason:)`` in a closure task.
    public func signal<Payload: Decodable & Sendable>(
        _ name: String, as payload: Payload.Type, timeout: Duration? = nil
    ) async throws -> Payload {
        let data = try await waitForSignal(name, timeout: timeout)
        return try JobCoding.decoder.decode(Payload.self, from: data ?? Data("null".utf8))
    }

    /// Waits durably for a signal of this name, whatever its payload; see ``signal(_:as:timeout:)``.
    public func signal(_ name: String, timeout: Duration? = nil) async throws {
        _ = try await waitForSignal(name, timeout: timeout)
    }

    /// Child jobs are the executor's: a context of another kind cannot start them.
    public func startChildJobs(_ requests: [ChildJobRequest]) async throws -> [ChildJobReference] {
        throw ProgressionError.notResumable(taskID: taskID, reason: "this context cannot start child jobs")
    }

    /// Child jobs are the executor's: a context of another kind cannot await them.
    public func awaitChildJobs(_ ids: [String], all: Bool) async throws -> [ChildJobOutcome] {
        throw ProgressionError.notResumable(taskID: taskID, reason: "this context cannot await child jobs")
    }

    /// Signals are the executor's: a context of another kind cannot wait for them.
    public func waitForSignal(_ name: String, timeout: Duration?) async throws -> Data? {
        throw ProgressionError.notResumable(taskID: taskID, reason: "this context cannot wait for signals")
    }
}

/// A child job as ``TaskContext/startChildJobs(_:)`` returns it.
public struct ChildJobReference: Sendable, Hashable {
    /// Its id.
    public var id: String
    /// Its name in the parent's tree.
    public var name: String

    /// A reference.
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// A wait for a signal ran out of time before the signal came.
public struct SignalTimeoutError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    /// The signal's name.
    public var name: String
    /// The timeout that ran out.
    public var timeout: Duration

    /// An error for the signal `name`.
    public init(name: String, timeout: Duration) {
        self.name = name
        self.timeout = timeout
    }

    public var errorDescription: String? { description }
    public var description: String { "No signal '\(name)' came within \(TaskTimeoutError.format(timeout))" }
}
