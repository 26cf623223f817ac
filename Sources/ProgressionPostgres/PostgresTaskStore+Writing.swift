#if PostgreSQL
import Foundation
import PostgresNIO
import Progression
import Synchronization

extension PostgresTaskStore {
    // MARK: Identifiers

    package func reserveIdentifiers(_ count: Int) async throws -> Range<Int64> {
        precondition(count > 0, "reserve at least one identifier")
        return try await write { [self] connection in
            // A sequence hands out one value at a time; the lock makes `count` of them consecutive.
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "SELECT pg_advisory_xact_lock(hashtext($1))",
                    binds: bindings("progression.identifiers." + names.schema)),
                logger: logger)
            let last = try await rows(
                "SELECT setval('\(names.rootIdentifiers)', nextval('\(names.rootIdentifiers)') + $1 - 1)",
                bindings(Int64(count)), connection: connection
            ) { try $0.decode(Int64.self) }.first ?? 0
            return (last - Int64(count) + 1)..<(last + 1)
        }
    }

    // MARK: The writer's batches

    package func insert(_ tasks: [TaskRecord], events: [TaskEvent]) async throws {
        guard !tasks.isEmpty, !events.isEmpty else {
            try await write(notify: true) { [self] connection in
                if !tasks.isEmpty {
                    try await connection.query(
                        PostgresQuery(unsafeSQL: insertSQL(onConflict: ""), binds: try columnArrays(tasks)),
                        logger: logger)
                }
                try await insertEvents(events, connection: connection)
            }
            return
        }
        // One statement outside a transaction: the rows, their events and the notification, committed by the server
        // before it answers, so that a producer's submit is one round trip (each statement, BEGIN and COMMIT included,
        // costs one). Its transaction's id is not known before the commit, so a lost answer is settled by ending the
        // backend that ran it and sending the rows again (``settleLostInsert(_:events:sentBy:after:)``). The caller's
        // cancellation does not end the call: a statement on its way is waited for, and its answer says whether the
        // jobs are stored.
        var arrays = try columnArrays(tasks)
        let eventsFrom = Self.columnTypes.count + 1
        Self.appendEventArrays(events, to: &arrays)
        let bindings = arrays
        let sql = """
            WITH inserted AS (\(insertSQL(onConflict: ""))),
            stored_events AS (\(Self.insertEventsSQL(into: names.events, from: eventsFrom)))
            SELECT 1 FROM pg_notify('\(names.channel)', '')
            """
        let sentBy = Mutex<BatchSession.Backend?>(nil)
        do {
            try await read(cancellable: false) { [self] connection in
                // Asked before the insert is sent (once per connection): an answer lost here sent nothing.
                let backend = try await backend(of: connection)
                sentBy.withLock { $0 = backend }
                _ = try await rows(prepared: sql, bindings, connection: connection) { _ in () }
            }
        } catch let error as TaskStoreError where error.reason == .unavailable {
            let backend = sentBy.withLock { $0 }
            // In a task of its own: a caller cancelled meanwhile still learns whether its jobs are stored.
            try await Task { [self] in
                try await settleLostInsert(tasks, events: events, sentBy: backend, after: error)
            }.value
        }
    }

    /// The backend of a connection of the pool, asked once per connection.
    func backend(of connection: PostgresConnection) async throws -> BatchSession.Backend {
        if let known = insertBackends.withLock({ $0[connection.id] }) { return known }
        let backend = try await Self.ownBackend(on: connection, logger: logger, location: location)
        insertBackends.withLock { known in
            if known.count >= 64 { known.removeAll() }
            known[connection.id] = backend
        }
        return backend
    }

    /// The backend of `connection`, as `pg_stat_activity` lists it.
    static func ownBackend(
        on connection: PostgresConnection, logger: Logger, location: String
    ) async throws -> BatchSession.Backend {
        let backend = try await connection.query(
            """
            SELECT pid, (extract(epoch FROM backend_start) * 1000000)::int8 FROM pg_stat_activity
            WHERE pid = pg_backend_pid()
            """, logger: logger
        ).collect().first.map { try $0.decode((Int32, Int64).self) }
        guard let backend else {
            throw TaskStoreError(
                .refused, path: location, message: "the server does not list its own session in pg_stat_activity")
        }
        return BatchSession.Backend(pid: backend.0, start: backend.1)
    }

    /// Settles an insert whose answer was lost (a lost connection, a deadline, a killed backend): it may have committed
    /// or not, may still be in progress on the server, or may not have reached it yet. The backend it was sent to
    /// (`sentBy`; `nil` when it was not sent) is ended first, and waited for until the server no longer lists it, so
    /// that nothing of it can run or commit later: otherwise a lost insert reaching the server after the rows sent
    /// again were stored, run and removed would store its job a second time. Then the rows are inserted again, in a
    /// transaction, leaving those whose id exists:
    /// - Every row inserted: the lost insert did not commit (it inserts all or nothing), and this one stores the rows
    ///   and their events.
    /// - None inserted, and each existing row is the one sent (its id, name, kind, input, idempotency key and creation
    ///   time): the lost insert committed, with its events; nothing is written.
    /// - Otherwise another insert holds some of the ids or keys: nothing is written, and the error is a conflict, as
    ///   the lost insert's own answer would have been.
    ///
    /// - Throws: `.conflict` as above; `.unavailable` when the server does not answer this either, or the backend does
    ///   not end.
    func settleLostInsert(
        _ tasks: [TaskRecord], events: [TaskEvent], sentBy backend: BatchSession.Backend?, after lost: TaskStoreError
    ) async throws {
        logger.notice(
            "an insert's answer was lost; asking whether it went through", metadata: ["error": "\(lost.message)"])
        if let backend, !(await endBackend(backend)) {
            throw TaskStoreError(
                .unavailable, path: location,
                message: "an insert's answer was lost, and whether it went through is not known yet (its session on "
                    + "the server could not be ended: \(lost.message))")
        }
        let columns = try columnArrays(tasks)
        let location = location
        // Asked again while the server cannot answer (a connection of the pool that the same failure closed fails at
        // once), within one call's deadline.
        let deadline = ContinuousClock.now + configuration.callTimeout
        var wait = Duration.milliseconds(20)
        var committedBefore: Bool?
        while committedBefore == nil {
            do {
                committedBefore = try await write(notify: true) { [self] connection -> Bool in
                    let inserted = try await rows(
                        insertSQL(onConflict: " ON CONFLICT DO NOTHING RETURNING id"), columns, connection: connection
                    ) { try $0.decode(String.self) }
                    if inserted.count == tasks.count {
                        try await insertEvents(events, connection: connection)
                        return false
                    }
                    let stored = try await rows(
                        "SELECT \(Self.columns) FROM \(names.tasks) WHERE id = ANY($1::text[])",
                        bindings(tasks.map(\.id)), connection: connection
                    ) { try record(from: $0) }
                    let sent = Dictionary(tasks.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
                    let same = stored.filter { row in
                        guard let mine = sent[row.id] else { return false }
                        return row.name == mine.name && row.kind == mine.kind && row.input == mine.input
                            && row.idempotencyKey == mine.idempotencyKey && row.parentID == mine.parentID
                            && row.createdAt.storedMilliseconds == mine.createdAt.storedMilliseconds
                    }
                    guard inserted.isEmpty, same.count == tasks.count else {
                        throw TaskStoreError(
                            .conflict, path: location,
                            message: "another insert holds some of these ids or keys (this insert's answer was lost)")
                    }
                    return true
                }
            } catch let error as TaskStoreError where error.reason == .unavailable {
                guard ContinuousClock.now + wait < deadline else { throw error }
                try await Task.sleep(for: wait)
                wait = min(wait * 2, .milliseconds(500))
            }
        }
        logger.notice(
            "an insert whose answer was lost is stored",
            metadata: ["committed before": "\(committedBefore ?? false)"])
    }

    /// The statement inserting one row per element of the column arrays.
    func insertSQL(onConflict: String) -> String {
        let sources = Self.columnTypes.enumerated().map { "$\($0.offset + 1)::\($0.element)[]" }
        return """
            INSERT INTO \(names.tasks) (\(Self.columns))
            SELECT * FROM unnest(\(sources.joined(separator: ", ")))\(onConflict)
            """
    }

    /// Writes a batch: one at a time for the store, each after the earlier ones whose answer was lost are settled, so
    /// that nothing written earlier by this store can still commit while a batch is on its way.
    package func apply(_ batch: TaskBatch) async throws -> TaskBatchResult {
        guard !batch.isEmpty else { return TaskBatchResult() }
        return try await batchTurn.run {
            // Twice at most: a batch refused because the session's mark moved goes again from the server's mark.
            for _ in 1...2 {
                let (adapted, used) = try await settleAmbiguousBatches(batch)
                let result: TaskBatchResult
                if BatchCall.fits(adapted) {
                    guard let written = try await applyInOneCall(adapted) else { continue }
                    result = written
                } else {
                    let writes = Ambiguous.Stored.written(by: adapted)
                    let pending: @Sendable (Int64, TaskBatchResult) -> Void = { xid, _ in
                        self.ambiguous.withLock { $0.batches.append(Ambiguous.Batch(commit: .transaction(xid), writes: writes)) }
                    }
                    result = try await write(notify: true, pending: pending) { [self] connection in
                        try await self.apply(adapted, connection: connection)
                    }
                }
                if !used.isEmpty { ambiguous.withLock { $0.stored.remove(used) } }
                return result
            }
            throw TaskStoreError(
                .unavailable, path: location,
                message: "the session's mark does not follow its batches; the batch is sent again")
        }
    }

    /// Asks whether the batches whose commit went unanswered committed (see ``Ambiguous``) and adapts `batch`, the
    /// executor's next one, which holds what they held: a row one of them inserted is written as an update of every
    /// column, an event it stored is left out. Returns the batch and what of the known stored rows and events it used.
    ///
    /// - Throws: `.unavailable` while the server cannot say.
    private func settleAmbiguousBatches(_ batch: TaskBatch) async throws -> (TaskBatch, Ambiguous.Stored) {
        let pending = ambiguous.withLock { $0.batches }
        for entry in pending {
            let committed: Bool
            switch entry.commit {
            case .transaction(let xid):
                guard let status = await transactionStatus(xid) else {
                    throw TaskStoreError(
                        .unavailable, path: location,
                        message: "whether an earlier commit went through is not known yet (no answer from the server)")
                }
                committed = status == .committed
            case .mark(let mark):
                guard let status = await batchStatus(mark) else {
                    throw TaskStoreError(
                        .unavailable, path: location,
                        message: "whether an earlier batch committed is not known yet (no answer from the server)")
                }
                if case .committed = status { committed = true } else { committed = false }
                // Refusals of a batch settled this late are not reported: the executor took its error and sends
                // what it held again, adapted below; a root another owner took is refused again then.
                batchSession.withLock { state in
                    if committed {
                        state.committed(mark.batch)
                    } else {
                        state.failed(mark.batch, settled: .init(batch: mark.batch, writes: entry.writes))
                    }
                }
            }
            ambiguous.withLock { state in
                state.batches.removeAll { $0.commit == entry.commit }
                // Committed: what it stored is known, and what it used stays known, since the executor got an
                // error and sends the batch again as it took it (with those inserts and events).
                guard committed else { return }
                state.stored.add(entry.writes)
            }
            if committed {
                logger.notice("a write whose answer was lost went through", metadata: ["commit": "\(entry.commit)"])
            }
        }
        var batch = batch
        let used = ambiguous.withLock { $0.stored.adapt(&batch) }
        return (batch, used)
    }

    /// Asks whether the claims whose commit went unanswered committed, and returns the roots those did take.
    ///
    /// - Throws: `.unavailable` while the server cannot say.
    private func settleAmbiguousClaims() async throws -> [ClaimedRoot] {
        let pending = ambiguous.withLock { $0.claims }
        var claimed: [ClaimedRoot] = []
        for entry in pending {
            guard let status = await transactionStatus(entry.xid) else {
                throw TaskStoreError(
                    .unavailable, path: location,
                    message: "whether an earlier claim went through is not known yet (no answer from the server)")
            }
            ambiguous.withLock { $0.claims.removeAll { $0.xid == entry.xid } }
            // A tree read in that claim may be long out of date by now (while this executor could not write, its
            // heartbeat went stale: another worker or an operator may have changed the root since): the executor
            // reads each again.
            // A start written with it is read as the root's status (running: an interrupted run).
            if status == .committed {
                claimed += entry.roots.map { root in
                    var root = root
                    root.tree = nil
                    root.started = false
                    return root
                }
            }
        }
        return claimed
    }

    /// Starts, in the claim's open transaction, the roots of `roots` that its ``ClaimStarts`` start: those taken from
    /// no owner whose tree is the root alone. Their trees become the started roots.
    ///
    /// `taken`: the rows the claim took (one per root, `nil` for a root whose row it did not read), when whether each
    /// root has subtasks is still to be read; the trees of those that have none become their rows. That read and the
    /// starts are then one statement, so one round trip: the starts are made for every root taken from no owner, and
    /// written only for those the statement finds without subtasks (a root with subtasks is left to the executor, as
    /// before, and the slot taken for its start is given back at once, ``ClaimStarts/giveBack(_:)``). The statement
    /// comes after the claim's, so its snapshot, taken after the claim's locks, sees the subtasks that a transaction
    /// holding a root's lock wrote and committed while the claim waited. Without `taken`, the trees were read in the
    /// claim.
    private func startClaimed(
        _ roots: inout [ClaimedRoot], taken: [TaskRecord?]? = nil, claim: RootClaim, connection: PostgresConnection
    ) async throws {
        var batch = TaskBatch(owner: claim.newOwner)
        var started: [Int: TaskRecord] = [:]
        if let starts = claim.starts {
            for index in roots.indices where roots[index].previousOwner == nil {
                let root: TaskRecord
                if let taken {
                    guard let record = taken[index] else { continue }
                    root = record
                } else {
                    guard let tree = roots[index].tree, tree.count == 1 else { continue }
                    root = tree[0]
                }
                guard let start = starts.start(root, owner: claim.newOwner) else { continue }
                batch.updates += start.batch.updates
                batch.events += start.batch.events
                started[index] = start.record
            }
        }
        let subtasksSQL = { (ids: Int) in
            "SELECT DISTINCT root_id FROM \(self.names.tasks) WHERE root_id = ANY($\(ids)::text[]) AND parent_id IS NOT NULL"
        }
        var withSubtasks: Set<String> = []
        var written: Set<String> = []
        if started.isEmpty {
            guard taken != nil else { return }
            withSubtasks = Set(
                try await rows(prepared: subtasksSQL(1), bindings(roots.map(\.id)), connection: connection) {
                    try $0.decode(String.self)
                })
        } else {
            // The rows (every column any start changes, each row's own values; the claim holds them in this
            // transaction, so no fence is read), their events, and the notification that listeners (a producer
            // waiting for its job, progressctl watch) hear of them by, as of a writer's batch.
            let columns = batch.updates.reduce(TaskColumns()) { $0.union($1.columns) }
            let updates = batch.updates.map { TaskUpdate($0.record, columns: columns) }
            var parameters = try updateArrays(updates, columns: columns)
            let first = parameters.count + 1
            Self.appendEventArrays(batch.events, to: &parameters)
            let sql: String
            if taken != nil {
                parameters.append(roots.map(\.id))
                sql = """
                    WITH nested AS MATERIALIZED (\(subtasksSQL(parameters.count))),
                    started AS (\(updateSQL(columns, condition: "t.id NOT IN (SELECT root_id FROM nested)"))),
                    logged AS (\(Self.insertEventsSQL(
                      into: names.events, from: first, condition: "e.root_id IN (SELECT id FROM started)")))
                    SELECT 0, root_id FROM nested UNION ALL SELECT 1, id FROM started
                    UNION ALL SELECT 2, NULL FROM pg_notify('\(names.channel)', '')
                    """
            } else {
                sql = """
                    WITH started AS (\(updateSQL(columns))),
                    logged AS (\(Self.insertEventsSQL(into: names.events, from: first)))
                    SELECT 1, id FROM started UNION ALL SELECT 2, NULL FROM pg_notify('\(names.channel)', '')
                    """
            }
            for (set, id) in try await rows(
                prepared: sql, parameters, connection: connection, { try $0.decode((Int32, String?).self) })
            {
                switch (set, id) {
                case (0, let id?): withSubtasks.insert(id)
                case (1, let id?): written.insert(id)
                default: break
                }
            }
            guard started.values.allSatisfy({ written.contains($0.id) || withSubtasks.contains($0.id) }) else {
                throw TaskStoreError(.other, path: location, message: "the starts of claimed tasks were not written")
            }
            claim.starts?.giveBack(started.count - written.count)
        }
        if let taken {
            for index in roots.indices where !withSubtasks.contains(roots[index].id) {
                roots[index].tree = taken[index].map { [$0] }
            }
        }
        guard !written.isEmpty else { return }
        // A child job's start is its parent's to mirror.
        if batch.changesJobTrees, let starts = claim.starts {
            try await queueTreeChanges(
                of: batch, written: { written.contains($0) }, at: starts.now, connection: connection)
        }
        for (index, record) in started where written.contains(record.id) {
            roots[index].tree = [record]
            roots[index].started = true
        }
    }

    /// Writes a batch in the open transaction. With an owner, the trees of roots that another owner holds (or that
    /// are gone) are left alone (fencing): the roots of the batch are locked in id order and read first, so a root's
    /// row is written only while it has the owner, a subtask's only while its root has, and no claim can take them
    /// before the commit. Their ids come back as rejected, and their events are not written.
    func apply(_ batch: TaskBatch, connection: PostgresConnection, at now: Date = Date()) async throws
        -> TaskBatchResult
    {
        var rejected: [String] = []
        var conflicting: [String] = []
        var fence = BatchFence(batch)
        if !fence.rootsToRead.isEmpty {
            let found = try await rows(
                Self.lockedRoots(in: names.tasks, columns: "id, owner_id, status", ids: "$1::text[]"),
                bindings(fence.rootsToRead), connection: connection
            ) { try $0.decode((String, String?, String).self) }
            var holders: [String: BatchFence.Holder] = [:]
            var statuses: [String: String] = [:]
            for (id, owner, status) in found {
                holders[id] = BatchFence.Holder(owner: owner, status: TaskStatus(rawValue: status))
                statuses[id] = status
            }
            fence.decide(holders: holders)
            // What the store holds for the roots it refuses that this owner held, for whoever reads why a worker
            // stopped them (a job queued here unowned that another worker took first is how a fleet shares its
            // backlog: not worth a notice).
            let lost = fence.lostRoots
            func holding(_ id: String) -> String {
                guard let holder = holders[id] else { return "not found" }
                return "\(statuses[id] ?? ""), held by \(holder.owner ?? "none")"
            }
            if !lost.isEmpty {
                logger.notice(
                    "rows not written: their roots are no longer this owner's",
                    metadata: [
                        "owner": "\(batch.owner ?? "none")",
                        "roots": "\(lost.sorted().map { "\($0): \(holding($0))" })",
                    ])
            }
        }
        if !batch.inserts.isEmpty {
            var inserts: [TaskRecord] = []
            for record in batch.inserts {
                if fence.inserts(record) {
                    inserts.append(record)
                } else {
                    rejected.append(record.id)
                }
            }
            if !inserts.isEmpty {
                let written = Set(
                    try await rows(
                        insertSQL(onConflict: " ON CONFLICT DO NOTHING RETURNING id"), try columnArrays(inserts),
                        connection: connection
                    ) { try $0.decode(String.self) })
                // A row whose identity exists is left as it is; so is a second row of the batch with the same one.
                var seen: Set<String> = []
                for record in inserts where !written.contains(record.id) || !seen.insert(record.id).inserted {
                    conflicting.append(record.id)
                    if record.isRoot { fence.rootInsertConflicted(record.id) }
                }
            }
        }
        // Updates in runs where each id appears once (an UPDATE … FROM writes a row once), each run by column set.
        var run: [TaskUpdate] = []
        var runIDs: Set<String> = []
        func flushRun() async throws {
            guard !run.isEmpty else { return }
            var groups: [UInt32: [TaskUpdate]] = [:]
            var order: [UInt32] = []
            for update in run {
                if groups[update.columns.rawValue] == nil { order.append(update.columns.rawValue) }
                groups[update.columns.rawValue, default: []].append(update)
            }
            for key in order {
                let updates = groups[key]!
                let columns = TaskColumns(rawValue: key)
                guard !columns.isEmpty else {
                    // Nothing to write: the row must exist all the same.
                    let found = Set(
                        try await rows(
                            "SELECT id FROM \(names.tasks) WHERE id = ANY($1::text[])",
                            bindings(updates.map(\.record.id)), connection: connection
                        ) { try $0.decode(String.self) })
                    rejected += updates.map(\.record.id).filter { !found.contains($0) }
                    continue
                }
                let changed = Set(
                    try await rows(updateSQL(columns), try updateArrays(updates, columns: columns), connection: connection) {
                        try $0.decode(String.self)
                    })
                rejected += updates.map(\.record.id).filter { !changed.contains($0) }
            }
            run.removeAll(keepingCapacity: true)
            runIDs.removeAll(keepingCapacity: true)
        }
        for update in batch.updates {
            guard fence.writes(update.record) else {
                rejected.append(update.record.id)
                continue
            }
            if !runIDs.insert(update.record.id).inserted {
                try await flushRun()
                runIDs.insert(update.record.id)
            }
            run.append(update)
        }
        try await flushRun()
        try await insertEvents(BatchFence.events(of: batch, skipping: rejected + conflicting), connection: connection)
        let refused = Set(rejected)
        try await queueTreeChanges(of: batch, written: { !refused.contains($0) }, at: now, connection: connection)
        // Rejections in the order of the batch, as the SQLite store reports them.
        let position = Dictionary(
            (batch.inserts.map(\.id) + batch.updates.map(\.record.id)).enumerated().map { ($0.element, $0.offset) },
            uniquingKeysWith: { first, _ in first })
        rejected.sort { (position[$0] ?? 0) < (position[$1] ?? 0) }
        return TaskBatchResult(rejectedTaskIDs: rejected, conflictingTaskIDs: conflicting)
    }

    // MARK: Lifecycle changes

    package func change(_ request: TaskChangeRequest) async throws -> TaskChangeResult {
        let location = location
        // The lifecycle's refusal is the caller's to see as it is, not as a store error.
        let outcome: Result<TaskChangeResult, ProgressionError> = try await write(notify: true) { [self] connection in
            let nodes = try await subtree(of: request.taskID, connection: connection, lock: true)
            let plan: TaskChangePlan
            do {
                plan = try request.plan(over: nodes, path: location)
            } catch let error as ProgressionError {
                return .failure(error)
            }
            switch plan {
            case .delete(let nodes, var result):
                try await delete(nodes, connection: connection)
                if let top = nodes.first, top.isRoot {
                    result.deleted += try await deleteChildJobs(of: nodes, connection: connection, at: request.at)
                    try await deleteJobTreeRows(of: top.id, at: request.at, connection: connection)
                }
                return .success(result)
            case .write(let batch, let result):
                _ = try await apply(batch, connection: connection, at: request.at)
                return .success(result)
            }
        }
        return try outcome.get()
    }

    /// Deletes nodes (a subtree in tree order) and their history.
    private func delete(_ nodes: [TaskRecord], connection: PostgresConnection) async throws {
        guard let top = nodes.first else { return }
        if top.isRoot {
            try await connection.query(
                PostgresQuery(unsafeSQL: "DELETE FROM \(names.events) WHERE root_id = $1", binds: bindings(top.id)),
                logger: logger)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "DELETE FROM \(names.tasks) WHERE root_id = $1 AND parent_id IS NOT NULL",
                    binds: bindings(top.id)), logger: logger)
            try await connection.query(
                PostgresQuery(unsafeSQL: "DELETE FROM \(names.tasks) WHERE id = $1", binds: bindings(top.id)),
                logger: logger)
        } else {
            let ids = nodes.map(\.id)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "DELETE FROM \(names.events) WHERE root_id = $1 AND task_id = ANY($2::text[])",
                    binds: bindings(top.rootID, ids)), logger: logger)
            try await connection.query(
                PostgresQuery(unsafeSQL: "DELETE FROM \(names.tasks) WHERE id = ANY($1::text[])", binds: bindings(ids)),
                logger: logger)
        }
    }

    // MARK: Claims and ownership

    package func claimRoots(_ claim: RootClaim) async throws -> [ClaimedRoot] {
        guard !claim.fromOwners.isEmpty, claim.limit > 0 else { return [] }
        let location = location
        let newOwner = claim.newOwner
        let earlier = try await settleAmbiguousClaims()
        let claimed = try await write(
            pending: { xid, roots in
                self.ambiguous.withLock { $0.claims.append(Ambiguous.Claim(xid: xid, roots: roots)) }
            },
            identified: { [self] connection -> ([ClaimedRoot], Int64?) in
                // The owners judged dead are read again, their rows locked until the commit: one that wrote a heartbeat
                // since is left; one whose heartbeat comes after this read waits for the commit, and then finds its roots
                // taken (its writes are fenced).
                let judged = claim.judgedOwners
                var current: [String: Date] = [:]
                if !judged.isEmpty {
                    for (id, heartbeat) in try await rows(
                        prepared: """
                        SELECT id, heartbeat_at FROM \(names.owners) WHERE id = ANY($1::text[]) ORDER BY id FOR SHARE
                        """,
                        bindings(judged), connection: connection, { try $0.decode((String, Int64).self) })
                    {
                        current[id] = Date(storedMilliseconds: heartbeat)
                    }
                }
                let fromOwners = claim.ownersStillDead(current: current)
                guard !fromOwners.isEmpty else { return ([], nil) }
                // Kinds paused across the fleet, and the limits of kinds that have one, in one statement: the rows of
                // the limited kinds in job_kinds are locked, so that two claims of one kind count one after the other.
                // For an executor, the same statement reads the next time a root waits for (``ClaimStarts``), which
                // it would otherwise ask after a claim that did not fill its slots, a round trip of its own. A root
                // waiting past `now` is not one this claim can take, so reading it before the claim reads what it
                // leaves.
                //
                // It also turns sequential scans off for the rest of the transaction, as `apply_batch` does for its
                // own statements (this is the transaction's first statement on `tasks`: only owners judged dead are
                // read before it). The claim's statements are kept prepared (``PreparedSQL``), and the server keeps a
                // plan for them after their first calls: one made while `tasks` was small scanned the whole table once
                // it had grown (a claim took 5.7 ms instead of 0.5 in the fleet bench, its start 3.5 instead of 0.5).
                // Without sequential scans, the plan looks rows up by their indexes at any size. This statement's own
                // plan reads two small tables and one index (`eachPreparedStatementOfAClaimUsesItsIndexes`).
                //
                // And, when the claim's statement is kept prepared, it has the server keep one plan for each later
                // statement of the transaction from its first call (`plan_cache_mode`, as `apply_batch` does): the
                // start's statement and the read of which roots have subtasks, whose array values made the server plan
                // them again at every call, spent 130 and 113 µs of a claim's server time planning (pg_stat_statements
                // over `postgres-latency`; 1 µs each since). A claim of many dead owners' roots, whose statement is
                // planned at each call anyway, keeps the plans made for its values.
                var paused: Set<String> = []
                var limits: [String: Int] = [:]
                var nextWaiting: Date?
                // The claim's statement is kept prepared only when it names a few owners (a branch each, and one for
                // the roots that waited): each count of owners is a text of its own.
                let prepares = Set(fromOwners).count + 1 <= PreparedSQL.maximumClaimBranches
                let plansKept = prepares ? " || set_config('plan_cache_mode', 'force_generic_plan', true)" : ""
                let nextWaitingBranch =
                    claim.starts == nil
                    ? ""
                    : """

                    UNION ALL
                    SELECT 2, NULL, (
                      SELECT next_attempt_at FROM \(names.tasks)
                      WHERE parent_id IS NULL AND finished_at IS NULL AND next_attempt_at IS NOT NULL
                        AND next_attempt_at > $1 AND status = 'pending'
                      ORDER BY next_attempt_at LIMIT 1)
                    """
                for (row, name, value) in try await rows(
                    prepared: """
                    SELECT 0, name, NULL::int8 FROM \(names.pausedKinds)
                    UNION ALL
                    SELECT 1, name, max_concurrent::int8 FROM (
                      SELECT name, max_concurrent FROM \(names.jobKinds) WHERE max_concurrent IS NOT NULL
                      ORDER BY name FOR UPDATE) AS limited\(nextWaitingBranch)
                    UNION ALL
                    SELECT 3, set_config('enable_seqscan', 'off', true)\(plansKept), NULL
                    """, claim.starts == nil ? PostgresBindings() : bindings(claim.now.storedMilliseconds),
                    connection: connection, { try $0.decode((Int32, String?, Int64?).self) })
                {
                    switch (row, name) {
                    case (0, let name?):
                        paused.insert(name)
                    case (1, let name?):
                        if let value, claim.kinds?.contains(name) ?? true { limits[name] = Int(value) }
                    case (2, _):
                        nextWaiting = value.map(Date.init(storedMilliseconds:))
                    default:
                        break
                    }
                }
                claim.starts?.noteNextWaitingTime(nextWaiting)
                // Owned roots of the limited kinds, counted in a statement of its own: its snapshot is taken after the
                // locks above, so that it sees the claims of those kinds that committed while this one waited.
                var owned: [String: Int] = [:]
                if !limits.isEmpty {
                    for (kind, count) in try await rows(
                        prepared: """
                        SELECT kind, count(*) FROM \(names.tasks)
                        WHERE parent_id IS NULL AND finished_at IS NULL AND owner_id IS NOT NULL
                          AND status IN ('running', 'pending') AND kind = ANY($1::text[])
                        GROUP BY kind
                        """, bindings(limits.keys.sorted()), connection: connection, { try $0.decode((String, Int).self) })
                    {
                        owned[kind] = count
                    }
                }
                let plan = ClaimPlan(claim, paused: paused, limits: limits, owned: owned)
                var parameters = PostgresBindings()
                parameters.append(Int64(claim.limit))
                parameters.append(claim.now.storedMilliseconds)
                var kindCondition = ""
                switch plan.kinds {
                case .all: break
                case .only(let runnable) where runnable.isEmpty:
                    kindCondition = " AND kind IS NULL"
                case .only(let runnable):
                    parameters.append(runnable)
                    kindCondition = " AND (kind IS NULL OR kind = ANY($\(parameters.count)::text[]))"
                case .allBut(let blocked):
                    parameters.append(blocked)
                    kindCondition = " AND (kind IS NULL OR NOT kind = ANY($\(parameters.count)::text[]))"
                }
                // Jobs begun by a version the claimer cannot continue, of a kind that leaves them (``JobVersion``).
                for (kind, accepted) in claim.versionsLeft {
                    parameters.append(kind)
                    parameters.append(accepted)
                    kindCondition += " AND (version IS NULL OR kind IS NULL OR kind <> $\(parameters.count - 1)"
                        + " OR version = ANY($\(parameters.count)::text[]))"
                }
                // One branch per owner, each an ordered scan of the unfinished roots' index for that owner (one scan
                // over every owner would sort them all for each chunk), and one for the due roots that waited for a
                // time; each locks its rows, skipping those another executor holds (a branch's rows beyond the chunk
                // stay locked until the commit: a concurrent claim takes others). Paused roots are not claimed.
                var branches: [String] = []
                var owners: [String] = []
                var seen: Set<String?> = []
                for owner in fromOwners where seen.insert(owner).inserted {
                    let condition: String
                    if let owner {
                        parameters.append(owner)
                        owners.append(owner)
                        condition = "owner_id = $\(parameters.count)"
                    } else {
                        condition = "owner_id IS NULL"
                    }
                    branches.append(
                        """
                        owner\(branches.count) AS (
                        \(Self.readyRoots(in: names.tasks, where: condition, kindCondition: kindCondition, limit: "$1")))
                        """)
                }
                parameters.append(owners)
                branches.append(
                    """
                    owner\(branches.count) AS (
                      SELECT id, status, kind, priority, created_at, next_attempt_at, owner_id FROM \(names.tasks)
                      WHERE parent_id IS NULL AND finished_at IS NULL AND next_attempt_at IS NOT NULL
                        AND next_attempt_at <= $2 AND status <> 'paused'
                        AND (owner_id IS NULL OR owner_id = ANY($\(parameters.count)::text[]))\(kindCondition)
                      ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
                    """)
                let candidates = """
                    SELECT id, status, kind, priority, created_at, next_attempt_at, owner_id FROM (\(
                      branches.indices.map { "SELECT * FROM owner\($0)" }.joined(separator: " UNION ALL "))) AS candidates
                    ORDER BY priority DESC, created_at, id
                    """
                // For an executor, each root comes back whole, with whether it has subtasks: the tree of one that has
                // none (a job that never ran) is the root alone, and the executor need not read it again (a read is a
                // round trip). For another claimer, only the ids come back.
                //
                // No limited kind has room to count (the usual case): the plan's choice is the first `limit` roots in
                // the claim's order, so one statement reads them, takes them and says the transaction's id (a claim is
                // then BEGIN, two statements and COMMIT, and one more for an executor's trees and starts). The ids are
                // taken by `= ANY` of the chosen ids, so that the UPDATE looks each up in the primary key (an UPDATE …
                // FROM the chunk would hash the whole table).
                if plan.room.values.allSatisfy({ $0 == 0 }) {
                    parameters.append(newOwner)
                    let ownerParameter = parameters.count
                    // The rows come back as taken (the UPDATE's row is the latest version, locked), but whether each
                    // has subtasks is not asked here: a subquery sees the statement's snapshot, taken before the locks,
                    // and would miss subtasks that a transaction holding a root's lock wrote and committed meanwhile.
                    let n = claim.readsTrees ? Self.columnCount : 1
                    let taken = try await rows(
                        preparedIf: prepares, """
                        WITH \(branches.joined(separator: ",\n")),
                        chosen AS MATERIALIZED (\(candidates) LIMIT $1),
                        taken AS (
                          UPDATE \(names.tasks) AS root SET owner_id = $\(ownerParameter)
                          WHERE id = ANY(ARRAY(SELECT id FROM chosen)) RETURNING \(claim.readsTrees ? Self.columns : "id"))
                        SELECT taken.*, chosen.status, chosen.kind, chosen.priority, chosen.created_at,
                          chosen.next_attempt_at, chosen.owner_id, (SELECT count(*) FROM chosen), txid_current()
                        FROM taken JOIN chosen ON chosen.id = taken.id
                        """, parameters, connection: connection
                    ) { row -> (root: ClaimedRoot, record: TaskRecord?, chosen: Int, xid: Int64) in
                        let cells = row.makeRandomAccess()
                        let root = try claimedRoot(
                            id: cells[0].decode(String.self), status: cells[n].decode(String.self),
                            kind: cells[n + 1].decode(String?.self), priority: cells[n + 2].decode(Int.self),
                            createdAt: cells[n + 3].decode(Int64.self), nextAttemptAt: cells[n + 4].decode(Int64?.self),
                            previousOwner: cells[n + 5].decode(String?.self))
                        return (
                            root, claim.readsTrees ? try record(from: row) : nil, try cells[n + 6].decode(Int.self),
                            try cells[n + 7].decode(Int64.self)
                        )
                    }
                    guard let first = taken.first else { return ([], nil) }
                    guard taken.count == first.chosen else {
                        throw TaskStoreError(
                            .other, path: location, message: "a claim read \(first.chosen) roots but took \(taken.count)")
                    }
                    var roots = taken.map(\.root)
                    if claim.readsTrees {
                        // A statement of its own, so a snapshot taken after the locks: the roots that have subtasks,
                        // and the starts of those that have none.
                        try await startClaimed(&roots, taken: taken.map(\.record), claim: claim, connection: connection)
                    }
                    return (roots.sorted(by: ClaimPlan.precedes), first.xid)
                }
                let read = try await rows(
                    preparedIf: prepares, "WITH \(branches.joined(separator: ",\n"))\n" + candidates, parameters,
                    connection: connection
                ) { row -> ClaimedRoot in
                    let (id, statusText, kind, priority, createdAt, nextAttemptAt, previousOwner) = try row.decode(
                        (String, String, String?, Int, Int64, Int64?, String?).self)
                    return try claimedRoot(
                        id: id, status: statusText, kind: kind, priority: priority, createdAt: createdAt,
                        nextAttemptAt: nextAttemptAt, previousOwner: previousOwner)
                }
                let chunk = plan.choose(read)
                guard !chunk.isEmpty else { return ([], nil) }
                // The UPDATE is a statement of its own, after the read's locks: its EXISTS sees their holders' commits.
                let returning =
                    claim.readsTrees
                    ? "\(Self.columns), EXISTS (SELECT 1 FROM \(names.tasks) WHERE root_id = root.id AND parent_id IS NOT NULL)"
                    : "id"
                let returnedCount = claim.readsTrees ? Self.columnCount + 1 : 1
                // Taken by one statement over the ids. Subtasks are fenced through their root's owner, so they need no
                // change.
                let taken = try await rows(
                    prepared: """
                    UPDATE \(names.tasks) AS root SET owner_id = $1 WHERE id = ANY($2::text[])
                    RETURNING \(returning), txid_current()
                    """,
                    bindings(newOwner, chunk.map(\.id)), connection: connection
                ) { row -> (TaskRecord?, xid: Int64) in
                    let cells = row.makeRandomAccess()
                    let xid = try cells[returnedCount].decode(Int64.self)
                    guard claim.readsTrees, try !cells[Self.columnCount].decode(Bool.self) else { return (nil, xid) }
                    return (try record(from: row), xid)
                }
                guard taken.count == chunk.count else {
                    throw TaskStoreError(
                        .other, path: location, message: "a claim read \(chunk.count) roots but took \(taken.count)")
                }
                var whole: [String: TaskRecord] = [:]
                for case let (record?, _) in taken { whole[record.id] = record }
                var roots = chunk.map { root in
                    var root = root
                    root.tree = whole[root.id].map { [$0] }
                    return root
                }
                try await startClaimed(&roots, claim: claim, connection: connection)
                return (roots, taken.first?.xid)
            })
        return (earlier + claimed).sorted(by: ClaimPlan.precedes)
    }

    /// A root a claim read, its status checked.
    private func claimedRoot(
        id: String, status: String, kind: String?, priority: Int, createdAt: Int64, nextAttemptAt: Int64?,
        previousOwner: String?
    ) throws -> ClaimedRoot {
        guard let status = TaskStatus(rawValue: status) else {
            throw TaskStoreError(.corrupt, path: location, message: "task '\(id)' cannot be read: unknown status '\(status)'")
        }
        return ClaimedRoot(
            id: id, status: status, kind: kind, priority: priority, createdAt: Date(storedMilliseconds: createdAt),
            nextAttemptAt: nextAttemptAt.map(Date.init(storedMilliseconds:)), previousOwner: previousOwner)
    }

    /// A claim's read of one owner's roots that are ready to run (or of the unowned ones), locked, skipping those
    /// another claim holds, at most `limit`, in the order of `tasks_roots_unfinished` (`eachIndexServesItsQuery`
    /// explains this text). The order names the owner first, as the index does: `owner_id IS NULL` does not tell the
    /// planner that the column is constant (`= $n` does), and without it the unowned branch read every unowned root
    /// and sorted them for each claim (3,129 rows for a chunk of 7 in a fleet run).
    package static func readyRoots(in table: String, where owner: String, kindCondition: String, limit: String) -> String {
        """
        SELECT id, status, kind, priority, created_at, next_attempt_at, owner_id FROM \(table)
        WHERE parent_id IS NULL AND finished_at IS NULL AND \(owner) AND next_attempt_at IS NULL
          AND status <> 'paused'\(kindCondition)
        ORDER BY owner_id, priority DESC, created_at, id LIMIT \(limit) FOR UPDATE SKIP LOCKED
        """
    }

    /// A write's lock of the roots it touches, by id, in id order (so that two writers lock in the same order), with
    /// `condition` on what it keeps (`eachIndexServesItsQuery` explains this text). The ids are roots' by construction
    /// (a record's `root_id`), and the text does not say `parent_id IS NULL`: that condition implies the predicate of
    /// every partial index of roots, and on a table whose statistics lag behind its growth (a new schema filling up)
    /// the planner took one of those and filtered every root by id, once per batch (440 rows removed for 6 kept early
    /// in a bench run, and growing with the table), instead of looking the ids up in the primary key.
    package static func lockedRoots(in table: String, columns: String, ids: String, condition: String? = nil) -> String {
        """
        SELECT \(columns) FROM \(table) WHERE id = ANY(\(ids))\(condition.map { " AND " + $0 } ?? "")
        ORDER BY id FOR NO KEY UPDATE
        """
    }

    package func transferTree(
        of rootID: String, ifStatusIn statuses: Set<TaskStatus>, from owner: String?, to newOwner: String?
    ) async throws -> Bool {
        guard !statuses.isEmpty else { return false }
        return try await write { [self] connection in
            // `root_id = id` names a root as `parent_id IS NULL` would, without inviting a partial index (`lockedRoots`).
            let changed = try await rows(
                """
                UPDATE \(names.tasks) SET owner_id = $1
                WHERE id = $2 AND root_id = id AND status = ANY($3::text[]) AND owner_id IS NOT DISTINCT FROM $4
                RETURNING id
                """, bindings(newOwner, rootID, statuses.map(\.rawValue).sorted(), owner), connection: connection
            ) { try $0.decode(String.self) }
            if !changed.isEmpty {
                try await connection.query(PostgresQuery(unsafeSQL: names.notify), logger: logger)
            }
            return !changed.isEmpty
        }
    }

    package func prune(finishedBefore date: Date, statuses: Set<TaskStatus>, dryRun: Bool, limit: Int?) async throws
        -> PruneResult
    {
        let finished = statuses.filter(\.isFinished).map(\.rawValue).sorted()
        guard !finished.isEmpty, limit.map({ $0 > 0 }) ?? true else { return PruneResult(roots: 0, tasks: 0) }
        return try await write { [self] connection in
            // The finished index by status and age (a root finished before `date` was created before it), oldest
            // first. A child job goes only once its parent has gone, and a job only once no unfinished job waits for
            // it. A batch (the retention's) skips roots another transaction holds instead of waiting for them.
            let cutoff = date.storedMilliseconds
            let roots = try await rows(
                """
                SELECT id FROM \(names.tasks) AS job WHERE parent_id IS NULL AND finished_at IS NOT NULL
                  AND status = ANY($1::text[]) AND created_at < $2 AND finished_at < $2
                  AND (parent_job_id IS NULL OR NOT EXISTS (
                    SELECT 1 FROM \(names.tasks) AS parent WHERE parent.id = job.parent_job_id))
                  AND NOT EXISTS (
                    SELECT 1 FROM \(names.jobDependencies) AS dependency
                    JOIN \(names.tasks) AS waiting ON waiting.id = dependency.job_id
                    WHERE dependency.depends_on = job.id AND waiting.finished_at IS NULL)
                \(limit.map { "ORDER BY created_at, id LIMIT \($0)" } ?? "ORDER BY id")
                \(dryRun ? "" : limit == nil ? "FOR UPDATE" : "FOR UPDATE SKIP LOCKED")
                """, bindings(finished, cutoff), connection: connection
            ) { try $0.decode(String.self) }
            guard !roots.isEmpty else { return PruneResult(roots: 0, tasks: 0) }
            let children = try await rows(
                "SELECT count(*) FROM \(names.tasks) WHERE root_id = ANY($1::text[]) AND parent_id IS NOT NULL",
                bindings(roots), connection: connection
            ) { try $0.decode(Int64.self) }.first ?? 0
            if !dryRun {
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "DELETE FROM \(names.events) WHERE root_id = ANY($1::text[])", binds: bindings(roots)),
                    logger: logger)
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "DELETE FROM \(names.tasks) WHERE root_id = ANY($1::text[]) AND parent_id IS NOT NULL",
                        binds: bindings(roots)), logger: logger)
                try await connection.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM \(names.tasks) WHERE id = ANY($1::text[])", binds: bindings(roots)),
                    logger: logger)
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "DELETE FROM \(names.jobDependencies) WHERE job_id = ANY($1::text[])",
                        binds: bindings(roots)), logger: logger)
                try await connection.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM \(names.signals) WHERE job_id = ANY($1::text[])", binds: bindings(roots)),
                    logger: logger)
                // Jobs waiting for one of these (a dependency removed counts as cancelled) are looked at again.
                let waited = try await rows(
                    "SELECT DISTINCT depends_on FROM \(names.jobDependencies) WHERE depends_on = ANY($1::text[])",
                    bindings(roots), connection: connection
                ) { try $0.decode(String.self) }
                if !waited.isEmpty {
                    try await queue(waited.map { TreeChange($0, .dependents) }, at: Date(), connection: connection)
                }
                try await connection.query(PostgresQuery(unsafeSQL: names.notify), logger: logger)
            }
            return PruneResult(roots: roots.count, tasks: roots.count + Int(children))
        }
    }

    package func gaugeCounts(at now: Date) async throws -> (unfinished: [UnfinishedRootGroup], failedByKind: [String: Int]) {
        try await read { [self] connection in
            let unfinished = try await rows(
                """
                SELECT coalesce(kind, ''), status, wait IS NOT NULL, coalesce(next_attempt_at, 0) <= $1, count(*),
                  min(coalesce(next_attempt_at, updated_at))
                FROM \(names.tasks) WHERE parent_id IS NULL AND finished_at IS NULL GROUP BY 1, 2, 3, 4
                """, bindings(now.storedMilliseconds), connection: connection
            ) { row in
                let (kind, status, waiting, due, count, earliest) = try row.decode(
                    (String, String, Bool, Bool, Int64, Int64?).self)
                return UnfinishedRootGroup(
                    kind: kind, status: TaskStatus(rawValue: status) ?? .pending, waiting: waiting, due: due,
                    count: Int(count), earliest: earliest.map(Date.init(storedMilliseconds:)))
            }
            var failed: [String: Int] = [:]
            for (kind, count) in try await rows(
                """
                SELECT coalesce(kind, ''), count(*) FROM \(names.tasks)
                WHERE parent_id IS NULL AND finished_at IS NOT NULL AND status = 'failed' GROUP BY 1
                """, connection: connection, { try $0.decode((String, Int64).self) })
            {
                failed[kind] = Int(count)
            }
            return (unfinished, failed)
        }
    }

    package func takeDutyTurn(_ duty: String, owner: String, now: Date, nextAt: Date) async throws -> Bool {
        try await write { [self] connection in
            try await rows(
                """
                INSERT INTO \(names.fleetDuties) AS duty (name, next_at, owner_id, taken_at) VALUES ($1, $2, $3, $4)
                ON CONFLICT (name) DO UPDATE SET next_at = excluded.next_at, owner_id = excluded.owner_id,
                  taken_at = excluded.taken_at
                WHERE duty.next_at <= $4 OR duty.owner_id = $3
                RETURNING 1
                """, bindings(duty, nextAt.storedMilliseconds, owner, now.storedMilliseconds), connection: connection
            ) { _ in true }.isEmpty == false
        }
    }

    // MARK: Owners and control requests

    package func saveOwner(_ owner: OwnerRecord) async throws {
        try await write { [self] connection in
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO \(names.owners)
                          (id, host, pid, started_at, heartbeat_at, stopped_at, kinds, slots, versions)
                        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                        ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
                          started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
                          stopped_at = excluded.stopped_at, kinds = excluded.kinds, slots = excluded.slots,
                          versions = excluded.versions
                        """,
                    binds: bindings(
                        owner.id, owner.host, owner.pid, owner.startedAt.storedMilliseconds,
                        owner.heartbeatAt.storedMilliseconds, owner.stoppedAt?.storedMilliseconds,
                        try OwnerRecord.encodeKinds(owner.kinds), owner.slots.map { Int32(clamping: $0) },
                        try OwnerRecord.encodeVersions(owner.versions))),
                logger: logger)
        }
    }

    package func addControlRequest(_ request: ControlRequest) async throws -> Int64 {
        // The notification wakes the owner on whatever host it runs.
        try await write(notify: true) { [self] connection in
            let id = try await rows(
                """
                INSERT INTO \(names.controlRequests) (task_id, action, owner_id, requested_at, handled_at, outcome)
                VALUES ($1, $2, $3, $4, $5, $6) RETURNING id
                """,
                bindings(
                    request.taskID, request.action.rawValue, request.ownerID, request.requestedAt.storedMilliseconds,
                    request.handledAt?.storedMilliseconds, request.outcome),
                connection: connection
            ) { try $0.decode(Int64.self) }.first ?? 0
            return id
        }
    }

    package func completeControlRequest(id: Int64, outcome: String, at date: Date) async throws {
        try await write(notify: true) { [self] connection in
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "UPDATE \(names.controlRequests) SET handled_at = $1, outcome = $2 WHERE id = $3",
                    binds: bindings(date.storedMilliseconds, outcome, id)),
                logger: logger)
        }
    }

    // MARK: Maintenance

    package func maintain(_ work: StoreMaintenance) async throws {
        switch work {
        case .passiveCheckpoint, .truncatingCheckpoint:
            // The server checkpoints its own log.
            return
        case .vacuum:
            let tables = [names.tasks, names.events, names.controlRequests, names.owners]
            let logger = logger
            // Housekeeping off the commit path, which may take long on a big table: no statement timeout.
            try await read(timeout: .seconds(3_600)) { (connection: PostgresConnection) -> Void in
                try await connection.query("SET statement_timeout = 0", logger: logger)
                for table in tables {
                    try await connection.query(PostgresQuery(unsafeSQL: "VACUUM (ANALYZE) \(table)"), logger: logger)
                }
                try await connection.query("RESET statement_timeout", logger: logger)
                    }
        }
    }
}

#endif
