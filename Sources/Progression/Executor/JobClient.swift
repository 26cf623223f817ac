import Foundation
import Synchronization

/// Enqueues jobs and reads them back, without running anything: the producer's side of a fleet (a web or API process
/// that submits work for worker processes).
///
/// It needs no handler: the job's ``JobKind`` type names its kind, input and output, so the compiler checks that the
/// producer and the workers agree. A submit returns once the job is committed, unowned; the first worker of the
/// database that registered the kind and has a free slot claims it (a worker claims only what it can start now, so
/// every worker shares the backlog).
///
/// ```swift
/// let jobs = JobClient(store: try SQLiteTaskStore(path: "/var/lib/app/jobs.sqlite"))
/// let id = try await jobs.submit(Resize.self, input: .init(path: "a.png", width: 200), options: .init(name: "a.png"))
/// let later = try await jobs.submit(Report.self, input: .init(day: today), options: .init(delay: .seconds(3600)))
/// let output = try await jobs.result(of: id, as: Resize.self)     // waits until it completes
/// ```
///
/// Use one client per store and share it: it is a value that holds the store.
public struct JobClient: Sendable {
    /// How a client behaves.
    public struct Configuration: Sendable {
        /// The largest job input accepted, in bytes of JSON (16 MiB).
        public var maxInputBytes = 16 << 20
        /// How often a wait looks at the store's change counter (a cheap read); the job's row is read only when it
        /// moved, and at least every second. A commit of a store of the same database in this process (the worker's,
        /// when it runs beside the client) wakes the wait at once; the poll finds those of other processes. For a job
        /// that an executor of this process runs, the job is read when that executor tells its end, at the poll, and
        /// once the executor no longer says it will tell it (the process's commits wake the wait to ask).
        public var pollInterval: Duration = .milliseconds(25)
        /// The clock of waits and of "now" (a delay's start); tests give one they control.
        public var clock: any Clock<Duration> = ContinuousClock()

        /// The defaults.
        public init() {}
    }

    /// Where the jobs are stored.
    public let store: any TaskStore
    let backend: any TaskStoreBackend
    let configuration: Configuration
    let clock: TaskClock
    let spareIdentifiers = SpareIdentifiers()

    /// A client of a SQLite database (a worker on the same host runs the jobs).
    public init(store: SQLiteTaskStore, configuration: Configuration = .init()) {
        self.init(backend: store, configuration: configuration)
    }

    /// A client of an in-memory store (tests; an executor on the same store runs the jobs).
    public init(store: InMemoryTaskStore, configuration: Configuration = .init()) {
        self.init(backend: store, configuration: configuration)
    }

    /// A client of a store known only as a ``TaskStore`` (one opened from a URL, say): this package's stores take jobs;
    /// any other is refused.
    ///
    /// - Throws: ``ProgressionError/unsupportedStore(_:)`` for a store of another type.
    public init(store: any TaskStore, configuration: Configuration = .init()) throws(ProgressionError) {
        guard let backend = store as? any TaskStoreBackend else {
            throw .unsupportedStore(String(describing: type(of: store)))
        }
        self.init(backend: backend, configuration: configuration)
    }

    /// A client of any of the package's stores.
    package init(backend: any TaskStoreBackend, configuration: Configuration = .init()) {
        store = backend
        self.backend = backend
        self.configuration = configuration
        clock = TaskClock(configuration.clock)
    }

    // MARK: Submitting

    /// Submits a job. Returns its id once it is committed.
    ///
    /// - Throws: ``ProgressionError/invalidArgument(_:)`` (a run-at and a delay both given, a delay or date that cannot
    ///   be stored), ``JobInputTooLargeError``, `EncodingError`, ``ProgressionError/duplicateID(_:)``, a store error.
    @discardableResult
    public func submit<Kind: JobKind>(
        _ kind: Kind.Type, input: Kind.Input, options: JobOptions = JobOptions()
    ) async throws -> String {
        try await submit(kind, inputs: [input], options: { _ in options })[0]
    }

    /// Submits many jobs in one transaction: all are committed, or none. Returns their ids in the order of `inputs`
    /// (a job whose idempotency key exists already is not added; the existing one's id is returned in its place).
    ///
    /// - Throws: as ``submit(_:input:options:)``.
    @discardableResult
    public func submit<Kind: JobKind>(
        _ kind: Kind.Type, inputs: [Kind.Input], options: (Kind.Input) -> JobOptions = { _ in JobOptions() }
    ) async throws -> [String] {
        LatencyTimeline.mark(.submitBegan)
        let now = clock.date()
        var records: [TaskRecord] = []
        var dependencies: [JobDependency] = []
        records.reserveCapacity(inputs.count)
        let identifiers = try await spareIdentifiers.take(inputs.count, from: backend)
        for (index, input) in inputs.enumerated() {
            let jobOptions = options(input)
            let data = try JobInputLimit.encode(input, kind: Kind.name, limit: configuration.maxInputBytes)
            let (record, waitsFor) = try jobOptions.job(
                id: jobOptions.id ?? TaskIdentifier.root(identifiers.lowerBound + Int64(index)), kind: Kind.name,
                input: data, kindOptions: Kind.options, now: now)
            dependencies += waitsFor
            records.append(record)
        }
        let ids = try await JobInserter(store: backend).insert(records, dependencies: dependencies)
        LatencyTimeline.mark(.submitCommitted)
        (backend as? any BroadcastingChanges)?.beacons.submissions.post()
        return ids
    }

    // MARK: Signals

    /// Sends a signal to a job: a name and a payload, kept until the job's code takes it with
    /// ``TaskContext/signal(_:as:timeout:)`` (at once when it waits for it now; a signal sent before the job waits for
    /// it is kept, and taken once). Returns the signal as stored.
    ///
    /// - Throws: ``ProgressionError/notFound(taskID:)`` for an unknown job,
    ///   ``ProgressionError/invalidState(taskID:status:action:)`` for a finished job or a subtask,
    ///   ``ProgressionError/invalidArgument(_:)`` for a bad name or a payload over 1 MiB of JSON, `EncodingError`;
    ///   nothing is written then.
    @discardableResult
    public func signal<Payload: Encodable & Sendable>(_ jobID: String, name: String, payload: Payload) async throws
        -> JobSignalRecord
    {
        try await signal(jobID, name: name, data: try JobSignalRecord.encode(payload))
    }

    /// Sends a signal without a payload; see ``signal(_:name:payload:)``.
    @discardableResult
    public func signal(_ jobID: String, name: String) async throws -> JobSignalRecord {
        try await signal(jobID, name: name, data: nil)
    }

    private func signal(_ jobID: String, name: String, data: Data?) async throws -> JobSignalRecord {
        let sent = try await backend.sendSignal(to: jobID, name: name, payload: data, at: clock.date())
        (backend as? any BroadcastingChanges)?.beacons.submissions.post()
        return sent
    }

    // MARK: Reading

    /// The job as stored now (its status, progress, result, error), or `nil`.
    public func job(_ id: String) async throws -> TaskRecord? {
        try await backend.task(id: id)
    }

    /// The least time between two reads of a waited job that commits of this process caused.
    static let leastSpacingOfReads = Duration.microseconds(250)

    /// Waits until the job has finished (completed, failed or cancelled) and returns it as stored.
    ///
    /// - Parameters:
    ///   - id: the job's id.
    ///   - timeout: `nil` waits for as long as it takes.
    /// - Throws: ``ProgressionError/notFound(taskID:)`` (or once it was removed), ``JobWaitTimeoutError``,
    ///   `CancellationError`, a store error.
    public func wait(for id: String, timeout: Duration? = nil) async throws -> TaskRecord {
        let deadline = timeout.map { clock.now() + $0 }
        // A commit of a store of the database in this process wakes the wait at once; others are polled. The end of
        // the job committed by an executor of this process is told by its id: it is read then without any spacing, or
        // not read at all when the row as committed came with it (``RootEnd``).
        let beacons = (backend as? any BroadcastingChanges)?.beacons
        let commits = beacons?.commits
        let end = beacons.map { beacons in (ends: beacons.ends, token: beacons.ends.watch(id)) }
        defer { if let end { end.ends.unwatch(id, token: end.token) } }
        var ended: RootEnd?
        var lastCounter: Int64?
        var lastRead = Duration.zero
        var first = true
        // A commit of this process since the last read (the store's own connection's commits do not move its
        // counter: a JobClient on an executor's own store sees them this way).
        var posted = false
        while true {
            try Task.checkCancellation()
            let seen = commits?.generation
            var now = clock.now()
            // An executor of this process that runs the job will tell its end (``RootEnds/willBeTold(_:)``): until
            // then the other commits of the process are no reason to read it, nor is the wait's beginning (the poll
            // stays, should another worker take the job before that executor learns it). A read of the job while its
            // end was committed delayed the wait's return by the rest of that read (190 µs on PostgreSQL).
            let toldHere = end?.ends.willBeTold(id) ?? false
            if toldHere {
                posted = false
                if first {
                    first = false
                    lastRead = now
                }
            }
            // The change counter is read only to decide whether to read the job: with another reason to read it, it
            // is not asked (a store call, a hand-off to its connection and back), and the next check reads the job
            // again whatever the counter says (`lastCounter` nil), so that no change is missed.
            // (A job whose end will be told is read once a second no more: the commits that wake its wait are only a
            // reason to ask again whether it will be.)
            var reads = first || posted || ended != nil || (!toldHere && now - lastRead >= .seconds(1))
            var counter: Int64?
            // (For a job whose end will be told, only a poll's: one poll interval after the last read.)
            if !reads, !toldHere || now - lastRead >= configuration.pollInterval {
                counter = try await backend.changeCounter()
                now = clock.now()
                reads = counter != lastCounter
            }
            if reads {
                if let record = ended?.record { return record }
                first = false
                posted = false
                ended = nil
                lastCounter = counter
                lastRead = now
                // An end told before this read is what the read sees, or older (a retry since): only one told after
                // it begins is returned without reading.
                _ = end.flatMap { $0.ends.takeEnd(id, token: $0.token) }
                guard let record = try await backend.task(id: id) else { throw ProgressionError.notFound(taskID: id) }
                if record.status.isFinished { return record }
            }
            if let deadline, now >= deadline { throw JobWaitTimeoutError(id: id, timeout: timeout ?? .zero) }
            var wait = configuration.pollInterval
            if let deadline { wait = min(wait, deadline - now) }
            if let commits, let seen {
                // An end told or a commit made during the read needs no wait before the next read.
                ended = end.flatMap { $0.ends.takeEnd(id, token: $0.token) }
                if ended == nil, toldHere || commits.generation == seen {
                    // While the end will be told here, a commit wakes the wait too, only to ask again: an executor
                    // stops saying it will tell the end with a commit (a pause, a stop that hands the job back), and
                    // the job is read once it no longer says so.
                    await Self.wake(after: seen, of: commits, orEndOf: id, end, timeout: wait, clock: clock)
                    ended = end.flatMap { $0.ends.takeEnd(id, token: $0.token) }
                }
                posted = !toldHere && commits.generation != seen
                // Commits of a busy process come thousands a second: a waiter reads its job for them at most once
                // every 250 µs, unless its job's end is told meanwhile.
                let sinceRead = clock.now() - lastRead
                if posted, ended == nil, sinceRead < Self.leastSpacingOfReads {
                    await Self.wake(
                        after: nil, of: nil, orEndOf: id, end, timeout: Self.leastSpacingOfReads - sinceRead, clock: clock)
                    try Task.checkCancellation()
                    ended = end.flatMap { $0.ends.takeEnd(id, token: $0.token) }
                }
            } else {
                try await clock.sleep(wait)
            }
        }
    }

    /// Returns after `timeout`, or earlier at a commit past `seen`, or when the end of root `id` is told to the watch.
    private static func wake(
        after seen: UInt64?, of commits: Broadcast?, orEndOf id: String, _ end: (ends: RootEnds, token: Int)?,
        timeout: Duration, clock: TaskClock
    ) async {
        // One continuation, resumed by whichever comes first (a task of its own for each, in a group, cost a hand-off
        // between threads more at every wake).
        let wake = OneShotWake()
        let listening = commits.map { commits in commits.listen { wake.fire() } }
        if let commits, let seen, commits.generation != seen { wake.fire() }
        if let end, !end.ends.onEnd(id, token: end.token, { wake.fire() }) { wake.fire() }
        let timer = Task { try? await clock.sleep(timeout); wake.fire() }
        await wake.wait()
        timer.cancel()
        if let commits, let listening { commits.stopListening(listening) }
        if let end { end.ends.cancelOnEnd(id, token: end.token) }
    }

    /// Waits until the job completes and returns its result.
    ///
    /// - Throws: ``JobFailedError`` when it failed or was cancelled; as ``wait(for:timeout:)``; `DecodingError` when
    ///   the stored result is not a `Kind.Output`.
    public func result<Kind: JobKind>(
        of id: String, as kind: Kind.Type, timeout: Duration? = nil
    ) async throws -> Kind.Output where Kind.Output: Decodable {
        let record = try await wait(for: id, timeout: timeout)
        LatencyTimeline.mark(.resultReturned)
        guard record.status == .completed else { throw JobFailedError(record) }
        return try JobCoding.decoder.decode(Kind.Output.self, from: record.result ?? Data("null".utf8))
    }
}

/// How one job is submitted: its id, name, priority, idempotency key, when it may start, its options.
public struct JobOptions: Sendable, Hashable {
    /// The job's id; a new short id from the store's sequence when `nil`.
    public var id: String?
    /// What the job is called in `progressctl` and the console; the kind's name when `nil`.
    public var name: String?
    /// Runs before jobs of lower priority; the options' when `nil`.
    public var priority: Int?
    /// A second submit with the same kind and key returns the first job's id and adds nothing.
    public var idempotencyKey: String?
    /// When the job may start; at once when `nil` or past. Give this or ``delay``.
    public var runAt: Date?
    /// How long from now until the job may start. Give this or ``runAt``.
    public var delay: Duration?
    /// The job's options (cancel, pause, retry, timeout); the kind's when `nil`.
    public var options: TaskOptions?
    /// Jobs this one runs after: it waits (holding no slot, listed as *waiting*) until every one of them has
    /// finished, then runs on any worker. Each must be a job of the store (a root, not removed); jobs submitted
    /// together may run after each other, not in a circle.
    public var after: [String]
    /// What it does when one of ``after`` fails or is cancelled.
    public var ifDependencyFails: DependencyFailurePolicy

    /// Options of a submit; by default none of them.
    public init(
        id: String? = nil, name: String? = nil, priority: Int? = nil, idempotencyKey: String? = nil,
        runAt: Date? = nil, delay: Duration? = nil, options: TaskOptions? = nil, after: [String] = [],
        ifDependencyFails: DependencyFailurePolicy = .cancel
    ) {
        self.id = id
        self.name = name
        self.priority = priority
        self.idempotencyKey = idempotencyKey
        self.runAt = runAt
        self.delay = delay
        self.options = options
        self.after = after
        self.ifDependencyFails = ifDependencyFails
    }

    /// The row of a job submitted with these options (by a ``JobClient`` or an executor alike), not yet owned, and
    /// the dependencies it waits for.
    ///
    /// - Throws: as ``runAt(now:)`` and ``dependencies(of:)``.
    func job(id: String, kind: String, input: Data, kindOptions: TaskOptions, now: Date) throws(ProgressionError)
        -> (TaskRecord, [JobDependency])
    {
        var taskOptions = options ?? kindOptions
        if let priority { taskOptions.priority = priority }
        var record = TaskRecord(
            id: id, name: name ?? kind, kind: kind, input: input, idempotencyKey: idempotencyKey, options: taskOptions,
            status: .pending, ownerID: nil, createdAt: now)
        record.nextAttemptAt = try runAt(now: now)
        // Before the record is returned: marking it waiting for its dependencies changes it.
        let waitsFor = try dependencies(of: &record)
        return (record, waitsFor)
    }

    /// The dependencies of `job` (``after``), checked; the job is marked waiting for them (what a producer and
    /// `progressctl submit --after` write alike).
    ///
    /// - Throws: ``ProgressionError/invalidArgument(_:)`` for dependencies with a run-at time or a delay (a job waits
    ///   for one or the other), or on itself.
    package func dependencies(of job: inout TaskRecord) throws(ProgressionError) -> [JobDependency] {
        var seen: Set<String> = []
        let ids = after.filter { seen.insert($0).inserted }
        guard !ids.isEmpty else { return [] }
        guard job.nextAttemptAt == nil else {
            throw .invalidArgument("give a job a run-at time or jobs to run after, not both")
        }
        guard !ids.contains(job.id) else { throw .invalidArgument("job '\(job.id)' cannot run after itself") }
        job.wait = .jobs
        let shown = ids.prefix(3).joined(separator: ", ") + (ids.count > 3 ? " and \(ids.count - 3) more" : "")
        job.waitingFor = (ids.count == 1 ? "job " : "jobs ") + shown
        job.nextAttemptAt = JobWait.untilReleased
        return ids.map { JobDependency(jobID: job.id, dependsOn: $0, onFailure: ifDependencyFails) }
    }

    /// The latest run-at a job may have (the end of the year 9999).
    public static let latestRunAt = Date(timeIntervalSince1970: 253_402_300_799)

    /// When the job may start given `now`: `nil` when at once.
    ///
    /// - Throws: ``ProgressionError/invalidArgument(_:)`` for both a run-at and a delay, a negative delay, or a time
    ///   past ``latestRunAt``.
    func runAt(now: Date) throws(ProgressionError) -> Date? {
        if runAt != nil, delay != nil {
            throw .invalidArgument("give a run-at time or a delay, not both")
        }
        var at = runAt
        if let delay {
            guard delay >= .zero else { throw .invalidArgument("a delay cannot be negative (\(delay))") }
            let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
            guard seconds < Self.latestRunAt.timeIntervalSince(now) else {
                throw .invalidArgument("the delay \(delay) goes past the year 9999")
            }
            at = now.addingTimeInterval(seconds)
        }
        guard let at, at > now else { return nil }
        guard at <= Self.latestRunAt else { throw .invalidArgument("the run-at time \(at) is past the year 9999") }
        return at.roundedUpToMilliseconds
    }
}

/// A job did not complete: it failed or was cancelled.
public struct JobFailedError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    /// The job's id.
    public var id: String
    /// How it ended: failed or cancelled.
    public var status: TaskStatus
    /// Its error, for people (`nil` when cancelled).
    public var reason: String?

    init(_ record: TaskRecord) {
        id = record.id
        status = record.status
        reason = record.errorDescription
    }

    /// A job `id` that ended `status`, with its error's description.
    public init(id: String, status: TaskStatus, reason: String?) {
        self.id = id
        self.status = status
        self.reason = reason
    }

    public var errorDescription: String? { description }
    public var description: String {
        "Job '\(id)' \(status)" + (reason.map { ": \($0)" } ?? "")
    }
}

/// A wait for a job ran out of time before it finished.
public struct JobWaitTimeoutError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    public var id: String
    public var timeout: Duration

    public var errorDescription: String? { description }
    public var description: String {
        "Job '\(id)' did not finish within \(TaskTimeoutError.format(timeout))"
    }
}

/// A job's input is larger than the limit: it is refused and nothing is stored.
public struct JobInputTooLargeError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    public var kind: String
    public var bytes: Int
    public var limit: Int

    public var errorDescription: String? { description }
    public var description: String {
        "The input of a '\(kind)' job is \(bytes) bytes of JSON, more than the limit of \(limit) bytes: pass a "
            + "reference to the data (a path, a URL, a key) instead of the data"
    }
}

/// The limit on job inputs.
enum JobInputLimit {
    /// The input as JSON.
    ///
    /// - Throws: ``JobInputTooLargeError``; `EncodingError`.
    static func encode<Input: Encodable>(_ input: Input, kind: String, limit: Int) throws -> Data {
        let data = try JobCoding.encoder.encode(input)
        guard data.count <= limit else { throw JobInputTooLargeError(kind: kind, bytes: data.count, limit: limit) }
        return data
    }
}

/// Ids of a client's jobs, reserved a block at a time: a producer that submits one job at a time reserves (a
/// transaction, five round trips on PostgreSQL) once per 32 jobs, not once per job. A block's ids left unused when the
/// client goes are never used: the sequence has gaps, as an executor's ``IdentifierPool`` leaves.
final class SpareIdentifiers: Sendable {
    static let block = 32
    private let spare = Mutex<Range<Int64>>(0..<0)

    /// `count` consecutive values of the store's sequence (a batch of `block` or more reserves its own).
    func take(_ count: Int, from store: any TaskStoreCore) async throws -> Range<Int64> {
        let count = max(1, count)
        let taken = spare.withLock { spare -> Range<Int64>? in
            guard spare.count >= count else { return nil }
            defer { spare = spare.dropFirst(count) }
            return spare.prefix(count)
        }
        if let taken { return taken }
        guard count < Self.block else { return try await store.reserveIdentifiers(count) }
        let reserved = try await store.reserveIdentifiers(Self.block)
        spare.withLock { $0 = reserved.dropFirst(count) }
        return reserved.prefix(count)
    }
}

/// Inserts jobs that wait in the store, unowned, for any worker to claim: a producer's, a delayed job, a job of a
/// kind limited across the fleet.
struct JobInserter {
    let store: any TaskStoreCore

    /// Inserts `records` with their creation events in one transaction, with the `dependencies` of those that run after
    /// others. A record whose kind and idempotency key exist already is not inserted: the existing job's id takes its
    /// place. Returns the ids in order.
    ///
    /// - Throws: ``ProgressionError/duplicateID(_:)`` when an id is taken; ``JobDependencyError`` for dependencies
    ///   that are not jobs, or that go in a circle; a store error.
    func insert(_ records: [TaskRecord], dependencies: [JobDependency] = []) async throws -> [String] {
        for record in records { try record.options.check() }
        var jobTrees: (any JobTreeStore)?
        if !dependencies.isEmpty {
            jobTrees = store as? any JobTreeStore
            guard jobTrees != nil else {
                throw ProgressionError.storeCannot(
                    store: String(describing: type(of: store)), action: "keep child jobs, dependencies or signals")
            }
            var graph: [String: [String]] = [:]
            for dependency in dependencies { graph[dependency.jobID, default: []].append(dependency.dependsOn) }
            if let cycle = JobDependencyError.cycle(in: graph) { throw JobDependencyError.cycle(cycle) }
        }
        var ids: [String?] = Array(repeating: nil, count: records.count)
        var keyed: [String: Int] = [:]
        for attempt in 0..<3 {
            var inserts: [TaskRecord] = []
            var positions: [Int] = []
            var events: [TaskEvent] = []
            for (index, record) in records.enumerated() where ids[index] == nil {
                if let kind = record.kind, let key = record.idempotencyKey {
                    if let existing = try await store.root(kind: kind, idempotencyKey: key) {
                        ids[index] = existing.id
                        continue
                    }
                    let twin = kind + "\u{0}" + key
                    if let first = keyed[twin], first != index { continue }
                    keyed[twin] = index
                }
                inserts.append(record)
                positions.append(index)
                events.append(
                    TaskEvent(
                        taskID: record.id, rootID: record.id, kind: .created, at: record.createdAt, attempt: 1,
                        message: record.name))
                if let waitingFor = record.waitingFor {
                    events.append(
                        TaskEvent(
                            taskID: record.id, rootID: record.id, kind: .waiting, at: record.createdAt, attempt: 1,
                            message: "for \(waitingFor)"))
                } else if let at = record.nextAttemptAt {
                    events.append(
                        TaskEvent(
                            taskID: record.id, rootID: record.id, kind: .scheduled, at: record.createdAt, attempt: 1,
                            message: "runs at \(at.formatted(.iso8601))"))
                }
            }
            do {
                let inserted = Set(inserts.map(\.id))
                let kept = dependencies.filter { inserted.contains($0.jobID) }
                if let jobTrees, !kept.isEmpty {
                    try await jobTrees.insert(inserts, events: events, dependencies: kept)
                } else {
                    try await store.insert(inserts, events: events)
                }
                for (record, index) in zip(inserts, positions) { ids[index] = record.id }
                break
            } catch let error as TaskStoreError where error.reason == .conflict && attempt < 2 {
                // Another process inserted one of the keys meanwhile: read them again.
                continue
            } catch let error as TaskStoreError where error.reason == .conflict {
                // Nothing was inserted: name the id that is taken (not the batch's first, which may be free).
                for record in inserts where try await store.task(id: record.id) != nil {
                    throw ProgressionError.duplicateID(record.id)
                }
                throw ProgressionError.duplicateID(inserts.first?.id ?? "")
            }
        }
        // Twins within the batch: the first one's id.
        for (index, record) in records.enumerated() where ids[index] == nil {
            if let kind = record.kind, let key = record.idempotencyKey, let first = keyed[kind + "\u{0}" + key] {
                ids[index] = ids[first]
            }
        }
        return ids.map { $0 ?? "" }
    }
}
