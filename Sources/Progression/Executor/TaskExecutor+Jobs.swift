import Foundation

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
    /// try try executor.register("import", input: ImportInput.self, options: .interactive.retryable()) { input, context in
    ///     let done = try context.lastCheckpoint(as: Int.self) ?? 0
    ///     …
    /// }
    /// ```
    ///
    /// - Throws: ``ProgressionError/kindAlreadyRegistered(_:)`` when the kind is registered already (the first code
    ///   stays).
    public nonisolated func register<Input: Decodable & Sendable>(
        _ kind: String, input: Input.Type, options: TaskOptions = .default,
        _ body: @escaping @Sendable (Input, any TaskContext) async throws -> Void
    ) throws {
        try engine.registry.register(
            kind,
            RegisteredKind(options: options) { data, context in
                let input: Input
                do {
                    input = try JSONDecoder().decode(Input.self, from: data)
                } catch {
                    throw InvalidJobInputError(kind: kind, reason: String(describing: error))
                }
                try await body(input, context)
            })
    }

    /// The options a job kind was registered with, or `nil` when it is not registered here.
    public nonisolated func registeredOptions(of kind: String) -> TaskOptions? {
        engine.registry.kind(kind)?.options
    }

    /// Submits a job of a registered kind. Returns once the job's row is committed; the job runs when a slot is free
    /// (in the same commit when one is free now).
    ///
    /// - Parameters:
    ///   - kind: the name the kind was registered under.
    ///   - input: the job's input, stored as JSON with the job.
    ///   - id: the job's id; a new short id drawn from the store's sequence when `nil`.
    ///   - name: what the job is called in snapshots and `progressctl`; by default the kind's name.
    ///   - options: by default the kind's options.
    ///   - idempotencyKey: a second submit with the same kind and key returns the first job's id and adds nothing.
    /// - Throws: ``ProgressionError/unknownKind(_:)``, ``ProgressionError/duplicateID(_:)``, `EncodingError`,
    ///   ``ProgressionError/shutDown``.
    @discardableResult
    public func submit<Input: Encodable & Sendable>(
        _ kind: String, input: Input, id: String? = nil, name: String? = nil, options: TaskOptions? = nil,
        idempotencyKey: String? = nil
    ) async throws -> String {
        guard let job = engine.registry.kind(kind) else { throw ProgressionError.unknownKind(kind) }
        try startIfNeeded()
        if let idempotencyKey, let existing = try await store.root(kind: kind, idempotencyKey: idempotencyKey) {
            return existing.id
        }
        let data = try JSONEncoder().encode(input)
        let id = if let id { id } else { try await engine.identifiers.next() }
        let record = TaskRecord(
            id: id, name: name ?? kind, kind: kind, input: data, idempotencyKey: idempotencyKey,
            options: options ?? job.options, status: .pending, ownerID: ownerID, createdAt: engine.now())
        let (handles, sequence) = try engine.addRoots([
            NewRoot(record: record, body: { context in try await job.run(data, context) })
        ])
        guard try await engine.commitNewRoots(handles, sequence: sequence).isEmpty else {
            // The same key submitted meanwhile (by another process): that job is the one.
            if let idempotencyKey, let existing = try await store.root(kind: kind, idempotencyKey: idempotencyKey) {
                return existing.id
            }
            throw ProgressionError.duplicateID(id)
        }
        return id
    }

    /// Submits many jobs of one kind in one commit (instead of one each). Returns their ids in the order of `inputs`,
    /// once every row is committed.
    ///
    /// - Parameters:
    ///   - kind: the name the kind was registered under.
    ///   - inputs: one input per job.
    ///   - options: by default the kind's options.
    ///   - idempotencyKey: derives each job's key from its input; a job whose key exists already is not added again
    ///     and its existing id is returned in its place.
    /// - Throws: as ``submit(_:input:id:name:options:idempotencyKey:)-(_,Input,_,_,_,_)``.
    @discardableResult
    public func submit<Input: Encodable & Sendable>(
        _ kind: String, inputs: [Input], options: TaskOptions? = nil,
        idempotencyKey: ((Input) -> String)? = nil
    ) async throws -> [String] {
        guard let job = engine.registry.kind(kind) else { throw ProgressionError.unknownKind(kind) }
        try startIfNeeded()
        let encoder = JSONEncoder()
        let now = engine.now()
        var ids: [String?] = []
        var keys: [String?] = []
        var roots: [NewRoot] = []
        var seenKeys: [String: Int] = [:]
        for input in inputs {
            let key = idempotencyKey?(input)
            keys.append(key)
            if let key {
                if let existing = try await store.root(kind: kind, idempotencyKey: key) {
                    ids.append(existing.id)
                    continue
                }
                if seenKeys[key] != nil {
                    ids.append(nil)  // the same key twice in the batch: the first one's id, below
                    continue
                }
                seenKeys[key] = roots.count
            }
            let data = try encoder.encode(input)
            let record = TaskRecord(
                id: try await engine.identifiers.next(), name: kind, kind: kind, input: data, idempotencyKey: key,
                options: options ?? job.options, status: .pending, ownerID: ownerID, createdAt: now)
            ids.append(record.id)
            roots.append(NewRoot(record: record, body: { context in try await job.run(data, context) }))
        }
        let (handles, sequence) = try engine.addRoots(roots)
        let conflicted = Set(try await engine.commitNewRoots(handles, sequence: sequence))
        var result: [String] = []
        for (index, id) in ids.enumerated() {
            let key = keys[index]
            if let id, !conflicted.contains(id) {
                result.append(id)
            } else if let key, let existing = try await store.root(kind: kind, idempotencyKey: key) {
                result.append(existing.id)
            } else if let id {
                throw ProgressionError.duplicateID(id)
            }
        }
        return result
    }
}
