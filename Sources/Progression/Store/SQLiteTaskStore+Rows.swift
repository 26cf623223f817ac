import Foundation
import ProgressionSQLite

/// How rows of `tasks`, `events` and `control_requests` map to records: columns by position in one fixed list, bound
/// without building intermediate arrays on the hot paths (the writer's inserts, updates and events).
extension SQLiteTaskStore {
    static let columns = """
        id, parent_id, root_id, name, occurrence, kind, input, idempotency_key, options, status, progress, step, \
        weight, attempt, interruptions, error_type, error_description, result, checkpoint, owner_id, \
        lease_expires_at, priority, created_at, started_at, updated_at, finished_at, next_attempt_at, total, rate
        """

    static let insertSQL = "INSERT INTO tasks (\(columns)) VALUES (\(placeholders(29)))"

    static let eventColumns = "id, task_id, root_id, kind, at, attempt, progress, message, error_type"

    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    /// The JSON of a task's options; tasks share a few option sets, so each is encoded once.
    func encodedOptions(_ options: TaskOptions) throws -> String {
        if let cached = encodedOptions[options] { return cached }
        let text = String(decoding: try encoder.encode(options), as: UTF8.self)
        if encodedOptions.count > 64 { encodedOptions.removeAll() }
        encodedOptions[options] = text
        return text
    }

    /// Binds a record to the 29 parameters of ``insertSQL``.
    func bindInsert(_ task: TaskRecord, to statement: SQLiteStatement) throws {
        try statement.bind(task.id, at: 1)
        try statement.bindOptional(task.parentID, at: 2)
        try statement.bind(task.rootID, at: 3)
        try statement.bind(task.name, at: 4)
        try statement.bind(Int64(task.occurrence), at: 5)
        try statement.bindOptional(task.kind, at: 6)
        try statement.bindOptional(task.input, at: 7)
        try statement.bindOptional(task.idempotencyKey, at: 8)
        try statement.bind(try encodedOptions(task.options), at: 9)
        try statement.bind(task.status.rawValue, at: 10)
        try statement.bindOptional(task.progress, at: 11)
        try statement.bindOptional(task.step, at: 12)
        try statement.bind(task.weight, at: 13)
        try statement.bind(Int64(task.attempt), at: 14)
        try statement.bind(Int64(task.interruptions), at: 15)
        try statement.bindOptional(task.errorType, at: 16)
        try statement.bindOptional(task.errorDescription, at: 17)
        try statement.bindOptional(task.result, at: 18)
        try statement.bindOptional(task.checkpoint, at: 19)
        try statement.bindOptional(task.ownerID, at: 20)
        try statement.bindNull(at: 21)  // lease_expires_at: unused (an owner's hold is its heartbeat)
        try statement.bind(Int64(task.priority), at: 22)
        try statement.bind(task.createdAt.storedMilliseconds, at: 23)
        try statement.bindOptional(task.startedAt, at: 24)
        try statement.bind(task.updatedAt.storedMilliseconds, at: 25)
        try statement.bindOptional(task.finishedAt, at: 26)
        try statement.bindOptional(task.nextAttemptAt, at: 27)
        try statement.bindOptional(task.total, at: 28)
        try statement.bindOptional(task.rate, at: 29)
    }

    /// What a narrow update checks of the row it writes, besides its id.
    enum UpdateGuard: UInt8 {
        /// Nothing.
        case none
        /// The owner it must have (a root's row, fenced): parameter n + 2.
        case owner
        /// No owner, and the status it must have (a job queued in memory that any worker may claim): n + 2.
        case unowned
    }

    /// The SQL of a narrow update: the columns of `columns` as parameters 1…n, the id as n + 1, and what the guard
    /// checks as n + 2.
    static func updateSQL(_ columns: TaskColumns, guard rowGuard: UpdateGuard) -> String {
        var assignments: [String] = []
        for (column, names) in columnNames where columns.contains(column) {
            for name in names { assignments.append("\(name) = ?\(assignments.count + 1)") }
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

    /// The SQL columns of each changeable column, in the order updates bind them.
    static let columnNames: [(TaskColumns, [String])] = [
        (.status, ["status"]), (.progress, ["progress"]), (.step, ["step"]), (.weight, ["weight"]),
        (.attempt, ["attempt"]), (.interruptions, ["interruptions"]), (.error, ["error_type", "error_description"]),
        (.result, ["result"]), (.checkpoint, ["checkpoint"]), (.owner, ["owner_id"]), (.priority, ["priority"]),
        (.startedAt, ["started_at"]), (.updatedAt, ["updated_at"]), (.finishedAt, ["finished_at"]),
        (.nextAttemptAt, ["next_attempt_at"]), (.total, ["total"]), (.rate, ["rate"]), (.options, ["options"]),
    ]

    /// Binds the values of an update made with ``updateSQL(_:guarded:)``; returns the next parameter index.
    @discardableResult
    func bindUpdate(_ update: TaskUpdate, to statement: SQLiteStatement) throws -> Int32 {
        let task = update.record
        let columns = update.columns
        var index: Int32 = 1
        func next() -> Int32 {
            defer { index += 1 }
            return index
        }
        if columns.contains(.status) { try statement.bind(task.status.rawValue, at: next()) }
        if columns.contains(.progress) { try statement.bindOptional(task.progress, at: next()) }
        if columns.contains(.step) { try statement.bindOptional(task.step, at: next()) }
        if columns.contains(.weight) { try statement.bind(task.weight, at: next()) }
        if columns.contains(.attempt) { try statement.bind(Int64(task.attempt), at: next()) }
        if columns.contains(.interruptions) { try statement.bind(Int64(task.interruptions), at: next()) }
        if columns.contains(.error) {
            try statement.bindOptional(task.errorType, at: next())
            try statement.bindOptional(task.errorDescription, at: next())
        }
        if columns.contains(.result) { try statement.bindOptional(task.result, at: next()) }
        if columns.contains(.checkpoint) { try statement.bindOptional(task.checkpoint, at: next()) }
        if columns.contains(.owner) { try statement.bindOptional(task.ownerID, at: next()) }
        if columns.contains(.priority) { try statement.bind(Int64(task.priority), at: next()) }
        if columns.contains(.startedAt) { try statement.bindOptional(task.startedAt, at: next()) }
        if columns.contains(.updatedAt) { try statement.bind(task.updatedAt.storedMilliseconds, at: next()) }
        if columns.contains(.finishedAt) { try statement.bindOptional(task.finishedAt, at: next()) }
        if columns.contains(.nextAttemptAt) { try statement.bindOptional(task.nextAttemptAt, at: next()) }
        if columns.contains(.total) { try statement.bindOptional(task.total, at: next()) }
        if columns.contains(.rate) { try statement.bindOptional(task.rate, at: next()) }
        if columns.contains(.options) { try statement.bind(try encodedOptions(task.options), at: next()) }
        try statement.bind(task.id, at: next())
        return index
    }

    /// A task from a row of `SELECT \(columns)`.
    ///
    /// - Throws: ``TaskStoreError`` `.corrupt` naming the row when a value cannot be read (an unknown status, options
    ///   that do not decode): a row the library cannot read is never guessed.
    func record(from row: SQLiteStatement) throws -> TaskRecord {
        let id = row.text(at: 0)
        func corrupt(_ what: String) -> TaskStoreError {
            TaskStoreError(.corrupt, path: path, message: "task '\(id)' cannot be read: \(what)")
        }
        func date(_ index: Int32) -> Date? { row.optionalInt64(at: index).map(Date.init(storedMilliseconds:)) }
        guard let status = TaskStatus(rawValue: row.text(at: 9)) else {
            throw corrupt("unknown status '\(row.text(at: 9))'")
        }
        let options: TaskOptions
        let optionsText = row.text(at: 8)
        if let cached = decodedOptions[optionsText] {
            options = cached
        } else {
            do {
                options = try decoder.decode(TaskOptions.self, from: Data(optionsText.utf8))
            } catch {
                throw corrupt("its options do not decode (\(error))")
            }
            if decodedOptions.count > 64 { decodedOptions.removeAll() }
            decodedOptions[optionsText] = options
        }
        guard let createdAt = date(22), let updatedAt = date(24) else {
            throw corrupt("it has no creation or update time")
        }
        return TaskRecord(
            id: id, parentID: row.optionalText(at: 1), rootID: row.text(at: 2), name: row.text(at: 3),
            occurrence: Int(row.int64(at: 4)), kind: row.optionalText(at: 5),
            input: row.optionalBlob(at: 6).map { Data($0) }, idempotencyKey: row.optionalText(at: 7),
            options: options, status: status, progress: row.optionalDouble(at: 10), step: row.optionalText(at: 11),
            weight: row.double(at: 12), attempt: Int(row.int64(at: 13)), interruptions: Int(row.int64(at: 14)),
            errorType: row.optionalText(at: 15), errorDescription: row.optionalText(at: 16),
            result: row.optionalBlob(at: 17).map { Data($0) }, checkpoint: row.optionalBlob(at: 18).map { Data($0) },
            ownerID: row.optionalText(at: 19), priority: Int(row.int64(at: 21)),
            createdAt: createdAt, startedAt: date(23), updatedAt: updatedAt, finishedAt: date(25),
            nextAttemptAt: date(26), total: row.optionalDouble(at: 27), rate: row.optionalDouble(at: 28))
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
        guard !events.isEmpty else { return }
        let insert = try connection.cachedStatement(
            """
            INSERT INTO events (task_id, root_id, kind, at, attempt, progress, message, error_type)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """)
        for event in events {
            defer { insert.reset() }
            try insert.bind(event.taskID, at: 1)
            try insert.bind(event.rootID, at: 2)
            try insert.bind(event.kind.rawValue, at: 3)
            try insert.bind(event.at.storedMilliseconds, at: 4)
            try insert.bind(Int64(event.attempt), at: 5)
            try insert.bindOptional(event.progress, at: 6)
            try insert.bindOptional(event.message, at: 7)
            try insert.bindOptional(event.errorType, at: 8)
            try insert.step()
        }
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

extension SQLiteStatement {
    func bindOptional(_ value: String?, at index: Int32) throws {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    func bindOptional(_ value: Double?, at index: Int32) throws {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    func bindOptional(_ value: Data?, at index: Int32) throws {
        if let value { try bind([UInt8](value), at: index) } else { try bindNull(at: index) }
    }

    func bindOptional(_ value: Date?, at index: Int32) throws {
        if let value { try bind(value.storedMilliseconds, at: index) } else { try bindNull(at: index) }
    }
}
