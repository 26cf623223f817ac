import Foundation
import ProgressionSQLite

extension SQLiteTaskStore {
    // MARK: Identifiers

    package func reserveIdentifiers(_ count: Int) async throws -> Range<Int64> {
        precondition(count > 0, "reserve at least one identifier")
        return try await write { connection in
            guard
                let next = try connection.scalarInt(
                    "UPDATE sequences SET next = next + ? WHERE name = 'roots' RETURNING next", [.integer(Int64(count))])
            else {
                throw TaskStoreError(.corrupt, path: path, message: "the 'roots' sequence is missing")
            }
            return (next - Int64(count))..<next
        }
    }

    // MARK: The writer's batches

    package func insert(_ tasks: [TaskRecord], events: [TaskEvent]) async throws {
        try await write { connection in try insert(tasks, events: events, connection: connection) }
    }

    /// Inserts rows and their events in the open transaction.
    func insert(_ tasks: [TaskRecord], events: [TaskEvent], connection: SQLiteConnection) throws {
        let insert = try connection.cachedStatement(Self.insertSQL)
        for task in tasks {
            defer { insert.reset() }
            try bindInsert(task, to: insert)
            try insert.step()
        }
        try insertEvents(events, connection: connection)
    }

    package func apply(_ batch: TaskBatch) async throws -> TaskBatchResult {
        guard !batch.isEmpty else { return TaskBatchResult() }
        return try await write { connection in try apply(batch, connection: connection) }
    }

    /// Writes a batch in the open transaction, fenced by ``BatchFence``: the holders of the roots of its subtasks are
    /// read first, a root's own row is checked in its update (the write transaction excludes every other writer until
    /// it ends, so both see the same rows).
    func apply(_ batch: TaskBatch, connection: SQLiteConnection, at now: Date = Date()) throws -> TaskBatchResult {
        var rejected: [String] = []
        var conflicting: [String] = []
        var fence = BatchFence(batch, checksRootsInTheirUpdates: true)
        if !fence.rootsToRead.isEmpty {
            let holderOf = try connection.cachedStatement("SELECT owner_id, status FROM tasks WHERE id = ?")
            var holders: [String: BatchFence.Holder] = [:]
            for root in fence.rootsToRead {
                defer { holderOf.reset() }
                try holderOf.bind(root, at: 1)
                if try holderOf.step() {
                    holders[root] = BatchFence.Holder(
                        owner: holderOf.optionalText(at: 0), status: TaskStatus(rawValue: holderOf.text(at: 1)))
                }
            }
            fence.decide(holders: holders)
        }
        if !batch.inserts.isEmpty {
            let insert = try connection.cachedStatement(Self.insertSQL + " ON CONFLICT DO NOTHING")
            for record in batch.inserts {
                guard fence.inserts(record) else {
                    rejected.append(record.id)
                    continue
                }
                defer { insert.reset() }
                try bindInsert(record, to: insert)
                try insert.step()
                if connection.changes == 0 {
                    conflicting.append(record.id)
                    if record.isRoot { fence.rootInsertConflicted(record.id) }
                }
            }
        }
        for update in batch.updates {
            guard fence.writes(update.record) else {
                rejected.append(update.record.id)
                continue
            }
            let (rowGuard, checked): (UpdateGuard, String?) =
                switch fence.condition(for: update) {
                case .none: (.none, nil)
                case .heldBy(let owner): (.owner, owner)
                case .unownedWith(let status): (.unowned, status.rawValue)
                }
            let statement = try updateStatement(update.columns, guard: rowGuard, connection: connection)
            defer { statement.reset() }
            let next = try bindUpdate(update, to: statement)
            if let checked { try statement.bind(checked, at: next) }
            try statement.step()
            if connection.changes == 0 { rejected.append(update.record.id) }
        }
        try insertEvents(BatchFence.events(of: batch, skipping: rejected + conflicting), connection: connection)
        if !rejected.isEmpty {
            let refused = Set(rejected)
            try queueTreeChanges(of: batch, written: { !refused.contains($0) }, at: now, connection: connection)
        } else {
            try queueTreeChanges(of: batch, written: { _ in true }, at: now, connection: connection)
        }
        return TaskBatchResult(rejectedTaskIDs: rejected, conflictingTaskIDs: conflicting)
    }

    private func updateStatement(
        _ columns: TaskColumns, guard rowGuard: UpdateGuard, connection: SQLiteConnection
    ) throws -> SQLiteStatement {
        let key = UInt64(columns.rawValue) | (UInt64(rowGuard.rawValue) << 32)
        if let statement = updateStatements[key] { return statement }
        let statement = try connection.prepare(Self.updateSQL(columns, guard: rowGuard), persistent: true)
        updateStatements[key] = statement
        return statement
    }

    // MARK: Lifecycle changes

    package func change(_ request: TaskChangeRequest) async throws -> TaskChangeResult {
        try await write { connection in
            switch try request.plan(over: try subtree(of: request.taskID, connection: connection), path: path) {
            case .delete(let nodes, var result):
                try delete(nodes, connection: connection)
                if let top = nodes.first, top.isRoot {
                    result.deleted += try deleteChildJobs(of: nodes, connection: connection, at: request.at)
                    try deleteJobTreeRows(of: top.id, at: request.at, connection: connection)
                }
                return result
            case .write(let batch, let result):
                _ = try apply(batch, connection: connection, at: request.at)
                return result
            }
        }
    }

    /// Deletes the child jobs of a removed tree (`nodes`), with their own trees, children, history, dependencies and
    /// signals, whatever their status (an executor that still runs one finds its writes refused and stops it). Returns
    /// how many tasks it deleted.
    private func deleteChildJobs(of nodes: [TaskRecord], connection: SQLiteConnection, at now: Date) throws -> Int {
        var deleted = 0
        for childID in nodes.compactMap(\.childJobID) {
            let tree = try subtree(of: childID, connection: connection)
            guard let top = tree.first, top.isRoot else { continue }
            try delete(tree, connection: connection)
            deleted += tree.count
            deleted += try deleteChildJobs(of: tree, connection: connection, at: now)
            try deleteJobTreeRows(of: childID, at: now, connection: connection)
        }
        return deleted
    }

    /// Deletes nodes (a subtree in tree order) and their history.
    private func delete(_ nodes: [TaskRecord], connection: SQLiteConnection) throws {
        guard let top = nodes.first else { return }
        if top.isRoot {
            try connection.execute("DELETE FROM events WHERE root_id = ?", [.text(top.id)])
            try connection.execute("DELETE FROM tasks WHERE root_id = ? AND parent_id IS NOT NULL", [.text(top.id)])
            try connection.execute("DELETE FROM tasks WHERE id = ?", [.text(top.id)])
        } else {
            let deleteEvents = try connection.cachedStatement("DELETE FROM events WHERE root_id = ? AND task_id = ?")
            let deleteTask = try connection.cachedStatement("DELETE FROM tasks WHERE id = ?")
            for node in nodes.reversed() {
                try deleteEvents.execute([.text(node.rootID), .text(node.id)])
                try deleteTask.execute([.text(node.id)])
            }
        }
    }

    // MARK: Claims and ownership

    package func claimRoots(_ claim: RootClaim) async throws -> [ClaimedRoot] {
        guard !claim.fromOwners.isEmpty, claim.limit > 0 else { return [] }
        // A claim takes roots and starts some: it ends none and removes none, so a JobClient waiting for a job in this
        // process is not woken by it (it would read the job running, and its next read would wait for the spacing).
        return try await write(postsCommit: false) { connection in
            // The owners judged dead are read again inside the write: one that wrote a heartbeat since is left.
            let judged = claim.judgedOwners
            var current: [String: Date] = [:]
            if !judged.isEmpty {
                for (id, heartbeat) in try connection.query(
                    "SELECT id, heartbeat_at FROM owners WHERE id IN (\(Self.placeholders(judged.count)))",
                    judged.map { .text($0) }, { row in (row.text(at: 0), Date(storedMilliseconds: row.int64(at: 1))) })
                {
                    current[id] = heartbeat
                }
            }
            let fromOwners = claim.ownersStillDead(current: current)
            guard !fromOwners.isEmpty else { return [] }
            let plan = try claimPlan(claim, connection: connection)
            var kindCondition = ""
            var kindParameters: [SQLiteValue] = []
            switch plan.kinds {
            case .all: break
            case .only(let runnable):
                kindCondition = " AND (kind IS NULL" + String(repeating: " OR kind = ?", count: runnable.count) + ")"
                kindParameters = runnable.map { .text($0) }
            case .allBut(let blocked):
                kindCondition = " AND (kind IS NULL OR kind NOT IN (\(Self.placeholders(blocked.count))))"
                kindParameters = blocked.map { .text($0) }
            }
            // Jobs begun by a version the claimer cannot continue, of a kind that leaves them (``JobVersion``).
            for (kind, accepted) in claim.versionsLeft {
                kindCondition +=
                    " AND (version IS NULL OR kind IS NULL OR kind <> ? OR version IN (\(Self.placeholders(accepted.count))))"
                kindParameters += [.text(kind)] + accepted.map { .text($0) }
            }
            let now = SQLiteValue.integer(claim.now.storedMilliseconds)
            // Each owner's roots that are ready come in priority-then-age order straight from the index of unfinished
            // roots (owner first), `limit` at most per owner; those waiting for a time come from the index of waiting
            // roots, the due ones only; the best `limit` of them all are taken. Paused roots are not claimed: a paused
            // root no live owner holds is changed in the store directly, and claimed once it is resumed.
            var candidates: [ClaimedRoot] = []
            func collect(_ sql: String, _ parameters: [SQLiteValue]) throws {
                candidates += try connection.query(sql, parameters) { row in
                    let id = row.text(at: 0)
                    guard let status = TaskStatus(rawValue: row.text(at: 1)) else {
                        throw TaskStoreError(
                            .corrupt, path: path,
                            message: "task '\(id)' cannot be read: unknown status '\(row.text(at: 1))'")
                    }
                    return ClaimedRoot(
                        id: id, status: status, kind: row.optionalText(at: 2), priority: Int(row.int64(at: 3)),
                        createdAt: Date(storedMilliseconds: row.int64(at: 4)),
                        nextAttemptAt: row.optionalInt64(at: 5).map(Date.init(storedMilliseconds:)),
                        previousOwner: row.optionalText(at: 6))
                }
            }
            let select = "SELECT id, status, kind, priority, created_at, next_attempt_at, owner_id FROM tasks"
            for owner in fromOwners {
                let ownerCondition = owner == nil ? "owner_id IS NULL" : "owner_id = ?"
                try collect(
                    """
                    \(select) INDEXED BY tasks_roots_unfinished
                    WHERE parent_id IS NULL AND finished_at IS NULL AND \(ownerCondition) AND next_attempt_at IS NULL
                      AND status <> 'paused'\(kindCondition)
                    ORDER BY priority DESC, created_at, id LIMIT ?
                    """,
                    (owner.map { [.text($0)] } ?? []) + kindParameters + [.integer(Int64(claim.limit))])
            }
            let owners = fromOwners.compactMap { $0 }
            let ownersCondition =
                "(owner_id IS NULL" + (owners.isEmpty ? "" : " OR owner_id IN (\(Self.placeholders(owners.count)))") + ")"
            try collect(
                """
                \(select) INDEXED BY tasks_roots_waiting
                WHERE parent_id IS NULL AND finished_at IS NULL AND next_attempt_at IS NOT NULL AND next_attempt_at <= ?
                  AND status <> 'paused' AND \(ownersCondition)\(kindCondition)
                ORDER BY next_attempt_at LIMIT ?
                """,
                [now] + owners.map { .text($0) } + kindParameters + [.integer(Int64(claim.limit))])
            var claimed = plan.choose(candidates)
            // Taken in the same transaction, each row only while it still has the owner it was read with. For an
            // executor, a root without subtasks (a job that never ran) comes back whole from its update: its tree is
            // the root alone, and the executor need not read it again (a second call to the store, 135 µs of a job's
            // latency). A tree with subtasks is read after the claim, outside its write. A job taken from no owner that
            // the claimer has a slot for is started in this transaction (``ClaimStarts``).
            let take = "UPDATE tasks SET owner_id = ? WHERE id = ? AND owner_id IS ?"
            let takeReturning = take + " RETURNING \(Self.columns), EXISTS (SELECT 1 FROM tasks AS subtask "
                + "WHERE subtask.root_id = tasks.id AND subtask.parent_id IS NOT NULL)"
            let subtasksColumn = Int32(TaskTableColumn.allCases.count)
            for index in claimed.indices {
                let values: [SQLiteValue] = [
                    .text(claim.newOwner), .text(claimed[index].id), SQLiteValue(claimed[index].previousOwner),
                ]
                guard claim.readsTrees else {
                    try connection.execute(take, values)
                    continue
                }
                let taken = try connection.query(takeReturning, values) { row in
                    (record: try record(from: row), hasSubtasks: row.int64(at: subtasksColumn) != 0)
                }
                if let taken = taken.first, !taken.hasSubtasks {
                    let tree = [taken.record]
                    claimed[index].tree = tree
                    if claimed[index].previousOwner == nil, let root = tree.first, let starts = claim.starts,
                        let start = starts.start(root, owner: claim.newOwner)
                    {
                        let written = try apply(start.batch, connection: connection, at: starts.now)
                        // The claim holds the row in this write: nothing else can have changed it.
                        guard written.rejectedTaskIDs.isEmpty, written.conflictingTaskIDs.isEmpty else {
                            throw TaskStoreError(
                                .corrupt, path: path, message: "the start of claimed task '\(root.id)' was not written")
                        }
                        claimed[index].tree = [start.record]
                        claimed[index].started = true
                    }
                }
            }
            // What the executor asks after a claim that did not fill its slots, read here at no extra call.
            if let starts = claim.starts {
                starts.noteNextWaitingTime(try nextWaitingTime(after: claim.now, connection: connection))
            }
            return claimed
        }
    }

    package func transferTree(
        of rootID: String, ifStatusIn statuses: Set<TaskStatus>, from owner: String?, to newOwner: String?
    ) async throws -> Bool {
        try await write { connection in
            let current = try connection.query(
                "SELECT status, owner_id FROM tasks WHERE id = ? AND parent_id IS NULL", [.text(rootID)]
            ) { (status: $0.text(at: 0), owner: $0.optionalText(at: 1)) }.first
            guard let current, let status = TaskStatus(rawValue: current.status), statuses.contains(status),
                current.owner == owner
            else { return false }
            try connection.execute("UPDATE tasks SET owner_id = ? WHERE id = ?", [SQLiteValue(newOwner), .text(rootID)])
            return true
        }
    }

    package func prune(finishedBefore date: Date, statuses: Set<TaskStatus>, dryRun: Bool, limit: Int?) async throws
        -> PruneResult
    {
        let finished = statuses.filter(\.isFinished).map(\.rawValue).sorted()
        guard !finished.isEmpty, limit.map({ $0 > 0 }) ?? true else { return PruneResult(roots: 0, tasks: 0) }
        let body = { (connection: SQLiteConnection) throws -> PruneResult in
            // The finished index by status and age (a root finished before `date` was created before it), oldest
            // first. A child job goes only once its parent has gone (a retried parent runs its failed children
            // again), and a job only once no unfinished job waits for it (it reads its result, or its end).
            let cutoff = SQLiteValue.integer(date.storedMilliseconds)
            let roots = try connection.query(
                """
                SELECT id FROM tasks AS job WHERE parent_id IS NULL AND finished_at IS NOT NULL
                  AND (\(finished.map { _ in "status = ?" }.joined(separator: " OR ")))
                  AND created_at < ? AND finished_at < ?
                  AND (parent_job_id IS NULL OR NOT EXISTS (SELECT 1 FROM tasks AS parent WHERE parent.id = job.parent_job_id))
                  AND NOT EXISTS (
                    SELECT 1 FROM job_dependencies AS dependency JOIN tasks AS waiting ON waiting.id = dependency.job_id
                    WHERE dependency.depends_on = job.id AND waiting.finished_at IS NULL)
                \(limit.map { "ORDER BY created_at, id LIMIT \($0)" } ?? "")
                """,
                finished.map { .text($0) } + [cutoff, cutoff]
            ) { $0.text(at: 0) }
            // Set by set, a chunk of roots a statement (one statement per root and table cost a retention turn 7
            // statements a job, 3 of them prepared each time): their trees counted, then their history, subtasks,
            // rows, dependencies and signals deleted; the jobs that ran after one of them are looked at again.
            var tasks = 0
            for chunk in roots.chunked(500) {
                let (list, ids) = Self.idList(chunk)
                tasks += Int(try connection.scalarInt("SELECT count(*) FROM tasks WHERE root_id IN \(list)", ids) ?? 0)
                guard !dryRun else { continue }
                try connection.execute("DELETE FROM events WHERE root_id IN \(list)", ids)
                try connection.execute("DELETE FROM tasks WHERE root_id IN \(list) AND parent_id IS NOT NULL", ids)
                try connection.execute("DELETE FROM tasks WHERE id IN \(list)", ids)
                try self.deleteJobTreeRows(of: Array(chunk), at: Date(), connection: connection)
            }
            return PruneResult(roots: roots.count, tasks: tasks)
        }
        return dryRun ? try await read(body) : try await write(body)
    }

    package func gaugeCounts(at now: Date) async throws -> (unfinished: [UnfinishedRootGroup], failedByKind: [String: Int]) {
        try await read { connection in
            let unfinished = try connection.query(
                """
                SELECT coalesce(kind, ''), status, wait IS NOT NULL, coalesce(next_attempt_at, 0) <= ?, count(*),
                  min(coalesce(next_attempt_at, updated_at))
                FROM tasks WHERE parent_id IS NULL AND finished_at IS NULL GROUP BY 1, 2, 3, 4
                """, [.integer(now.storedMilliseconds)]
            ) { row in
                UnfinishedRootGroup(
                    kind: row.text(at: 0), status: TaskStatus(rawValue: row.text(at: 1)) ?? .pending,
                    waiting: row.int64(at: 2) != 0, due: row.int64(at: 3) != 0, count: Int(row.int64(at: 4)),
                    earliest: row.optionalInt64(at: 5).map(Date.init(storedMilliseconds:)))
            }
            var failed: [String: Int] = [:]
            for (kind, count) in try connection.query(
                """
                SELECT coalesce(kind, ''), count(*) FROM tasks
                WHERE parent_id IS NULL AND finished_at IS NOT NULL AND status = 'failed' GROUP BY 1
                """,
                [], { ($0.text(at: 0), Int($0.int64(at: 1))) })
            {
                failed[kind] = count
            }
            return (unfinished, failed)
        }
    }

    package func takeDutyTurn(_ duty: String, owner: String, now: Date, nextAt: Date) async throws -> Bool {
        try await write { connection in
            try connection.execute(
                """
                INSERT INTO fleet_duties (name, next_at, owner_id, taken_at) VALUES (?1, ?2, ?3, ?4)
                ON CONFLICT (name) DO UPDATE SET next_at = excluded.next_at, owner_id = excluded.owner_id,
                  taken_at = excluded.taken_at
                WHERE fleet_duties.next_at <= ?4 OR fleet_duties.owner_id = ?3
                """,
                [.text(duty), .integer(nextAt.storedMilliseconds), .text(owner), .integer(now.storedMilliseconds)])
            return connection.changes > 0
        }
    }

    // MARK: Owners and control requests

    package func saveOwner(_ owner: OwnerRecord) async throws {
        try await write { connection in
            try connection.execute(
                """
                INSERT INTO owners (id, host, pid, started_at, heartbeat_at, stopped_at, kinds, slots, versions)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,
                  heartbeat_at = excluded.heartbeat_at, stopped_at = excluded.stopped_at, kinds = excluded.kinds,
                  slots = excluded.slots, versions = excluded.versions
                """,
                [
                    .text(owner.id), .text(owner.host), .integer(Int64(owner.pid)),
                    .integer(owner.startedAt.storedMilliseconds), .integer(owner.heartbeatAt.storedMilliseconds),
                    SQLiteValue(owner.stoppedAt?.storedMilliseconds), SQLiteValue(try OwnerRecord.encodeKinds(owner.kinds)),
                    SQLiteValue(owner.slots.map(Int64.init)), SQLiteValue(try OwnerRecord.encodeVersions(owner.versions)),
                ])
        }
    }

    package func addControlRequest(_ request: ControlRequest) async throws -> Int64 {
        try await write { connection in
            try connection.execute(
                """
                INSERT INTO control_requests (task_id, action, owner_id, requested_at, handled_at, outcome)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(request.taskID), .text(request.action.rawValue), SQLiteValue(request.ownerID),
                    .integer(request.requestedAt.storedMilliseconds), SQLiteValue(request.handledAt?.storedMilliseconds),
                    SQLiteValue(request.outcome),
                ])
            return connection.lastInsertRowID
        }
    }

    package func completeControlRequest(id: Int64, outcome: String, at date: Date) async throws {
        try await write { connection in
            try connection.execute(
                "UPDATE control_requests SET handled_at = ?, outcome = ? WHERE id = ?",
                [.integer(date.storedMilliseconds), .text(outcome), .integer(id)])
        }
    }

    // MARK: Maintenance

    /// Checkpoints run on the checkpointer's connection, one at a time with those the commits ask for (two
    /// checkpoints of one process at once would make the second fail as busy). A truncating checkpoint waits for
    /// other processes' readers at most `patience`, holding this store's writes back meanwhile.
    package func maintain(_ work: StoreMaintenance) async throws {
        switch work {
        case .passiveCheckpoint:
            try await checkpoint(.passive, patience: .zero)
        case .truncatingCheckpoint(let patience):
            try await checkpoint(.truncate, patience: patience)
        case .vacuum:
            try await read { connection in try connection.execute("VACUUM") }
            try await checkpoint(.truncate, patience: busyTimeout)
        }
    }

    private func checkpoint(_ mode: SQLiteConnection.CheckpointMode, patience: Duration) async throws {
        guard let checkpointer else {
            throw TaskStoreError(.readOnly, path: path, message: "the store is open read-only: no checkpoint")
        }
        do {
            try await checkpointer.checkpointNow(mode, patience: patience)
        } catch let error as SQLiteError {
            throw Self.storeError(error, path: path)
        }
    }
}
