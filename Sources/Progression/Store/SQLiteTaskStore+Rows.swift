import Foundation
import ProgressionSQLite

/// How rows of `tasks`, `events` and `control_requests` map to records: columns by position in one fixed list, bound
/// without building intermediate arrays on the hot paths (the writer's inserts, updates and events).
extension SQLiteTaskStore {
    static let columns = TaskTableColumn.selectList

    static let insertSQL = "INSERT INTO tasks (\(columns)) VALUES (\(placeholders(TaskTableColumn.allCases.count)))"

    static let eventColumns = "id, task_id, root_id, kind, at, attempt, progress, message, error_type"

    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    /// The text and values of `IN (…)` over `ids` (at most 512), its length rounded up to a power of two (at least 8)
    /// with NULLs, which match nothing: a statement is prepared once per length kept by the connection, so a list of
    /// each length a batch happens to have would each stay prepared (`NOT IN` must not use it: a NULL there matches
    /// nothing either way).
    static func idList(_ ids: some Collection<String>) -> (sql: String, values: [SQLiteValue]) {
        precondition(ids.count <= 512, "at most 512 ids a list")
        var length = 8
        while length < ids.count { length *= 2 }
        let values = ids.map { SQLiteValue.text($0) } + Array(repeating: SQLiteValue.null, count: length - ids.count)
        return ("(\(placeholders(length)))", values)
    }

    /// The JSON of a task's options; tasks share a few option sets, so each is encoded once.
    func encodedOptions(_ options: TaskOptions) throws -> String {
        if let cached = encodedOptions[options] { return cached }
        let text = String(decoding: try encoder.encode(options), as: UTF8.self)
        if encodedOptions.count > 64 { encodedOptions.removeAll() }
        encodedOptions[options] = text
        return text
    }

    /// Binds a record to the parameters of ``insertSQL``, one per column.
    func bindInsert(_ task: TaskRecord, to statement: SQLiteStatement) throws {
        for column in TaskTableColumn.allCases {
            let value = try column.value(of: task) { try encodedOptions($0) }
            try statement.bind(value, at: Int32(column.rawValue + 1))
        }
    }

    /// What a narrow update checks of the row it writes, besides its id (``BatchFence/RowCondition``).
    enum UpdateGuard: UInt8 {
        /// Nothing.
        case none
        /// The owner it must have (a root's row): parameter n + 2.
        case owner
        /// No owner, and the status it must have (a job queued unowned that any worker may claim): n + 2.
        case unowned
    }

    /// The SQL of a narrow update: the columns of `columns` as parameters 1…n, the id as n + 1, and what the guard
    /// checks as n + 2.
    static func updateSQL(_ columns: TaskColumns, guard rowGuard: UpdateGuard) -> String {
        var assignments: [String] = []
        for column in TaskTableColumn.written(by: columns) {
            assignments.append("\(column.name) = ?\(assignments.count + 1)")
        }
        let id = assignments.count + 1
        let condition =
            switch rowGuard {
            case .none: ""
            case .owner: " AND owner_id IS ?\(id + 1)"
            case .unowned: " AND owner_id IS NULL AND status = ?\(id + 1)"
            }
        return "UPDATE tasks SET \(assignments.joined(separator: ", ")) WHERE id = ?\(id)" + condition
    }

    /// Binds the values of an update made with ``updateSQL(_:guard:)``; returns the next parameter index.
    @discardableResult
    func bindUpdate(_ update: TaskUpdate, to statement: SQLiteStatement) throws -> Int32 {
        var index: Int32 = 1
        for column in TaskTableColumn.written(by: update.columns) {
            try statement.bind(try column.value(of: update.record) { try encodedOptions($0) }, at: index)
            index += 1
        }
        try statement.bind(update.record.id, at: index)
        return index + 1
    }

    /// A task from a row of `SELECT \(columns)`; the options' JSON is decoded once per distinct text.
    ///
    /// - Throws: ``TaskStoreError`` `.corrupt` naming the row when a value cannot be read.
    func record(from row: SQLiteStatement) throws -> TaskRecord {
        try TaskRecord(row: row, location: path) { text in
            if let cached = decodedOptions[text] { return cached }
            let options = try decoder.decode(TaskOptions.self, from: Data(text.utf8))
            if decodedOptions.count > 64 { decodedOptions.removeAll() }
            decodedOptions[text] = options
            return options
        }
    }

    /// An event from a row of `SELECT \(eventColumns)`.
    ///
    /// - Throws: ``TaskStoreError`` `.corrupt` naming the row for an unknown kind.
    func event(from row: SQLiteStatement) throws -> TaskEvent {
        let sequence = row.int64(at: 0)
        guard let kind = TaskEvent.Kind(rawValue: row.text(at: 3)) else {
            throw TaskStoreError(
                .corrupt, path: path, message: "event #\(sequence) cannot be read: unknown kind '\(row.text(at: 3))'")
        }
        return TaskEvent(
            sequence: sequence, taskID: row.text(at: 1), rootID: row.text(at: 2), kind: kind,
            at: Date(storedMilliseconds: row.int64(at: 4)), attempt: Int(row.int64(at: 5)),
            progress: row.optionalDouble(at: 6), message: row.optionalText(at: 7), errorType: row.optionalText(at: 8))
    }

    static let controlSelect =
        "SELECT id, task_id, action, owner_id, requested_at, handled_at, outcome FROM control_requests"

    /// A control request from a row of ``controlSelect``.
    ///
    /// - Throws: ``TaskStoreError`` `.corrupt` naming the row for an unknown action (never read as another action).
    func controlRequest(from row: SQLiteStatement) throws -> ControlRequest {
        let id = row.int64(at: 0)
        guard let action = ControlRequest.Action(rawValue: row.text(at: 2)) else {
            throw TaskStoreError(
                .corrupt, path: path,
                message: "control request #\(id) cannot be read: unknown action '\(row.text(at: 2))'")
        }
        return ControlRequest(
            id: id, taskID: row.text(at: 1), action: action, ownerID: row.optionalText(at: 3),
            requestedAt: Date(storedMilliseconds: row.int64(at: 4)),
            handledAt: row.optionalInt64(at: 5).map(Date.init(storedMilliseconds:)), outcome: row.optionalText(at: 6))
    }

    func insertEvents(_ events: [TaskEvent], connection: SQLiteConnection) throws {
        // Several rows a statement (16, 4, then 1 at a time), in order: a batch's events were one statement each, 3 of
        // the 7 statements of a job (callgrind, docs/performance.md).
        var rest = events[...]
        while !rest.isEmpty {
            // The last statement inserts one row: some statement always fits.
            let rows =
                Self.eventInserts.first { $0.rows <= rest.count } ?? Self.eventInserts[Self.eventInserts.count - 1]
            let insert = try connection.cachedStatement(rows.sql)
            defer { insert.reset() }
            var column: Int32 = 0
            for event in rest.prefix(rows.rows) {
                try insert.bind(event.taskID, at: column + 1)
                try insert.bind(event.rootID, at: column + 2)
                try insert.bind(event.kind.rawValue, at: column + 3)
                try insert.bind(event.at.storedMilliseconds, at: column + 4)
                try insert.bind(Int64(event.attempt), at: column + 5)
                try insert.bindOptional(event.progress, at: column + 6)
                try insert.bindOptional(event.message, at: column + 7)
                try insert.bindOptional(event.errorType, at: column + 8)
                column += 8
            }
            try insert.step()
            rest = rest.dropFirst(rows.rows)
        }
    }

    /// The statements that insert events, largest first: `rows` rows of 8 values each.
    static let eventInserts: [(rows: Int, sql: String)] = [16, 4, 1].map { rows in
        (
            rows,
            "INSERT INTO events (task_id, root_id, kind, at, attempt, progress, message, error_type) VALUES "
                + Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?)", count: rows).joined(separator: ", ")
        )
    }

    /// The node `id` and its subtree, in tree order; empty when it does not exist.
    func subtree(of id: String, connection: SQLiteConnection) throws -> [TaskRecord] {
        guard let rootID = try connection.scalarText("SELECT root_id FROM tasks WHERE id = ?", [.text(id)]) else {
            return []
        }
        let select = "SELECT \(Self.columns) FROM tasks"
        var all = try connection.query("\(select) WHERE id = ?", [.text(rootID)]) { try record(from: $0) }
        all += try connection.query("\(select) WHERE root_id = ? AND parent_id IS NOT NULL", [.text(rootID)]) {
            try record(from: $0)
        }
        return TaskTreeOrder.subtree(of: id, in: all)
    }
}

/// Orders the nodes of one tree: parents before children, siblings by creation time, then name and occurrence.
package enum TaskTreeOrder {
    package static func subtree(of id: String, in nodes: [TaskRecord]) -> [TaskRecord] {
        var children: [String: [TaskRecord]] = [:]
        var top: TaskRecord?
        for node in nodes {
            if node.id == id { top = node }
            if let parent = node.parentID { children[parent, default: []].append(node) }
        }
        guard let top else { return [] }
        var ordered: [TaskRecord] = []
        var stack = [top]
        while let node = stack.popLast() {
            ordered.append(node)
            let siblings = (children[node.id] ?? []).sorted {
                ($0.createdAt, $0.name, $0.occurrence, $0.id) < ($1.createdAt, $1.name, $1.occurrence, $1.id)
            }
            stack.append(contentsOf: siblings.reversed())
        }
        return ordered
    }
}

extension SQLiteStatement: TaskRowCells {
    package func textCell(at index: Int) -> String? { optionalText(at: Int32(index)) }
    package func integerCell(at index: Int) -> Int64? { optionalInt64(at: Int32(index)) }
    package func realCell(at index: Int) -> Double? { optionalDouble(at: Int32(index)) }
    package func blobCell(at index: Int) -> Data? { optionalBlob(at: Int32(index)).map { Data($0) } }

    func bind(_ value: StoredValue, at index: Int32) throws {
        switch value {
        case .null: try bindNull(at: index)
        case .integer(let value): try bind(value, at: index)
        case .real(let value): try bind(value, at: index)
        case .text(let value): try bind(value, at: index)
        case .blob(let value): try bind([UInt8](value), at: index)
        }
    }

    func bindOptional(_ value: String?, at index: Int32) throws {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    func bindOptional(_ value: Double?, at index: Int32) throws {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

}
