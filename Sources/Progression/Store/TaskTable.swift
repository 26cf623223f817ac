import Foundation

// The `tasks` table's columns, described once. Both SQL stores derive from this their select list, the binding of an
// insert, the assignments and binding of a narrow update, PostgreSQL's column types, and the reading of a row; the
// migrations declare the same columns in the same order.

/// A value as the SQL stores bind it.
package enum StoredValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    init(_ value: String?) { self = value.map { .text($0) } ?? .null }
    init(_ value: Double?) { self = value.map { .real($0) } ?? .null }
    init(_ value: Data?) { self = value.map { .blob($0) } ?? .null }
    init(_ value: Int) { self = .integer(Int64(value)) }
    init(_ value: Date?) { self = value.map { .integer($0.storedMilliseconds) } ?? .null }
}

/// The type of a column, in PostgreSQL's names (SQLite keeps values by their own class; PostgreSQL's arrays of one
/// column need its type).
package enum StoredType: String, Sendable {
    case text, int4, int8, float8, bytea
}

/// One column of `tasks`. The cases are in the order of the select list (``selectList``), so a case's raw value is its
/// position in a row read with it.
package enum TaskTableColumn: Int, CaseIterable, Sendable {
    case id, parentID, rootID, name, occurrence, kind, input, idempotencyKey, options, status, progress, step, weight
    case attempt, interruptions, errorType, errorDescription, result, checkpoint, ownerID, leaseExpiresAt, priority
    case createdAt, startedAt, updatedAt, finishedAt, nextAttemptAt, total, rate
    // Migration 0005: job trees.
    case parentJobID, childJobID, wait, waitingFor, waitingProgress, share, awaited
    // Migration 0007: the version a job began under.
    case version

    /// Its SQL name.
    package var name: String {
        switch self {
        case .id: "id"
        case .parentID: "parent_id"
        case .rootID: "root_id"
        case .name: "name"
        case .occurrence: "occurrence"
        case .kind: "kind"
        case .input: "input"
        case .idempotencyKey: "idempotency_key"
        case .options: "options"
        case .status: "status"
        case .progress: "progress"
        case .step: "step"
        case .weight: "weight"
        case .attempt: "attempt"
        case .interruptions: "interruptions"
        case .errorType: "error_type"
        case .errorDescription: "error_description"
        case .result: "result"
        case .checkpoint: "checkpoint"
        case .ownerID: "owner_id"
        case .leaseExpiresAt: "lease_expires_at"
        case .priority: "priority"
        case .createdAt: "created_at"
        case .startedAt: "started_at"
        case .updatedAt: "updated_at"
        case .finishedAt: "finished_at"
        case .nextAttemptAt: "next_attempt_at"
        case .total: "total"
        case .rate: "rate"
        case .parentJobID: "parent_job_id"
        case .childJobID: "child_job_id"
        case .wait: "wait"
        case .waitingFor: "waiting_for"
        case .waitingProgress: "waiting_progress"
        case .share: "share"
        case .awaited: "awaited"
        case .version: "version"
        }
    }

    /// Its SQL type.
    package var type: StoredType {
        switch self {
        case .id, .parentID, .rootID, .name, .kind, .idempotencyKey, .options, .status, .step, .errorType,
            .errorDescription, .ownerID, .parentJobID, .childJobID, .wait, .waitingFor, .version:
            .text
        case .occurrence, .attempt, .interruptions, .priority, .awaited: .int4
        case .leaseExpiresAt, .createdAt, .startedAt, .updatedAt, .finishedAt, .nextAttemptAt: .int8
        case .progress, .weight, .total, .rate, .waitingProgress, .share: .float8
        case .input, .result, .checkpoint: .bytea
        }
    }

    /// The changeable column it belongs to: what a narrow update writes it for. `nil`: written when the row is
    /// inserted, never after.
    package var changeable: TaskColumns? {
        switch self {
        case .id, .parentID, .rootID, .name, .occurrence, .kind, .input, .idempotencyKey, .leaseExpiresAt, .createdAt,
            .parentJobID, .childJobID:
            nil
        case .version: .version
        case .wait, .waitingFor, .waitingProgress: .waiting
        case .share, .awaited: .link
        case .options: .options
        case .status: .status
        case .progress: .progress
        case .step: .step
        case .weight: .weight
        case .attempt: .attempt
        case .interruptions: .interruptions
        case .errorType, .errorDescription: .error
        case .result: .result
        case .checkpoint: .checkpoint
        case .ownerID: .owner
        case .priority: .priority
        case .startedAt: .startedAt
        case .updatedAt: .updatedAt
        case .finishedAt: .finishedAt
        case .nextAttemptAt: .nextAttemptAt
        case .total: .total
        case .rate: .rate
        }
    }

    /// Its value in `record`. The options are stored as JSON, which the store encodes (and caches) with
    /// `encodeOptions`.
    package func value(
        of record: TaskRecord, encodeOptions: (TaskOptions) throws -> String
    ) rethrows -> StoredValue {
        switch self {
        case .id: .text(record.id)
        case .parentID: StoredValue(record.parentID)
        case .rootID: .text(record.rootID)
        case .name: .text(record.name)
        case .occurrence: StoredValue(record.occurrence)
        case .kind: StoredValue(record.kind)
        case .input: StoredValue(record.input)
        case .idempotencyKey: StoredValue(record.idempotencyKey)
        case .options: .text(try encodeOptions(record.options))
        case .status: .text(record.status.rawValue)
        case .progress: StoredValue(record.progress)
        case .step: StoredValue(record.step)
        case .weight: .real(record.weight)
        case .attempt: StoredValue(record.attempt)
        case .interruptions: StoredValue(record.interruptions)
        case .errorType: StoredValue(record.errorType)
        case .errorDescription: StoredValue(record.errorDescription)
        case .result: StoredValue(record.result)
        case .checkpoint: StoredValue(record.checkpoint)
        case .ownerID: StoredValue(record.ownerID)
        case .leaseExpiresAt: .null  // unused: an owner's hold is its heartbeat
        case .priority: StoredValue(record.priority)
        case .createdAt: StoredValue(record.createdAt)
        case .startedAt: StoredValue(record.startedAt)
        case .updatedAt: StoredValue(record.updatedAt)
        case .finishedAt: StoredValue(record.finishedAt)
        case .nextAttemptAt: StoredValue(record.nextAttemptAt)
        case .total: StoredValue(record.total)
        case .rate: StoredValue(record.rate)
        case .parentJobID: StoredValue(record.parentJobID)
        case .childJobID: StoredValue(record.childJobID)
        case .wait: StoredValue(record.wait?.storedText)
        case .waitingFor: StoredValue(record.waitingFor)
        case .waitingProgress: StoredValue(record.waitingProgress)
        case .share: StoredValue(record.share)
        case .awaited: StoredValue(record.awaited ? 1 : 0)
        case .version: StoredValue(record.version)
        }
    }

    /// Every column, comma-separated, in order: what a read selects.
    package static let selectList = allCases.map(\.name).joined(separator: ", ")

    /// The select list with each column prefixed by `alias.`.
    package static func selectList(of alias: String) -> String {
        allCases.map { "\(alias).\($0.name)" }.joined(separator: ", ")
    }

    /// The columns a narrow update may write with their changeable column, in the order it binds them: by
    /// changeable column (``TaskColumns``' bit order), then by position.
    private static let updatableWithChangeable: [(changeable: TaskColumns, column: TaskTableColumn)] =
        allCases.compactMap { column in column.changeable.map { ($0, column) } }
        .sorted { ($0.changeable.rawValue, $0.column.rawValue) < ($1.changeable.rawValue, $1.column.rawValue) }

    /// The columns a narrow update may write, in the order it binds them.
    package static let updatable = updatableWithChangeable.map(\.column)

    /// The columns an update of `columns` writes, in binding order (no array is built: updates are the writer's most
    /// frequent statement).
    package static func written(by columns: TaskColumns) -> some Sequence<TaskTableColumn> {
        updatableWithChangeable.lazy.filter { columns.contains($0.changeable) }.map(\.column)
    }
}

/// The cells of one row read with ``TaskTableColumn/selectList``, by position (`nil`: NULL). Each SQL store reads its
/// own rows through this, so the reading of a task is written once (``TaskRecord/init(row:location:decodeOptions:)``).
package protocol TaskRowCells {
    func textCell(at index: Int) throws -> String?
    func integerCell(at index: Int) throws -> Int64?
    func realCell(at index: Int) throws -> Double?
    func blobCell(at index: Int) throws -> Data?
}

extension TaskRecord {
    /// A task from a row of ``TaskTableColumn/selectList``; the store decodes (and may cache) the options' JSON with
    /// `decodeOptions`.
    ///
    /// - Throws: ``TaskStoreError`` `.corrupt` naming the row and `location` when a value cannot be read (a missing
    ///   required value, an unknown status, options that do not decode): a row the library cannot read is never
    ///   guessed.
    package init(
        row: some TaskRowCells, location: String?, decodeOptions: (String) throws -> TaskOptions
    ) throws {
        func index(_ column: TaskTableColumn) -> Int { column.rawValue }
        let id = try row.textCell(at: index(.id)) ?? ""
        func corrupt(_ what: String) -> TaskStoreError {
            TaskStoreError(.corrupt, path: location, message: "task '\(id)' cannot be read: \(what)")
        }
        func required<T>(_ value: T?, _ column: TaskTableColumn) throws -> T {
            guard let value else { throw corrupt("it has no \(column.name)") }
            return value
        }
        func text(_ column: TaskTableColumn) throws -> String? { try row.textCell(at: index(column)) }
        func int(_ column: TaskTableColumn) throws -> Int { Int(try required(row.integerCell(at: index(column)), column)) }
        func real(_ column: TaskTableColumn) throws -> Double? { try row.realCell(at: index(column)) }
        func blob(_ column: TaskTableColumn) throws -> Data? { try row.blobCell(at: index(column)) }
        func date(_ column: TaskTableColumn) throws -> Date? {
            try row.integerCell(at: index(column)).map(Date.init(storedMilliseconds:))
        }
        guard !id.isEmpty else { throw corrupt("it has no id") }
        let statusText = try required(text(.status), .status)
        guard let status = TaskStatus(rawValue: statusText) else { throw corrupt("unknown status '\(statusText)'") }
        let options: TaskOptions
        do {
            options = try decodeOptions(try required(text(.options), .options))
        } catch let error as TaskStoreError {
            throw error
        } catch {
            throw corrupt("its options do not decode (\(error))")
        }
        guard let createdAt = try date(.createdAt), let updatedAt = try date(.updatedAt) else {
            throw corrupt("it has no creation or update time")
        }
        var wait: JobWait?
        if let text = try text(.wait) {
            guard let parsed = JobWait(storedText: text) else { throw corrupt("unknown wait '\(text)'") }
            wait = parsed
        }
        self.init(
            id: id, parentID: try text(.parentID), rootID: try required(text(.rootID), .rootID),
            name: try required(text(.name), .name), occurrence: try int(.occurrence), kind: try text(.kind),
            input: try blob(.input), idempotencyKey: try text(.idempotencyKey), options: options, status: status,
            progress: try real(.progress), step: try text(.step), weight: try required(real(.weight), .weight),
            attempt: try int(.attempt), interruptions: try int(.interruptions), errorType: try text(.errorType),
            errorDescription: try text(.errorDescription), result: try blob(.result), checkpoint: try blob(.checkpoint),
            ownerID: try text(.ownerID), priority: try int(.priority), createdAt: createdAt,
            startedAt: try date(.startedAt), updatedAt: updatedAt, finishedAt: try date(.finishedAt),
            nextAttemptAt: try date(.nextAttemptAt), total: try real(.total), rate: try real(.rate),
            parentJobID: try text(.parentJobID), childJobID: try text(.childJobID), waitingFor: try text(.waitingFor))
        self.wait = wait
        waitingProgress = try real(.waitingProgress)
        share = try real(.share)
        awaited = (try row.integerCell(at: index(.awaited)) ?? 0) != 0
        version = try text(.version)
    }
}
