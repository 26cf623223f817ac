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
    static let columns = TaskTableColumn.selectList

    /// The same columns prefixed with `alias.`.
    static func columns(of alias: String) -> String { TaskTableColumn.selectList(of: alias) }

    /// How many columns ``columns`` names.
    static var columnCount: Int { TaskTableColumn.allCases.count }

    /// The SQL types of ``columns``, for `unnest` of one array per column.
    static let columnTypes = TaskTableColumn.allCases.map(\.type.rawValue)

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
    /// - Throws: ``TaskStoreError`` `.corrupt` naming the row when a value cannot be read.
    func record(from row: PostgresRow) throws -> TaskRecord {
        try TaskRecord(row: PostgresTaskRow(cells: row.makeRandomAccess()), location: location) { text in
            try decoder.decode(TaskOptions.self, from: Data(text.utf8))
        }
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

    /// The values of `records` as one array per column of ``columns``, bound as `$1…$n`.
    func columnArrays(_ records: [TaskRecord]) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: Self.columnCount)
        try appendColumnArrays(records, to: &bindings)
        return bindings
    }

    /// Appends the values of `records` as one array per column of ``columns``.
    func appendColumnArrays(_ records: [TaskRecord], to bindings: inout PostgresBindings) throws {
        for column in TaskTableColumn.allCases {
            try appendArray(of: column, records, to: &bindings)
        }
    }

    /// Appends one array of `column`'s values in `records`, of the column's type.
    func appendArray(
        of column: TaskTableColumn, _ records: some Collection<TaskRecord>, to bindings: inout PostgresBindings
    ) throws {
        let values = try records.map { try column.value(of: $0) { try encodedOptions($0) } }
        switch column.type {
        case .text:
            bindings.append(PostgresArray(values.map { if case .text(let text) = $0 { text } else { nil } }))
        case .int4:
            bindings.append(
                PostgresArray(values.map { if case .integer(let value) = $0 { Int32(clamping: value) } else { nil } }))
        case .int8:
            bindings.append(PostgresArray(values.map { if case .integer(let value) = $0 { value } else { nil } }))
        case .float8:
            bindings.append(PostgresArray(values.map { if case .real(let value) = $0 { value } else { nil } }))
        case .bytea:
            bindings.append(
                PostgresArray(values.map { if case .blob(let data) = $0 { ByteBuffer(bytes: data) } else { nil } }))
        }
    }

    /// The statement of a narrow update of many rows: the ids as `$1`, then one array per written column; returns
    /// the ids it changed. `condition`: on the rows it changes, besides their ids (`t` the table's row).
    func updateSQL(_ columns: TaskColumns, condition: String? = nil) -> String {
        var assignments: [String] = []
        var sources: [String] = ["$1::text[]"]
        var aliases: [String] = ["id"]
        for column in TaskTableColumn.written(by: columns) {
            sources.append("$\(sources.count + 1)::\(column.type.rawValue)[]")
            aliases.append(column.name)
            assignments.append("\(column.name) = u.\(column.name)")
        }
        return """
            UPDATE \(names.tasks) AS t SET \(assignments.joined(separator: ", "))
            FROM unnest(\(sources.joined(separator: ", "))) AS u(\(aliases.joined(separator: ", ")))
            WHERE t.id = u.id\(condition.map { " AND " + $0 } ?? "") RETURNING t.id
            """
    }

    /// The arrays of an update made with ``updateSQL(_:)``.
    func updateArrays(_ updates: [TaskUpdate], columns: TaskColumns) throws -> PostgresBindings {
        var bindings = PostgresBindings()
        bindings.append(PostgresArray(updates.map { Optional($0.record.id) }))
        try appendUpdateArrays(updates, columns: columns, to: &bindings)
        return bindings
    }

    /// Appends one array per column of `columns` (in ``TaskTableColumn/written(by:)``'s order) of `updates`.
    func appendUpdateArrays(_ updates: [TaskUpdate], columns: TaskColumns, to bindings: inout PostgresBindings) throws {
        let records = updates.lazy.map(\.record)
        for column in TaskTableColumn.written(by: columns) {
            try appendArray(of: column, records, to: &bindings)
        }
    }

    /// Appends events (one statement for all). The transaction takes its id before the events' numbers (the filter
    /// is evaluated before each row's number is drawn): a reader of the history knows, from the ids of the transactions
    /// running, when a number missing from what it read can no longer appear (``RootOutcomeCursor``).
    func insertEvents(_ events: [TaskEvent], connection: PostgresConnection) async throws {
        guard !events.isEmpty else { return }
        var bindings = PostgresBindings(capacity: 8)
        Self.appendEventArrays(events, to: &bindings)
        try await connection.query(
            PostgresQuery(unsafeSQL: Self.insertEventsSQL(into: names.events, from: 1), binds: bindings), logger: logger)
    }

    /// Appends the eight column arrays of `events`, in the order ``insertEventsSQL(into:from:)`` reads them.
    static func appendEventArrays(_ events: [TaskEvent], to bindings: inout PostgresBindings) {
        bindings.append(PostgresArray(events.map { Optional($0.taskID) }))
        bindings.append(PostgresArray(events.map { Optional($0.rootID) }))
        bindings.append(PostgresArray(events.map { Optional($0.kind.rawValue) }))
        bindings.append(PostgresArray(events.map { Optional($0.at.storedMilliseconds) }))
        bindings.append(PostgresArray(events.map { Optional(Int32(clamping: $0.attempt)) }))
        bindings.append(PostgresArray(events.map(\.progress)))
        bindings.append(PostgresArray(events.map(\.message)))
        bindings.append(PostgresArray(events.map(\.errorType)))
    }

    /// The statement inserting the events of the eight column arrays from parameter `$first` on. `condition`: on the
    /// events it keeps (`e` the event, with the table's column names).
    static func insertEventsSQL(into table: String, from first: Int, condition: String? = nil) -> String {
        let p = (first..<first + 8).map { "$\($0)" }
        return """
            INSERT INTO \(table) (task_id, root_id, kind, at, attempt, progress, message, error_type)
            SELECT * FROM unnest(\(p[0])::text[], \(p[1])::text[], \(p[2])::text[], \(p[3])::int8[], \(p[4])::int4[],
              \(p[5])::float8[], \(p[6])::text[], \(p[7])::text[])
              AS e(task_id, root_id, kind, at, attempt, progress, message, error_type)
            WHERE pg_current_xact_id() IS NOT NULL\(condition.map { " AND " + $0 } ?? "")
            """
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

    /// Rows of `query`, decoded, through a statement kept prepared on the connection (``PreparedSQL``): for the
    /// statements of a job's way, whose texts are few.
    func rows<T>(
        prepared sql: String, _ bindings: PostgresBindings = PostgresBindings(), connection: PostgresConnection,
        _ decode: (PostgresRow) throws -> T
    ) async throws -> [T] {
        try await PreparedSQL.run(sql, bindings, connection: connection, logger: logger).map(decode)
    }

    /// Rows of `query`, decoded, through a prepared statement when `prepares` (``rows(prepared:_:connection:_:)``),
    /// unnamed otherwise.
    func rows<T>(
        preparedIf prepares: Bool, _ sql: String, _ bindings: PostgresBindings, connection: PostgresConnection,
        _ decode: (PostgresRow) throws -> T
    ) async throws -> [T] {
        prepares
            ? try await rows(prepared: sql, bindings, connection: connection, decode)
            : try await rows(sql, bindings, connection: connection, decode)
    }
}

/// A row of `tasks` read by position, as ``TaskRecord/init(row:location:decodeOptions:)`` reads it.
struct PostgresTaskRow: TaskRowCells {
    let cells: PostgresRandomAccessRow

    func textCell(at index: Int) throws -> String? { try cells[index].decode(String?.self) }
    func integerCell(at index: Int) throws -> Int64? { try cells[index].decode(Int64?.self) }
    func realCell(at index: Int) throws -> Double? { try cells[index].decode(Double?.self) }
    func blobCell(at index: Int) throws -> Data? {
        try cells[index].decode(ByteBuffer?.self).map { Data($0.readableBytesView) }
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
