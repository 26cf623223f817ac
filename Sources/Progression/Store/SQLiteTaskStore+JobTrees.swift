import Foundation
import ProgressionSQLite

/// Job trees: dependencies, signals, and the tree keeper's queue (migration 0005).
extension SQLiteTaskStore {
    // MARK: The tree keeper's queue

    /// Queues the tree keeper's work of a batch written in the open transaction (``TaskBatch/impliedTreeChanges``):
    /// the dependents of the roots it finished are looked for here.
    func queueTreeChanges(of batch: TaskBatch, written: (String) -> Bool, at now: Date, connection: SQLiteConnection)
        throws
    {
        var (changes, finished) = batch.impliedTreeChanges(written: written)
        if !finished.isEmpty {
            let probe = try connection.cachedStatement("SELECT 1 FROM job_dependencies WHERE depends_on = ? LIMIT 1")
            for id in finished {
                defer { probe.reset() }
                try probe.bind(id, at: 1)
                if try probe.step() { changes.append(TreeChange(id, .dependents)) }
            }
        }
        try queue(changes, at: now, connection: connection)
    }

    func queue(_ changes: [TreeChange], at now: Date, connection: SQLiteConnection) throws {
        guard !changes.isEmpty else { return }
        let insert = try connection.cachedStatement(
            """
            INSERT INTO tree_changes (task_id, action, queued_at) VALUES (?, ?, ?)
            ON CONFLICT (task_id, action) DO UPDATE SET version = version + 1
            """)
        for change in changes {
            defer { insert.reset() }
            try insert.bind(change.taskID, at: 1)
            try insert.bind(change.action.rawValue, at: 2)
            try insert.bind(now.storedMilliseconds, at: 3)
            try insert.step()
        }
    }

    package func resolveJobTrees(at now: Date, limit: Int) async throws -> Int {
        try await write { connection in
            let changes = try connection.query(
                "SELECT task_id, action FROM tree_changes ORDER BY queued_at, task_id, action LIMIT ?",
                [.integer(Int64(max(1, limit)))]
            ) { row -> TreeChange? in
                TreeChange.Action(rawValue: row.text(at: 1)).map { TreeChange(row.text(at: 0), $0) }
            }.compactMap { $0 }
            guard !changes.isEmpty else { return 0 }
            let reader = SQLiteJobTreeReader(connection: connection, path: path)
            let plan = try JobTreeKeeper.plan(changes, reader: reader, now: now)
            // Taken first: what the plan's writes queue again (a child it cancels) stays queued.
            let delete = try connection.cachedStatement("DELETE FROM tree_changes WHERE task_id = ? AND action = ?")
            for change in changes {
                defer { delete.reset() }
                try delete.bind(change.taskID, at: 1)
                try delete.bind(change.action.rawValue, at: 2)
                try delete.step()
            }
            _ = try apply(plan.batch, connection: connection, at: now)
            return changes.count
        }
    }

    // MARK: Dependencies

    package func insert(_ tasks: [TaskRecord], events: [TaskEvent], dependencies: [JobDependency]) async throws {
        try await write { connection in
            try insert(tasks, events: events, connection: connection)
            guard !dependencies.isEmpty else { return }
            let new = Set(tasks.map(\.id))
            let others = Array(Set(dependencies.map(\.dependsOn)).subtracting(new)).sorted()
            var found: [String: Bool] = [:]
            for chunk in others.chunked(500) {
                let (list, ids) = Self.idList(chunk)
                for (id, isRoot) in try connection.query(
                    "SELECT id, parent_id IS NULL FROM tasks WHERE id IN \(list)", ids,
                    { ($0.text(at: 0), $0.int64(at: 1) != 0) })
                {
                    found[id] = isRoot
                }
            }
            for id in others {
                guard let isRoot = found[id] else { throw JobDependencyError.unknownJob(id) }
                guard isRoot else { throw JobDependencyError.notAJob(id) }
            }
            let add = try connection.cachedStatement(
                "INSERT INTO job_dependencies (job_id, depends_on, on_failure) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
            for dependency in dependencies {
                defer { add.reset() }
                try add.bind(dependency.jobID, at: 1)
                try add.bind(dependency.dependsOn, at: 2)
                try add.bind(dependency.onFailure.rawValue, at: 3)
                try add.step()
            }
            let waiting = Set(dependencies.map(\.jobID))
            try queue(
                tasks.filter { waiting.contains($0.id) }.map { TreeChange($0.id, .recount) },
                at: tasks.first?.createdAt ?? Date(), connection: connection)
        }
    }

    package func dependencies(of jobID: String) async throws -> [JobDependency] {
        try await read { connection in try SQLiteJobTreeReader(connection: connection, path: path).dependencies(ofJobs: [jobID]) }
    }

    package func dependents(of jobID: String) async throws -> [JobDependency] {
        try await read { connection in try SQLiteJobTreeReader(connection: connection, path: path).dependents(of: [jobID]) }
    }

    package func tasks(ids: [String]) async throws -> [TaskRecord] {
        try await read { connection in try SQLiteJobTreeReader(connection: connection, path: path).records(ids) }
    }

    // MARK: Signals

    package func sendSignal(to jobID: String, name: String, payload: Data?, at date: Date) async throws
        -> JobSignalRecord
    {
        try await write { connection in
            let job = try connection.query("SELECT \(Self.columns) FROM tasks WHERE id = ?", [.text(jobID)]) {
                try record(from: $0)
            }.first
            var target = try JobSignalRecord.check(job, id: jobID, name: name)
            try connection.execute(
                "INSERT INTO signals (job_id, name, payload, sent_at) VALUES (?, ?, ?, ?)",
                [.text(jobID), .text(name), SQLiteValue(payload.map { [UInt8]($0) }), .integer(date.storedMilliseconds)])
            let sequence = connection.lastInsertRowID
            try insertEvents([JobSignalRecord.sentEvent(to: target, name: name, at: date)], connection: connection)
            if target.wait == .signal(name), target.ownerID == nil {
                let before = target
                target.releaseWait(at: date)
                _ = try apply(
                    TaskBatch(updates: [TaskUpdate(target, columns: TaskColumns.changed(from: before, to: target))]),
                    connection: connection, at: date)
            }
            return JobSignalRecord(sequence: sequence, jobID: jobID, name: name, payload: payload, sentAt: date)
        }
    }

    package func takeSignal(job jobID: String, name: String, step: String, owner: String, at date: Date) async throws
        -> JobSignalRecord?
    {
        try await write { connection in
            guard try connection.scalarText("SELECT owner_id FROM tasks WHERE id = ?", [.text(jobID)]) == owner else {
                throw TaskStoreError(
                    .conflict, path: path, message: "job '\(jobID)' is no longer held by owner '\(owner)'")
            }
            let select = "SELECT id, job_id, name, payload, sent_at, consumed_by, consumed_at FROM signals"
            let taken = try connection.query(
                "\(select) WHERE job_id = ? AND name = ? AND consumed_by = ? LIMIT 1",
                [.text(jobID), .text(name), .text(step)], Self.signal(from:)
            ).first
            if let taken { return taken }
            guard
                var next = try connection.query(
                    "\(select) WHERE job_id = ? AND name = ? AND consumed_by IS NULL ORDER BY id LIMIT 1",
                    [.text(jobID), .text(name)], Self.signal(from:)
                ).first
            else { return nil }
            try connection.execute(
                "UPDATE signals SET consumed_by = ?, consumed_at = ? WHERE id = ?",
                [.text(step), .integer(date.storedMilliseconds), .integer(next.sequence)])
            next.consumedBy = step
            next.consumedAt = date.roundedToMilliseconds
            return next
        }
    }

    package func signals(of jobID: String) async throws -> [JobSignalRecord] {
        try await read { connection in
            try connection.query(
                """
                SELECT id, job_id, name, payload, sent_at, consumed_by, consumed_at FROM signals WHERE job_id = ?
                ORDER BY id
                """, [.text(jobID)], Self.signal(from:))
        }
    }

    static func signal(from row: SQLiteStatement) -> JobSignalRecord {
        JobSignalRecord(
            sequence: row.int64(at: 0), jobID: row.text(at: 1), name: row.text(at: 2),
            payload: row.optionalBlob(at: 3).map { Data($0) }, sentAt: Date(storedMilliseconds: row.int64(at: 4)),
            consumedBy: row.optionalText(at: 5), consumedAt: row.optionalInt64(at: 6).map(Date.init(storedMilliseconds:)))
    }

    /// Deletes what a removed job leaves besides its tree: its dependencies and signals (its dependents keep theirs,
    /// and are looked at again: a removed dependency counts as cancelled).
    func deleteJobTreeRows(of rootID: String, at now: Date, connection: SQLiteConnection) throws {
        try deleteJobTreeRows(of: [rootID], at: now, connection: connection)
    }

    /// ``deleteJobTreeRows(of:at:connection:)`` for many roots at once (at most 500: one statement each).
    func deleteJobTreeRows(of rootIDs: [String], at now: Date, connection: SQLiteConnection) throws {
        guard !rootIDs.isEmpty else { return }
        let (list, ids) = Self.idList(rootIDs)
        try connection.execute("DELETE FROM job_dependencies WHERE job_id IN \(list)", ids)
        try connection.execute("DELETE FROM signals WHERE job_id IN \(list)", ids)
        let dependedOn = try connection.query(
            "SELECT DISTINCT depends_on FROM job_dependencies WHERE depends_on IN \(list)", ids) { $0.text(at: 0) }
        try queue(dependedOn.map { TreeChange($0, .dependents) }, at: now, connection: connection)
    }
}

/// The tree keeper's reads on a SQLite connection, in the open transaction.
struct SQLiteJobTreeReader: JobTreeReading {
    let connection: SQLiteConnection
    let path: String
    let decoder = JSONDecoder()

    private func record(_ row: SQLiteStatement) throws -> TaskRecord {
        try TaskRecord(row: row, location: path) { try decoder.decode(TaskOptions.self, from: Data($0.utf8)) }
    }

    private func select(_ condition: String, _ values: [SQLiteValue]) throws -> [TaskRecord] {
        try connection.query("SELECT \(SQLiteTaskStore.columns) FROM tasks \(condition)", values) { try record($0) }
    }

    func records(_ ids: [String]) throws -> [TaskRecord] {
        var found: [TaskRecord] = []
        for chunk in ids.chunked(500) {
            let (list, values) = SQLiteTaskStore.idList(chunk)
            found += try select("WHERE id IN \(list)", values)
        }
        return found
    }

    func links(ofChildren ids: [String]) throws -> [TaskRecord] {
        var found: [TaskRecord] = []
        for chunk in ids.chunked(500) {
            let (list, values) = SQLiteTaskStore.idList(chunk)
            found += try select(
                "INDEXED BY tasks_link_of_child WHERE child_job_id IS NOT NULL AND child_job_id IN \(list)", values)
        }
        return found
    }

    func links(inTreesOf roots: [String]) throws -> [TaskRecord] {
        var found: [TaskRecord] = []
        for root in roots {
            found += try select(
                "INDEXED BY tasks_links_by_root WHERE root_id = ? AND child_job_id IS NOT NULL", [.text(root)])
        }
        return found
    }

    func subtrees(of ids: [String]) throws -> [String: [TaskRecord]] {
        var trees: [String: [TaskRecord]] = [:]
        for id in ids {
            guard let rootID = try connection.scalarText("SELECT root_id FROM tasks WHERE id = ?", [.text(id)]) else {
                continue
            }
            let all = try select("WHERE id = ?", [.text(rootID)])
                + select("WHERE root_id = ? AND parent_id IS NOT NULL", [.text(rootID)])
            trees[id] = TaskTreeOrder.subtree(of: id, in: all)
        }
        return trees
    }

    private func dependencies(_ column: String, _ ids: [String]) throws -> [JobDependency] {
        var found: [JobDependency] = []
        for chunk in ids.chunked(500) {
            let (list, values) = SQLiteTaskStore.idList(chunk)
            found += try connection.query(
                """
                SELECT job_id, depends_on, on_failure FROM job_dependencies
                WHERE \(column) IN \(list) ORDER BY job_id, depends_on
                """, values
            ) { row in
                JobDependency(
                    jobID: row.text(at: 0), dependsOn: row.text(at: 1),
                    onFailure: DependencyFailurePolicy(rawValue: row.text(at: 2)) ?? .cancel)
            }
        }
        return found
    }

    func dependencies(ofJobs ids: [String]) throws -> [JobDependency] { try dependencies("job_id", ids) }

    func dependents(of ids: [String]) throws -> [JobDependency] { try dependencies("depends_on", ids) }

    func awaitedLinks(of root: String) throws -> [(id: String, finished: Bool)] {
        try connection.query(
            "SELECT id, finished_at IS NOT NULL FROM tasks INDEXED BY tasks_awaited_links WHERE root_id = ? AND awaited = 1",
            [.text(root)]
        ) { (id: $0.text(at: 0), finished: $0.int64(at: 1) != 0) }
    }

    func unfinishedAwaitedLinks(of root: String, limit: Int) throws -> [String] {
        try connection.query(
            """
            SELECT id FROM tasks INDEXED BY tasks_awaited_links
            WHERE root_id = ? AND awaited = 1 AND finished_at IS NULL LIMIT ?
            """,
            [.text(root), .integer(Int64(limit))]
        ) { $0.text(at: 0) }
    }

    func hasSignalToTake(job: String, name: String) throws -> Bool {
        try connection.scalarInt(
            "SELECT 1 FROM signals WHERE job_id = ? AND name = ? AND consumed_by IS NULL LIMIT 1",
            [.text(job), .text(name)]) != nil
    }
}

extension Array {
    /// The elements in runs of at most `size`.
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
