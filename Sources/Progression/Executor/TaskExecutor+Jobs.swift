import Foundation

/// A registered job kind: its default options and the code that runs an encoded input.
struct JobKind: Sendable {
    var options: TaskOptions
    var run: @Sendable (Data, any TaskContext) async throws -> Void
}

/// A job's stored input does not decode as the kind's input type: no retry can mend it.
public struct InvalidJobInputError: NonRetryableError, LocalizedError, CustomStringConvertible {
    public var kind: String
    public var reason: String

    public var errorDescription: String? { description }
    public var description: String { "The input of the '\(kind)' job cannot be read: \(reason)" }
}

extension TaskExecutor {
    /// Registers a job kind: jobs of this kind can be submitted, and run again by any later process that registered it
    /// too (after a crash, a restart, or on retry).
    ///
    /// ```swift
    /// struct ImportInput: Codable, Sendable { var directory: String }
    /// await executor.register("import", input: ImportInput.self, options: .interactive.retryable()) { input, context in
    ///     let done = try context.lastCheckpoint(as: Int.self) ?? 0
    ///     …
    /// }
    /// ```
    public func register<Input: Decodable & Sendable>(
        _ kind: String, input: Input.Type, options: TaskOptions = .default,
        _ body: @escaping @Sendable (Input, any TaskContext) async throws -> Void
    ) {
        kinds[kind] = JobKind(options: options) { data, context in
            let input: Input
            do {
                input = try JSONDecoder().decode(Input.self, from: data)
            } catch {
                throw InvalidJobInputError(kind: kind, reason: String(describing: error))
            }
            try await body(input, context)
        }
    }

    /// Submits a job of a registered kind. Returns once the job's row is committed; the job runs when a slot is free.
    ///
    /// - Parameters:
    ///   - idempotencyKey: a second submit with the same kind and key returns the first job's id and adds nothing.
    ///   - options: by default the kind's options.
    /// - Throws: ``ProgressionError/unknownKind(_:)``, ``ProgressionError/duplicateID(_:)``, `EncodingError`,
    ///   ``TaskStoreError``.
    @discardableResult
    public func submit<Input: Encodable & Sendable>(
        _ kind: String, input: Input, id: String? = nil, name: String? = nil, options: TaskOptions? = nil,
        idempotencyKey: String? = nil
    ) async throws -> String {
        guard let job = kinds[kind] else { throw ProgressionError.unknownKind(kind) }
        try await startIfNeeded()
        if let idempotencyKey, let existing = try await store.root(kind: kind, idempotencyKey: idempotencyKey) {
            return existing.id
        }
        let id = id ?? TaskIdentifier.make()
        guard engine.graph.handle(of: id) == nil else { throw ProgressionError.duplicateID(id) }
        let data = try JSONEncoder().encode(input)
        let now = ExecutionEngine.now()
        let record = TaskRecord(
            id: id, name: name ?? kind, kind: kind, input: data, idempotencyKey: idempotencyKey,
            options: options ?? job.options, status: .pending, ownerID: ownerID, createdAt: now)
        let handle: NodeHandle
        do {
            handle = try await insertNewRoot(
                record, event: TaskEvent(taskID: id, rootID: id, kind: .created, at: now, attempt: 1, message: record.name))
        } catch ProgressionError.duplicateID(let duplicate) {
            // The same key submitted meanwhile (by another process): that job is the one.
            if let idempotencyKey, let existing = try await store.root(kind: kind, idempotencyKey: idempotencyKey) {
                return existing.id
            }
            throw ProgressionError.duplicateID(duplicate)
        }
        runs[handle] = RootRun(body: { context in try await job.run(data, context) })
        launch(handle)
        return id
    }

    /// Submits many jobs of one kind in one transaction (one commit for all their rows, instead of one each). Returns
    /// their ids in the order of `inputs`, once every row is committed.
    ///
    /// - Parameters:
    ///   - idempotencyKey: derives each job's key from its input; a job whose key exists already is not added again
    ///     and its existing id is returned in its place.
    /// - Throws: as ``submit(_:input:id:name:options:idempotencyKey:)``.
    @discardableResult
    public func submit<Input: Encodable & Sendable>(
        _ kind: String, inputs: [Input], options: TaskOptions? = nil,
        idempotencyKey: ((Input) -> String)? = nil
    ) async throws -> [String] {
        guard let job = kinds[kind] else { throw ProgressionError.unknownKind(kind) }
        try await startIfNeeded()
        let encoder = JSONEncoder()
        let now = ExecutionEngine.now()
        var ids: [String] = []
        var records: [TaskRecord] = []
        var events: [TaskEvent] = []
        for input in inputs {
            let key = idempotencyKey?(input)
            if let key, let existing = try await store.root(kind: kind, idempotencyKey: key) {
                ids.append(existing.id)
                continue
            }
            let id = TaskIdentifier.make(at: now)
            let record = TaskRecord(
                id: id, name: kind, kind: kind, input: try encoder.encode(input), idempotencyKey: key,
                options: options ?? job.options, status: .pending, ownerID: ownerID, createdAt: now)
            ids.append(id)
            records.append(record)
            events.append(TaskEvent(taskID: id, rootID: id, kind: .created, at: now, attempt: 1, message: kind))
        }
        do {
            try await store.insert(records, events: events)
        } catch let error as TaskStoreError where error.reason == .conflict {
            // A key repeated within the batch, or one submitted meanwhile: one at a time sorts it out.
            var resolved: [String] = []
            for input in inputs {
                resolved.append(
                    try await submit(kind, input: input, options: options, idempotencyKey: idempotencyKey?(input)))
            }
            return resolved
        }
        for record in records {
            let handle = engine.graph.addRoot(record)
            let data = record.input ?? Data("null".utf8)
            runs[handle] = RootRun(body: { context in try await job.run(data, context) })
            launch(handle)
        }
        return ids
    }

    /// The code that runs a stored root: its kind's, given its input.
    func body(for record: TaskRecord) -> (@Sendable (any TaskContext) async throws -> Void)? {
        guard let kind = record.kind, let job = kinds[kind] else { return nil }
        let input = record.input ?? Data("null".utf8)
        return { context in try await job.run(input, context) }
    }
}
