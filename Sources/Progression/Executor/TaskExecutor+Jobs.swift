import Foundation
import Synchronization

/// A job's stored input does not decode as the kind's input type: no retry can mend it.
public struct InvalidJobInputError: NonRetryableError, LocalizedError, CustomStringConvertible {
    /// The job's kind.
    public var kind: String
    /// Why the input does not decode.
    public var reason: String

    /// The description for people.
    public var errorDescription: String? { description }
    /// "The input of the 'resize' job cannot be read: …".
    public var description: String { "The input of the '\(kind)' job cannot be read: \(reason)" }
}

extension TaskExecutor {
    /// Registers a job kind: jobs of this kind can be submitted, and run again by any later process that registered it
    /// too (after a crash, a restart, or on retry). Register each kind once, before ``start()``.
    ///
    /// ```swift
    /// struct ImportInput: Codable, Sendable { var directory: String }
    /// try executor.register("import", input: ImportInput.self, options: .interactive.retryable()) { input, context in
    ///     let done = try context.lastCheckpoint(as: Int.self) ?? 0
    ///     …
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - kind: the kind's name in the store (what `progressctl submit` and `list --kind` use).
    ///   - input: the type of its jobs' input, decoded from the stored JSON.
    ///   - options: the options its jobs get unless their submit gives others.
    ///   - maxConcurrent: at most this many jobs of the kind run at once across every worker on the database (its
    ///     jobs then start only through the store, which counts them); `nil`: only the executor's own limit.
    ///   - version: the version of this code, and which jobs begun by other versions it continues (see
    ///     ``JobVersion``); `nil`: it continues any job.
    ///   - body: the job's code.
    /// - Throws: ``ProgressionError/kindAlreadyRegistered(_:)`` when the kind is registered already (the first code
    ///   stays); ``ProgressionError/invalidArgument(_:)`` for a limit below 1, a stall limit that is not positive, or
    ///   a version name that is empty or longer than 100 characters.
    public nonisolated func register<Input: Decodable & Sendable>(
        _ kind: String, input: Input.Type, options: TaskOptions = .default, maxConcurrent: Int? = nil,
        version: JobVersion? = nil, _ body: @escaping @Sendable (Input, any TaskContext) async throws -> Void
    ) throws {
        try registerKind(kind, input: input, options: options, maxConcurrent: maxConcurrent, version: version) {
            input, context in
            try await body(input, context)
            return nil
        }
    }

    /// Registers a job kind whose jobs return a result: it is stored with the job when it completes (JSON), shown by
    /// `progressctl show`, and read back by a producer with ``JobClient/result(of:as:timeout:)``.
    ///
    /// - Throws: as ``register(_:input:options:maxConcurrent:version:_:)``.
    public nonisolated func register<Input: Decodable & Sendable, Output: Encodable & Sendable>(
        _ kind: String, input: Input.Type, output: Output.Type, options: TaskOptions = .default,
        maxConcurrent: Int? = nil, version: JobVersion? = nil,
        _ body: @escaping @Sendable (Input, any TaskContext) async throws -> Output
    ) throws {
        try registerKind(kind, input: input, options: options, maxConcurrent: maxConcurrent, version: version) {
            input, context in
            try JobCoding.encoder.encode(try await body(input, context))
        }
    }

    nonisolated func registerKind<Input: Decodable & Sendable>(
        _ kind: String, input: Input.Type, options: TaskOptions, maxConcurrent: Int?, version: JobVersion?,
        _ body: @escaping @Sendable (Input, any TaskContext) async throws -> Data?
    ) throws {
        if let maxConcurrent, maxConcurrent < 1 {
            throw ProgressionError.invalidArgument("the limit of kind '\(kind)' must be at least 1, not \(maxConcurrent)")
        }
        // A kind's limit is counted by the claims, from the kinds the fleet's store records.
        if maxConcurrent != nil {
            _ = try engine.capabilities.require(engine.capabilities.fleet, to: "limit a kind's jobs")
        }
        try options.check()
        try version?.check(kind: kind)
        try engine.registry.register(
            kind,
            RegisteredKind(options: options, maxConcurrent: maxConcurrent, version: version) { data, context in
                let input: Input
                do {
                    input = try JobCoding.decoder.decode(Input.self, from: data)
                } catch {
                    throw InvalidJobInputError(kind: kind, reason: JobInputDecoding.describe(error))
                }
                return try await body(input, context)
            })
        if let version { engine.locked { $0.recordVersion(version.name, of: kind) } }
    }

    /// The options a job kind was registered with, or `nil` when it is not registered here.
    public nonisolated func registeredOptions(of kind: String) -> TaskOptions? {
        engine.registry.kind(kind)?.options
    }

    /// Submits a job of a registered kind with ``JobOptions`` — the same options a ``JobClient`` takes: its id, name,
    /// priority, idempotency key, a run-at time or delay, the jobs it runs after. Returns once the job's row is
    /// committed; it runs when a slot is free (in the same commit when one is free now and it waits for nothing) — on
    /// this executor, or on another worker of the database that registered the kind and has a slot first.
    ///
    /// ```swift
    /// let load = try await executor.submit("load", input: day, options: JobOptions(idempotencyKey: "load-\(day)"))
    /// let report = try await executor.submit("report", input: day, options: JobOptions(after: [load]))
    /// ```
    ///
    /// - Throws: ``ProgressionError/unknownKind(_:)``, ``ProgressionError/duplicateID(_:)``,
    ///   ``ProgressionError/invalidArgument(_:)`` (a run-at and a delay both, dependencies with a time),
    ///   ``JobDependencyError``, `EncodingError`, ``ProgressionError/shutDown``, ``JobInputTooLargeError``.
    @discardableResult
    public nonisolated func submit<Input: Encodable & Sendable>(
        _ kind: String, input: Input, options jobOptions: JobOptions = JobOptions()
    ) async throws -> String {
        guard let job = engine.registry.kind(kind) else { throw ProgressionError.unknownKind(kind) }
        try await ensureStarted()
        let idempotencyKey = jobOptions.idempotencyKey
        if let idempotencyKey, let existing = try await engine.store.root(kind: kind, idempotencyKey: idempotencyKey) {
            return existing.id
        }
        let data = try JobInputLimit.encode(input, kind: kind, limit: engine.configuration.maxInputBytes)
        let id = if let id = jobOptions.id { id } else { try await engine.identifiers.next() }
        let (record, dependencies) = try jobOptions.job(
            id: id, kind: kind, input: data, kindOptions: job.options, now: engine.now())
        if record.nextAttemptAt != nil || job.maxConcurrent != nil {
            // It waits in the store (a later time, jobs to run after, a limit that claims count): any worker claims it.
            let stored = try await JobInserter(store: engine.store).insert([record], dependencies: dependencies)[0]
            engine.noteNewWorkInStore()
            return stored
        }
        let (handles, sequence) = try engine.addRoots([
            NewRoot(record: record, body: { context in try await job.run(data, context) })
        ])
        guard try await engine.commitNewRoots(handles, sequence: sequence).isEmpty else {
            // The same key submitted meanwhile (by another process): that job is the one.
            if let idempotencyKey, let existing = try await engine.store.root(kind: kind, idempotencyKey: idempotencyKey) {
                return existing.id
            }
            throw ProgressionError.duplicateID(id)
        }
        return id
    }

    /// Sends a signal to a job wherever it is (see ``JobClient/signal(_:name:payload:)``): kept until the job's code
    /// takes it with ``TaskContext/signal(_:as:timeout:)``; a job that waits for it now is released.
    ///
    /// - Throws: as ``JobClient/signal(_:name:payload:)``.
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
        let sent = try await engine.capabilities.jobTreesOrRefusal.sendSignal(
            to: jobID, name: name, payload: data, at: engine.now())
        engine.noteNewWorkInStore()
        return sent
    }

    /// Submits many jobs of one kind in one commit (instead of one each), each with its ``JobOptions`` (those of
    /// ``JobClient/submit(_:inputs:options:)``). Returns their ids in the order of `inputs`, once every row is
    /// committed; a job whose idempotency key exists already (or comes twice in `inputs`) is not added again and the
    /// existing one's id is returned in its place. A batch where a job waits (a run-at time, a delay, jobs to run
    /// after) or has an id of its own, or whose kind has a limit, is written in one transaction for any worker to claim
    /// (all or nothing); the others start here as slots free.
    ///
    /// ```swift
    /// let ids = try await executor.submit("resize", inputs: files) { JobOptions(idempotencyKey: $0.path) }
    /// ```
    ///
    /// - Throws: as ``submit(_:input:options:)-(String,_,_)``; nothing is added then.
    @discardableResult
    public nonisolated func submit<Input: Encodable & Sendable>(
        _ kind: String, inputs: [Input], options: (Input) -> JobOptions = { _ in JobOptions() }
    ) async throws -> [String] {
        guard let job = engine.registry.kind(kind) else { throw ProgressionError.unknownKind(kind) }
        try await ensureStarted()
        let now = engine.now()
        var ids: [String?] = []
        var keys: [String?] = []
        var roots: [NewRoot] = []
        var dependencies: [JobDependency] = []
        var seenKeys: Set<String> = []
        var givenIDs: Set<String> = []
        for input in inputs {
            let jobOptions = options(input)
            let key = jobOptions.idempotencyKey
            keys.append(key)
            if let key {
                if let existing = try await engine.store.root(kind: kind, idempotencyKey: key) {
                    ids.append(existing.id)
                    continue
                }
                guard seenKeys.insert(key).inserted else {
                    ids.append(nil)  // the same key twice in the batch: the first one's id, below
                    continue
                }
            }
            let data = try JobInputLimit.encode(input, kind: kind, limit: engine.configuration.maxInputBytes)
            if let given = jobOptions.id, !givenIDs.insert(given).inserted { throw ProgressionError.duplicateID(given) }
            let id = if let id = jobOptions.id { id } else { try await engine.identifiers.next() }
            let (record, waitsFor) = try jobOptions.job(
                id: id, kind: kind, input: data, kindOptions: job.options, now: now)
            dependencies += waitsFor
            ids.append(record.id)
            roots.append(NewRoot(record: record, body: { context in try await job.run(data, context) }))
        }
        var conflicted: Set<String> = []
        if job.maxConcurrent != nil || !givenIDs.isEmpty || roots.contains(where: { $0.record.nextAttemptAt != nil }) {
            // Some wait in the store (or a limit that claims count), or an id given may be taken: all go there, in one
            // transaction that fails whole (in memory, rows are written one by one and a taken id found after).
            let stored = try await JobInserter(store: engine.store).insert(roots.map(\.record), dependencies: dependencies)
            conflicted = Set(zip(roots, stored).filter { $0.0.record.id != $0.1 }.map(\.0.record.id))
            engine.noteNewWorkInStore()
        } else {
            let (handles, sequence) = try engine.addRoots(roots)
            conflicted = Set(try await engine.commitNewRoots(handles, sequence: sequence))
        }
        var result: [String] = []
        for (index, id) in ids.enumerated() {
            let key = keys[index]
            if let id, !conflicted.contains(id) {
                result.append(id)
            } else if let key, let existing = try await engine.store.root(kind: kind, idempotencyKey: key) {
                result.append(existing.id)
            } else if let id {
                throw ProgressionError.duplicateID(id)
            }
        }
        return result
    }

    // MARK: Kinds across the fleet

    /// Pauses a job kind on every worker of the database: no new job of it starts (running ones go on) until
    /// ``resumeKind(_:)``. Returns whether it was running.
    @discardableResult
    public func pauseKind(_ kind: String) async throws -> Bool {
        let changed = try await engine.capabilities.fleetOrRefusal.setKindPaused(kind, paused: true, at: engine.now())
        await engine.refreshPausedKinds()
        return changed
    }

    /// Lets a paused job kind start jobs again. Returns whether it was paused.
    @discardableResult
    public func resumeKind(_ kind: String) async throws -> Bool {
        let changed = try await engine.capabilities.fleetOrRefusal.setKindPaused(kind, paused: false, at: engine.now())
        await engine.refreshPausedKinds()
        engine.storeChanged.store(true, ordering: .relaxed)
        engine.claimSignal.signal()
        return changed
    }
}

/// Words for why a job's input does not decode: which key or value, without Swift's internals.
enum JobInputDecoding {
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return ProgressionError.describe(error) }
        func path(_ codingPath: [any CodingKey]) -> String {
            let keys = codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return keys.isEmpty ? "the input" : "'" + keys.joined(separator: ".").replacingOccurrences(of: ".[", with: "[") + "'"
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "the key '\(key.stringValue)' is missing" + (context.codingPath.isEmpty ? "" : " in \(path(context.codingPath))")
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)) is not \(Self.describe(type))"
        case .valueNotFound(let type, let context):
            return "\(path(context.codingPath)) is null, not \(Self.describe(type))"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return "it is not valid JSON" }
            return "\(path(context.codingPath)) cannot be read"
        @unknown default:
            return "it does not match the kind's input"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt.Type, is UInt64.Type: "a whole number"
        case is Double.Type, is Float.Type: "a number"
        default:
            String(describing: type).hasPrefix("Array") ? "a list" : (String(describing: type).hasPrefix("Dictionary") ? "an object" : "a \(type)")
        }
    }
}
