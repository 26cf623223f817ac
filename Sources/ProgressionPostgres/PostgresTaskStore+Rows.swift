#if PostgreSQL
import Foundation
import NIOCore
import PostgresNIO
import Progression
import Synchronization

/// How rows map to records: one fixed column list read by position, and batches written as one array per column
/// (`unnest`), so that a batch of any size costs a few statements.
extension PostgresTaskStore {
    /// The columns of `tasks` in the order ``record(from:)`` reads them.
    static let columns = """
        id, parent_id, root_id, name, occurrence, kind, input, idempotency_key, options, status, progress, step, \
        weight, attempt, interruptions, error_type, error_description, result, checkpoint, owner_id, \
        lease_expires_at, priority, created_at, started_at, updated_at, finished_at, next_attempt_at, total, rate
        """

    /// The same columns prefixed with `alias.`.
    static func columns(of alias: String) -> String {
        columns.split(separator: ",").map { "\(alias).\($0.trimmingCharacters(in: .whitespaces))" }
            .joined(separator: ", ")
    }

    /// How many columns ``columns`` names: one type each.
    static var columnCount: Int { columnTypes.count }

    /// The SQL types of ``columns``, for `unnest` of one array per column.
    static let columnTypes = [
        "text", "text", "text", "text", "int4", "text", "bytea", "text", "text", "text", "float8", "text", "float8",
        "int4", "int4", "text", "text", "bytea", "bytea", "text", "int8", "int4", "int8", "int8", "int8", "int8", "int8",
        "float8", "float8",
    ]

    static let eventColumns = "id, task_id, root_id, kind, at, attempt, progress, message, error_type"

    /// The JSON of a task's options; tasks share a few option sets, so each is encoded once.
    func encodedOptions(_ options: TaskOptions) throws -> String {
        if let cached = encodedOptionsCache.withLock({ $0[options] }) { return cached }
        let text = String(decoding: try encoder.encode(options), as: UTF8.self)
        encodedOptionsCache.withLock { cache in
            if cache.count > 64 { cache.removeAll() }
            cache[options] = text
        }
        return text
    }

    /// A task from a row of `SELECT \(columns)`.
    ///
    /// - Throws: ``TaskStoreError`` `.corrupt` naming the row when a value cannot be read (an unknown status, options
    ///   that do not decode): a row the library cannot read is never guessed.
    func record(from row: PostgresRow) throws -> TaskRecord {
        let cells = row.makeRandomAccess()
        let id = try cells[0].decode(String.self)
        func corrupt(_ what: String) -> TaskStoreError {
            TaskStoreError(.corrupt, path: location, message: "task '\(id)' cannot be read: \(what)")
        }
        func text(_ index: Int) throws -> String? { try cells[index].decode(String?.self) }
        func date(_ index: Int) throws -> Date? { try cells[index].decode(Int64?.self).map(Date.init(storedMilliseconds:)) }
        func double(_ index: Int) throws -> Double? { try cells[index].decode(Double?.self) }
        func int(_ index: Int) throws -> Int { try cells[index].decode(Int.self) }
        func bytes(_ index: Int) throws -> Data? { try cells[index].decode(ByteBuffer?.self).map { Data($0.readableBytesView) } }
        let statusText = try cells[9].decode(String.self)
        guard let status = TaskStatus(rawValue: statusText) else { throw corrupt("unknown status '\(statusText)'") }
        let options: TaskOptions
        do {
            options = try decoder.decode(TaskOptions.self, from: Data(try cells[8].decode(String.self).utf8))
        } catch {
            throw corrupt("its options do not decode (\(error))")
        }
        guard let createdAt = try date(22), let updatedAt = try date(24) else {
            throw corrupt("it has no creation or update time")
        }
        return TaskRecord(
            id: id, parentID: try text(1), rootID: try cells[2].decode(String.self), name: try cells[3].decode(String.self),
            occurrence: try int(4), kind: try text(5), input: try bytes(6), idempotencyKey: try text(7),
            options: options, status: status, progress: try double(10), step: try text(11),
            weight: try cells[12].decode(Double.self), attempt: try int(13), interruptions: try int(14),
            errorType: try text(15), errorDescription: try text(16), result: try bytes(17), checkpoint: try bytes(18),
            ownerID: try text(19), priority: try int(21), createdAt: createdAt,
            startedAt: try date(23), updatedAt: updatedAt, finishedAt: try date(25), nextAttemptAt: try date(26),
            total: try double(27), rate: try double(28))
    }

    /// An event from a row of `SELECT \(eventColumns)`.
    ///
    /// - Throws: ``TaskStoreError`` `.corrupt` naming the row for an unknown kind.
    func event(from row: PostgresRow) throws -> TaskEvent {
        let cells = row.makeRandomAccess()
        let sequence = try cells[0].decode(Int64.self)
        let kindText = try cells[3].decode(String.self)
        guard let kind = TaskEvent.Kind(rawValue: kindText) else {
            throw TaskStoreError(
                .corrupt, path: location, message: "event #\(sequence) cannot be read: unknown kind '\(kindText)'")
        }
        return TaskEvent(
            sequence: sequence, taskID: try cells[1].decode(String.self), rootID: try cells[2].decode(String.self),
            kind: kind, at: Date(storedMilliseconds: try cells[4].decode(Int64.self)),
            attempt: try cells[5].decode(Int.self), progress: try cells[6].decode(Double?.self),
            message: try cells[7].decode(String?.self), errorType: try cells[8].decode(String?.self))
    }

    var controlSelect: String {
        "SELECT id, task_id, action, owner_id, requested_at, handled_at, outcome FROM \(names.controlRequests)"
    }

    /// A control request from a row of ``controlSelect``.
    ///
    /// - Throws: ``TaskStoreError`` `.corrupt` naming the row for an unknown action (never read as another action).
    func controlRequest(from row: PostgresRow) throws -> ControlRequest {
        let cells = row.makeRandomAccess()
        let id = try cells[0].decode(Int64.self)
        let actionText = try cells[2].decode(String.self)
        guard let action = ControlRequest.Action(rawValue: actionText) else {
            throw TaskStoreError(
                .corrupt, path: location, message: "control request #\(id) cannot be read: unknown action '\(actionText)'")
        }
        return ControlRequest(
            id: id, taskID: try cells[1].decode(String.self), action: action, ownerID: try cells[3].decode(String?.self),
            requestedAt: Date(storedMilliseconds: try cells[4].decode(Int64.self)),
            handledAt: try cells[5].decode(Int64?.self).map(Date.init(storedMilliseconds:)),
            outcome: try cells[6].decode(String?.self))
    }

    /// The values of `records` as one array per column of ``columns``, bound as `$1…$29`.
    func columnArrays(_ records: [TaskRecord]) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 29)
        try appendColumnArrays(records, to: &bindings)
        return bindings
    }

    /// Appends the values of `records` as one array per column of ``columns``.
    func appendColumnArrays(_ records: [TaskRecord], to bindings: inout PostgresBindings) throws {
        func add<Element: PostgresArrayEncodable & PostgresNonThrowingEncodable>(_ values: [Element?]) {
            bindings.append(PostgresArray(values))
        }
        add(records.map { Optional($0.id) })
        add(records.map(\.parentID))
        add(records.map { Optional($0.rootID) })
        add(records.map { Optional($0.name) })
        add(records.map { Optional(Int32(clamping: $0.occurrence)) })
        add(records.map(\.kind))
        add(records.map { $0.input.map { ByteBuffer(bytes: $0) } })
        add(records.map(\.idempotencyKey))
        add(try records.map { Optional(try encodedOptions($0.options)) })
        add(records.map { Optional($0.status.rawValue) })
        add(records.map(\.progress))
        add(records.map(\.step))
        add(records.map { Optional($0.weight) })
        add(records.map { Optional(Int32(clamping: $0.attempt)) })
        add(records.map { Optional(Int32(clamping: $0.interruptions)) })
        add(records.map(\.errorType))
        add(records.map(\.errorDescription))
        add(records.map { $0.result.map { ByteBuffer(bytes: $0) } })
        add(records.map { $0.checkpoint.map { ByteBuffer(bytes: $0) } })
        add(records.map(\.ownerID))
        add(records.map { _ -> Int64? in nil })  // lease_expires_at: unused (an owner's hold is its heartbeat)
        add(records.map { Optional(Int32(clamping: $0.priority)) })
        add(records.map { Optional($0.createdAt.storedMilliseconds) })
        add(records.map { $0.startedAt?.storedMilliseconds })
        add(records.map { Optional($0.updatedAt.storedMilliseconds) })
        add(records.map { $0.finishedAt?.storedMilliseconds })
        add(records.map { $0.nextAttemptAt?.storedMilliseconds })
        add(records.map(\.total))
        add(records.map(\.rate))
    }

    /// The SQL columns of each changeable column, with their types, in the order updates bind them.
    static let columnNames: [(TaskColumns, [(name: String, type: String)])] = [
        (.status, [("status", "text")]), (.progress, [("progress", "float8")]), (.step, [("step", "text")]),
        (.weight, [("weight", "float8")]), (.attempt, [("attempt", "int4")]),
        (.interruptions, [("interruptions", "int4")]),
        (.error, [("error_type", "text"), ("error_description", "text")]), (.result, [("result", "bytea")]),
        (.checkpoint, [("checkpoint", "bytea")]), (.owner, [("owner_id", "text")]), (.priority, [("priority", "int4")]),
        (.startedAt, [("started_at", "int8")]), (.updatedAt, [("updated_at", "int8")]),
        (.finishedAt, [("finished_at", "int8")]), (.nextAttemptAt, [("next_attempt_at", "int8")]),
        (.total, [("total", "float8")]), (.rate, [("rate", "float8")]), (.options, [("options", "text")]),
    ]

    /// The statement of a narrow update of many rows: the ids as `$1`, then one array per written column; returns
    /// the ids it changed.
    func updateSQL(_ columns: TaskColumns) -> String {
        var assignments: [String] = []
        var sources: [String] = ["$1::text[]"]
        var aliases: [String] = ["id"]
        for (column, parts) in Self.columnNames where columns.contains(column) {
            for part in parts {
                sources.append("$\(sources.count + 1)::\(part.type)[]")
                aliases.append(part.name)
                assignments.append("\(part.name) = u.\(part.name)")
            }
        }
        return """
            UPDATE \(names.tasks) AS t SET \(assignments.joined(separator: ", "))
            FROM unnest(\(sources.joined(separator: ", "))) AS u(\(aliases.joined(separator: ", ")))
            WHERE t.id = u.id RETURNING t.id
            """
    }

    /// The arrays of an update made with ``updateSQL(_:)``.
    func updateArrays(_ updates: [TaskUpdate], columns: TaskColumns) throws -> PostgresBindings {
        var bindings = PostgresBindings()
        bindings.append(PostgresArray(updates.map { Optional($0.record.id) }))
        try appendUpdateArrays(updates, columns: columns, to: &bindings)
        return bindings
    }

    /// Appends one array per column of `columns` (in ``columnNames``' order) of `updates`.
    func appendUpdateArrays(_ updates: [TaskUpdate], columns: TaskColumns, to bindings: inout PostgresBindings) throws {
        func add<Element: PostgresArrayEncodable & PostgresNonThrowingEncodable>(_ values: [Element?]) {
            bindings.append(PostgresArray(values))
        }
        let records = updates.map(\.record)
        if columns.contains(.status) { add(records.map { Optional($0.status.rawValue) }) }
        if columns.contains(.progress) { add(records.map(\.progress)) }
        if columns.contains(.step) { add(records.map(\.step)) }
        if columns.contains(.weight) { add(records.map { Optional($0.weight) }) }
        if columns.contains(.attempt) { add(records.map { Optional(Int32(clamping: $0.attempt)) }) }
        if columns.contains(.interruptions) { add(records.map { Optional(Int32(clamping: $0.interruptions)) }) }
        if columns.contains(.error) {
            add(records.map(\.errorType))
            add(records.map(\.errorDescription))
        }
        if columns.contains(.result) { add(records.map { $0.result.map { ByteBuffer(bytes: $0) } }) }
        if columns.contains(.checkpoint) { add(records.map { $0.checkpoint.map { ByteBuffer(bytes: $0) } }) }
        if columns.contains(.owner) { add(records.map(\.ownerID)) }
        if columns.contains(.priority) { add(records.map { Optional(Int32(clamping: $0.priority)) }) }
        if columns.contains(.startedAt) { add(records.map { $0.startedAt?.storedMilliseconds }) }
        if columns.contains(.updatedAt) { add(records.map { Optional($0.updatedAt.storedMilliseconds) }) }
        if columns.contains(.finishedAt) { add(records.map { $0.finishedAt?.storedMilliseconds }) }
        if columns.contains(.nextAttemptAt) { add(records.map { $0.nextAttemptAt?.storedMilliseconds }) }
        if columns.contains(.total) { add(records.map(\.total)) }
        if columns.contains(.rate) { add(records.map(\.rate)) }
        if columns.contains(.options) { add(try records.map { Optional(try encodedOptions($0.options)) }) }
    }

    /// Appends events (one statement for all). The transaction takes its id before the events' numbers (the filter
    /// is evaluated before each row's number is drawn): a reader of the history knows, from the ids of the transactions
    /// running, when a number missing from what it read can no longer appear (``RootOutcomeCursor``).
    func insertEvents(_ events: [TaskEvent], connection: PostgresConnection) async throws {
        guard !events.isEmpty else { return }
        var bindings = PostgresBindings(capacity: 8)
        bindings.append(PostgresArray(events.map { Optional($0.taskID) }))
        bindings.append(PostgresArray(events.map { Optional($0.rootID) }))
        bindings.append(PostgresArray(events.map { Optional($0.kind.rawValue) }))
        bindings.append(PostgresArray(events.map { Optional($0.at.storedMilliseconds) }))
        bindings.append(PostgresArray(events.map { Optional(Int32(clamping: $0.attempt)) }))
        bindings.append(PostgresArray(events.map(\.progress)))
        bindings.append(PostgresArray(events.map(\.message)))
        bindings.append(PostgresArray(events.map(\.errorType)))
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO \(names.events) (task_id, root_id, kind, at, attempt, progress, message, error_type)
                    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int4[], $6::float8[],
                      $7::text[], $8::text[])
                    WHERE pg_current_xact_id() IS NOT NULL
                    """, binds: bindings),
            logger: logger)
    }

    /// The node `id` and its subtree, in tree order; empty when it does not exist. With `lock`, the root's row is
    /// locked first (`FOR UPDATE`), so that no batch, claim or other change of the tree runs until the transaction
    /// ends.
    func subtree(of id: String, connection: PostgresConnection, lock: Bool = false) async throws -> [TaskRecord] {
        let select = "SELECT \(Self.columns) FROM \(names.tasks)"
        guard lock else {
            // One statement, so one snapshot and one round trip: the root by its key, its subtasks by the index of
            // subtasks by root.
            let tree = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        WITH tree AS (SELECT root_id FROM \(names.tasks) WHERE id = $1)
                        \(select) WHERE id = (SELECT root_id FROM tree)
                        UNION ALL
                        \(select) WHERE root_id = (SELECT root_id FROM tree) AND parent_id IS NOT NULL
                        """, binds: bindings(id)),
                logger: logger
            ).collect().map { try record(from: $0) }
            return TaskTreeOrder.subtree(of: id, in: tree)
        }
        // In a write: the root locked first (found through the node's root_id), then its subtasks read.
        var all = try await connection.query(
            PostgresQuery(
                unsafeSQL: "\(select) WHERE id = (SELECT root_id FROM \(names.tasks) WHERE id = $1) FOR UPDATE",
                binds: bindings(id)),
            logger: logger
        ).collect().map { try record(from: $0) }
        guard let root = all.first else { return [] }
        all += try await connection.query(
            PostgresQuery(unsafeSQL: "\(select) WHERE root_id = $1 AND parent_id IS NOT NULL", binds: bindings(root.id)),
            logger: logger
        ).collect().map { try record(from: $0) }
        return TaskTreeOrder.subtree(of: id, in: all)
    }

    /// Rows of `query`, decoded.
    func rows<T>(
        _ sql: String, _ bindings: PostgresBindings = PostgresBindings(), connection: PostgresConnection,
        _ decode: (PostgresRow) throws -> T
    ) async throws -> [T] {
        try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger).collect().map(decode)
    }
}

/// Parameters of a statement, in order; `nil` is NULL.
func bindings(_ values: (any PostgresDynamicTypeEncodable)?...) -> PostgresBindings {
    var bindings = PostgresBindings(capacity: values.count)
    for value in values {
        if let value { bindings.append(value) } else { bindings.appendNull() }
    }
    return bindings
}

/// A one-dimensional array parameter whose elements may be NULL (postgres-nio's own arrays cannot hold NULL):
/// PostgreSQL's binary array format with the has-null flag, an element of length -1 for each NULL.
struct PostgresArray<Element: PostgresArrayEncodable & PostgresNonThrowingEncodable>: PostgresDynamicTypeEncodable {
    var elements: [Element?]

    init(_ elements: [Element?]) {
        self.elements = elements
    }

    var psqlType: PostgresDataType { Element.psqlArrayType }
    var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(
        into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>
    ) {
        buffer.writeInteger(elements.isEmpty ? 0 : 1, as: Int32.self)  // dimensions
        buffer.writeInteger(elements.contains { $0 == nil } ? 1 : 0, as: Int32.self)  // has NULLs
        buffer.writeInteger(Element.psqlType.rawValue)  // element type
        guard !elements.isEmpty else { return }
        buffer.writeInteger(Int32(elements.count))  // length of the dimension
        buffer.writeInteger(1, as: Int32.self)  // its lower bound
        for element in elements {
            guard let element else {
                buffer.writeInteger(-1, as: Int32.self)
                continue
            }
            let start = buffer.writerIndex
            buffer.writeInteger(0, as: Int32.self)
            element.encode(into: &buffer, context: context)
            buffer.setInteger(Int32(buffer.writerIndex - start - 4), at: start)
        }
    }
}
#endif
