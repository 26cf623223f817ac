#if PostgreSQL
import Foundation
import NIOCore
import PostgresNIO
import Progression

/// Job trees on PostgreSQL: dependencies, signals, and the tree keeper's queue (migration 0005).
///
/// The keeper's passes run one at a time across the fleet (a transaction-level advisory lock of the schema): its reads
/// lock nothing; before it writes, it locks the roots it changes in id order (as every writer does) and checks that
/// each still has the status and owner it planned with, else it plans again.
extension PostgresTaskStore {
    // MARK: The tree keeper's queue

    /// Queues the tree keeper's work of a batch written in the open transaction on the transaction path (the
    /// one-round-trip procedure does the same in SQL).
    func queueTreeChanges(of batch: TaskBatch, written: (String) -> Bool, at now: Date, connection: PostgresConnection)
        async throws
    {
        var (changes, finished) = batch.impliedTreeChanges(written: written)
        if !finished.isEmpty {
            let waited = try await rows(
                "SELECT DISTINCT depends_on FROM \(names.jobDependencies) WHERE depends_on = ANY($1::text[])",
                bindings(finished), connection: connection
            ) { try $0.decode(String.self) }
            changes += waited.sorted().map { TreeChange($0, .dependents) }
        }
        try await queue(changes, at: now, connection: connection)
    }

    func queue(_ changes: [TreeChange], at now: Date, connection: PostgresConnection) async throws {
        guard !changes.isEmpty else { return }
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO \(names.treeChanges) AS q (task_id, action, queued_at)
                    SELECT DISTINCT t, a, $3::int8 FROM unnest($1::text[], $2::text[]) AS c(t, a)
                    ON CONFLICT (task_id, action) DO UPDATE SET version = q.version + 1
                    """,
                binds: bindings(changes.map(\.taskID), changes.map(\.action.rawValue), now.storedMilliseconds)),
            logger: logger)
    }

    package func resolveJobTrees(at now: Date, limit: Int) async throws -> Int {
        /// A transaction's end: its changes taken, or the roots to lock first in the next one (in byte order, as every
        /// writer locks roots: locks taken in rounds out of that order could deadlock with a writer's).
        enum Pass: Sendable {
            case taken(Int)
            case again(lockFirst: [String])
        }
        var lockFirst: [String] = []
        for _ in 1...5 {
            let carried = lockFirst
            let pass: Pass = try await write(notify: true) { [self] connection in
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "SELECT pg_advisory_xact_lock(hashtext($1))", binds: bindings(names.treeChanges)),
                        logger: logger)
                    var locked = Set(carried)
                    if !carried.isEmpty {
                        _ = try await rows(
                            Self.lockedRoots(in: names.tasks, columns: "id", ids: "$1::text[]"), bindings(carried),
                            connection: connection
                        ) { try $0.decode(String.self) }
                    }
                    let queued = try await rows(
                        """
                        SELECT task_id, action, version FROM \(names.treeChanges) ORDER BY queued_at, task_id, action
                        LIMIT $1
                        """, bindings(Int64(max(1, limit))), connection: connection
                    ) { row -> (TreeChange, Int64)? in
                        let (id, action, version) = try row.decode((String, String, Int64).self)
                        return TreeChange.Action(rawValue: action).map { (TreeChange(id, $0), version) }
                    }.compactMap { $0 }
                    let changes = queued.map(\.0)
                    guard !changes.isEmpty else { return .taken(0) }
                    var reads = PostgresJobTreeReads()
                    var plan: JobTreePlan
                    var replans = 0
                    while true {
                        while true {
                            do {
                                plan = try JobTreeKeeper.plan(changes, reader: reads, now: now)
                                break
                            } catch let miss as JobTreeReadMiss {
                                reads.results[miss.read] = try await fetch(miss.read, connection: connection)
                            }
                        }
                        // Lock what it writes, then check it did not move since it was read. A row that moved is
                        // locked now and cannot move again before this transaction ends: the plan is made again from
                        // fresh reads, in this transaction (many children finishing at once move some row of a large
                        // plan nearly every time; planning anew outside would rarely catch up).
                        let assumed = plan.assumed.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
                        guard !assumed.isEmpty else { break }
                        // New locks only above those held, else the next transaction takes them all first, in order.
                        let highest = locked.max { $0.utf8.lexicographicallyPrecedes($1.utf8) }
                        if let highest, assumed.contains(where: { !locked.contains($0) && $0.utf8.lexicographicallyPrecedes(highest.utf8) }) {
                            return .again(lockFirst: Array(locked.union(assumed)).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
                        }
                        locked.formUnion(assumed)
                        let held = try await rows(
                            Self.lockedRoots(in: names.tasks, columns: "id, owner_id, status", ids: "$1::text[]"),
                            bindings(assumed), connection: connection
                        ) { try $0.decode((String, String?, String).self) }
                        var current: [String: BatchFence.Holder] = [:]
                        for (id, owner, status) in held {
                            current[id] = BatchFence.Holder(owner: owner, status: TaskStatus(rawValue: status))
                        }
                        if assumed.allSatisfy({ current[$0] == plan.assumed[$0] }) { break }
                        replans += 1
                        if replans >= 8 { return .again(lockFirst: locked.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }) }
                        reads = PostgresJobTreeReads()
                    }
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL: """
                                DELETE FROM \(names.treeChanges) AS q
                                USING unnest($1::text[], $2::text[], $3::int8[]) AS c(t, a, v)
                                WHERE q.task_id = c.t AND q.action = c.a AND q.version = c.v
                                """,
                            binds: bindings(
                                changes.map(\.taskID), changes.map(\.action.rawValue), queued.map(\.1))),
                        logger: logger)
                    _ = try await apply(plan.batch, connection: connection, at: now)
                    return .taken(changes.count)
                }
            switch pass {
            case .taken(let count): return count
            case .again(let roots): lockFirst = roots
            }
        }
        throw TaskStoreError(
            .busy, path: location, message: "the tree keeper's rows kept changing while it planned; it tries again")
    }

    /// Reads what the tree keeper asked for.
    private func fetch(_ read: JobTreeReadMiss.Read, connection: PostgresConnection) async throws
        -> PostgresJobTreeReads.Result
    {
        let select = "SELECT \(Self.columns) FROM \(names.tasks)"
        func records(_ condition: String, _ values: PostgresBindings) async throws -> [TaskRecord] {
            try await rows("\(select) WHERE \(condition)", values, connection: connection) { try record(from: $0) }
        }
        func dependencies(_ column: String, _ ids: [String]) async throws -> [JobDependency] {
            try await rows(
                """
                SELECT job_id, depends_on, on_failure FROM \(names.jobDependencies) WHERE \(column) = ANY($1::text[])
                ORDER BY job_id, depends_on
                """, bindings(ids), connection: connection
            ) { row in
                let (job, dependsOn, policy) = try row.decode((String, String, String).self)
                return JobDependency(
                    jobID: job, dependsOn: dependsOn, onFailure: DependencyFailurePolicy(rawValue: policy) ?? .cancel)
            }
        }
        switch read {
        case .records(let ids):
            return .records(try await records("id = ANY($1::text[])", bindings(ids)))
        case .linksOfChildren(let children):
            return .records(
                try await records("child_job_id = ANY($1::text[]) AND child_job_id IS NOT NULL", bindings(children)))
        case .linksInTrees(let roots):
            return .records(
                try await records("root_id = ANY($1::text[]) AND child_job_id IS NOT NULL", bindings(roots)))
        case .subtrees(let ids):
            let all = try await records(
                "root_id IN (SELECT root_id FROM \(names.tasks) WHERE id = ANY($1::text[]))", bindings(ids))
            var trees: [String: [TaskRecord]] = [:]
            for id in ids where all.contains(where: { $0.id == id }) {
                trees[id] = TaskTreeOrder.subtree(of: id, in: all)
            }
            return .trees(trees)
        case .dependencies(let ids):
            return .dependencies(try await dependencies("job_id", ids))
        case .dependents(let ids):
            return .dependencies(try await dependencies("depends_on", ids))
        case .awaitedLinks(let root):
            return .awaited(
                try await rows(
                    "SELECT id, finished_at IS NOT NULL FROM \(names.tasks) WHERE root_id = $1 AND awaited = 1",
                    bindings(root), connection: connection
                ) { row in
                    let (id, finished) = try row.decode((String, Bool).self)
                    return (id: id, finished: finished)
                })
        case .unfinishedAwaitedLinks(let root, let limit):
            return .ids(
                try await rows(
                    """
                    SELECT id FROM \(names.tasks) WHERE root_id = $1 AND awaited = 1 AND finished_at IS NULL LIMIT $2
                    """, bindings(root, Int64(limit)), connection: connection
                ) { try $0.decode(String.self) })
        case .signal(let job, let name):
            let found = try await rows(
                """
                SELECT 1 FROM \(names.signals) WHERE job_id = $1 AND name = $2 AND consumed_by IS NULL LIMIT 1
                """, bindings(job, name), connection: connection
            ) { _ in true }
            return .flag(!found.isEmpty)
        }
    }

    // MARK: Dependencies

    package func insert(_ tasks: [TaskRecord], events: [TaskEvent], dependencies: [JobDependency]) async throws {
        // A bad dependency is the caller's to see as it is: checked first, and nothing is written then.
        let outcome: Result<Void, JobDependencyError> = try await write(notify: true) { [self] connection in
            let new = Set(tasks.map(\.id))
            let others = Array(Set(dependencies.map(\.dependsOn)).subtracting(new)).sorted()
            var found: [String: Bool] = [:]
            if !others.isEmpty {
                // Locked, so that none of them is removed before this commits.
                for (id, isRoot) in try await rows(
                    """
                    SELECT id, parent_id IS NULL FROM \(names.tasks) WHERE id = ANY($1::text[]) ORDER BY id
                    FOR KEY SHARE
                    """, bindings(others), connection: connection, { try $0.decode((String, Bool).self) })
                {
                    found[id] = isRoot
                }
            }
            for id in others {
                guard let isRoot = found[id] else { return .failure(.unknownJob(id)) }
                guard isRoot else { return .failure(.notAJob(id)) }
            }
            if !tasks.isEmpty {
                try await connection.query(
                    PostgresQuery(unsafeSQL: insertSQL(onConflict: ""), binds: try columnArrays(tasks)), logger: logger)
            }
            try await insertEvents(events, connection: connection)
            guard !dependencies.isEmpty else { return .success(()) }
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO \(names.jobDependencies) (job_id, depends_on, on_failure)
                        SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT DO NOTHING
                        """,
                    binds: bindings(
                        dependencies.map(\.jobID), dependencies.map(\.dependsOn), dependencies.map(\.onFailure.rawValue))),
                logger: logger)
            let waiting = Set(dependencies.map(\.jobID))
            try await queue(
                tasks.filter { waiting.contains($0.id) }.map { TreeChange($0.id, .recount) },
                at: tasks.first?.createdAt ?? Date(), connection: connection)
            return .success(())
        }
        try outcome.get()
    }

    package func dependencies(of jobID: String) async throws -> [JobDependency] {
        try await read { [self] connection in
            guard case .dependencies(let found) = try await fetch(.dependencies([jobID]), connection: connection) else {
                return []
            }
            return found
        }
    }

    package func dependents(of jobID: String) async throws -> [JobDependency] {
        try await read { [self] connection in
            guard case .dependencies(let found) = try await fetch(.dependents([jobID]), connection: connection) else {
                return []
            }
            return found
        }
    }

    package func tasks(ids: [String]) async throws -> [TaskRecord] {
        guard !ids.isEmpty else { return [] }
        return try await read { [self] connection in
            try await rows(
                "SELECT \(Self.columns) FROM \(names.tasks) WHERE id = ANY($1::text[])", bindings(ids),
                connection: connection
            ) { try record(from: $0) }
        }
    }

    // MARK: Signals

    static let signalColumns = "id, job_id, name, payload, sent_at, consumed_by, consumed_at"

    func signal(from row: PostgresRow) throws -> JobSignalRecord {
        let cells = row.makeRandomAccess()
        return JobSignalRecord(
            sequence: try cells[0].decode(Int64.self), jobID: try cells[1].decode(String.self),
            name: try cells[2].decode(String.self),
            payload: try cells[3].decode(ByteBuffer?.self).map { Data($0.readableBytesView) },
            sentAt: Date(storedMilliseconds: try cells[4].decode(Int64.self)),
            consumedBy: try cells[5].decode(String?.self),
            consumedAt: try cells[6].decode(Int64?.self).map(Date.init(storedMilliseconds:)))
    }

    package func sendSignal(to jobID: String, name: String, payload: Data?, at date: Date) async throws
        -> JobSignalRecord
    {
        let location = location
        let outcome: Result<JobSignalRecord, ProgressionError> = try await write(notify: true) { [self] connection in
            let job = try await rows(
                "SELECT \(Self.columns) FROM \(names.tasks) WHERE id = $1 FOR NO KEY UPDATE", bindings(jobID),
                connection: connection
            ) { try record(from: $0) }.first
            var target: TaskRecord
            do {
                target = try JobSignalRecord.check(job, id: jobID, name: name)
            } catch let error as ProgressionError {
                return .failure(error)
            }
            let sequence = try await rows(
                """
                INSERT INTO \(names.signals) (job_id, name, payload, sent_at) VALUES ($1, $2, $3, $4) RETURNING id
                """, bindings(jobID, name, payload.map { ByteBuffer(bytes: $0) }, date.storedMilliseconds),
                connection: connection
            ) { try $0.decode(Int64.self) }.first ?? 0
            try await insertEvents([JobSignalRecord.sentEvent(to: target, name: name, at: date)], connection: connection)
            if target.wait == .signal(name), target.ownerID == nil {
                let before = target
                target.releaseWait(at: date)
                _ = try await apply(
                    TaskBatch(updates: [TaskUpdate(target, columns: TaskColumns.changed(from: before, to: target))]),
                    connection: connection, at: date)
            }
            return .success(
                JobSignalRecord(
                    sequence: sequence, jobID: jobID, name: name, payload: payload, sentAt: date.roundedToMilliseconds))
        }
        _ = location
        return try outcome.get()
    }

    package func takeSignal(job jobID: String, name: String, step: String, owner: String, at date: Date) async throws
        -> JobSignalRecord?
    {
        let location = location
        return try await write { [self] connection in
            let holder = try await rows(
                "SELECT owner_id FROM \(names.tasks) WHERE id = $1 FOR NO KEY UPDATE", bindings(jobID),
                connection: connection
            ) { try $0.decode(String?.self) }.first
            guard holder == owner else {
                throw TaskStoreError(.conflict, path: location, message: "job '\(jobID)' is no longer held by owner '\(owner)'")
            }
            let select = "SELECT \(Self.signalColumns) FROM \(names.signals)"
            if let taken = try await rows(
                "\(select) WHERE job_id = $1 AND name = $2 AND consumed_by = $3 LIMIT 1", bindings(jobID, name, step),
                connection: connection, { try signal(from: $0) }
            ).first {
                return taken
            }
            return try await rows(
                """
                UPDATE \(names.signals) SET consumed_by = $3, consumed_at = $4
                WHERE id = (SELECT id FROM \(names.signals) WHERE job_id = $1 AND name = $2 AND consumed_by IS NULL
                    ORDER BY id LIMIT 1)
                RETURNING \(Self.signalColumns)
                """, bindings(jobID, name, step, date.storedMilliseconds), connection: connection
            ) { try signal(from: $0) }.first
        }
    }

    package func signals(of jobID: String) async throws -> [JobSignalRecord] {
        try await read { [self] connection in
            try await rows(
                "SELECT \(Self.signalColumns) FROM \(names.signals) WHERE job_id = $1 ORDER BY id", bindings(jobID),
                connection: connection
            ) { try signal(from: $0) }
        }
    }

    /// Deletes the child jobs of a removed tree (`nodes`), with their trees, history, dependencies and signals,
    /// whatever their status. Returns how many tasks it deleted.
    func deleteChildJobs(of nodes: [TaskRecord], connection: PostgresConnection, at now: Date) async throws -> Int {
        var deleted = 0
        for childID in nodes.compactMap(\.childJobID) {
            let tree = try await subtree(of: childID, connection: connection, lock: true)
            guard let top = tree.first, top.isRoot else { continue }
            try await connection.query(
                PostgresQuery(unsafeSQL: "DELETE FROM \(names.events) WHERE root_id = $1", binds: bindings(childID)),
                logger: logger)
            try await connection.query(
                PostgresQuery(unsafeSQL: "DELETE FROM \(names.tasks) WHERE root_id = $1", binds: bindings(childID)),
                logger: logger)
            deleted += tree.count
            deleted += try await deleteChildJobs(of: tree, connection: connection, at: now)
            try await deleteJobTreeRows(of: childID, at: now, connection: connection)
        }
        return deleted
    }

    /// Deletes what a removed job leaves besides its tree: its dependencies and signals (its dependents keep theirs,
    /// and are looked at again: a removed dependency counts as cancelled).
    func deleteJobTreeRows(of rootID: String, at now: Date, connection: PostgresConnection) async throws {
        try await connection.query(
            PostgresQuery(unsafeSQL: "DELETE FROM \(names.jobDependencies) WHERE job_id = $1", binds: bindings(rootID)),
            logger: logger)
        try await connection.query(
            PostgresQuery(unsafeSQL: "DELETE FROM \(names.signals) WHERE job_id = $1", binds: bindings(rootID)),
            logger: logger)
        let waited = try await rows(
            "SELECT 1 FROM \(names.jobDependencies) WHERE depends_on = $1 LIMIT 1", bindings(rootID),
            connection: connection
        ) { _ in true }
        if !waited.isEmpty { try await queue([TreeChange(rootID, .dependents)], at: now, connection: connection) }
    }
}

/// What the tree keeper read so far on PostgreSQL; a read it has not made yet is asked for (``JobTreeReadMiss``).
struct PostgresJobTreeReads: JobTreeReading {
    enum Result {
        case records([TaskRecord])
        case trees([String: [TaskRecord]])
        case dependencies([JobDependency])
        case awaited([(id: String, finished: Bool)])
        case ids([String])
        case flag(Bool)
    }

    var results: [JobTreeReadMiss.Read: Result] = [:]

    private func result(_ read: JobTreeReadMiss.Read) throws -> Result {
        guard let result = results[read] else { throw JobTreeReadMiss(read) }
        return result
    }

    private func records(_ read: JobTreeReadMiss.Read) throws -> [TaskRecord] {
        if case .records(let found) = try result(read) { return found }
        return []
    }

    func records(_ ids: [String]) throws -> [TaskRecord] {
        guard !ids.isEmpty else { return [] }
        return try records(.records(ids))
    }

    func links(ofChildren ids: [String]) throws -> [TaskRecord] {
        guard !ids.isEmpty else { return [] }
        return try records(.linksOfChildren(ids))
    }

    func links(inTreesOf roots: [String]) throws -> [TaskRecord] {
        guard !roots.isEmpty else { return [] }
        return try records(.linksInTrees(roots))
    }

    func subtrees(of ids: [String]) throws -> [String: [TaskRecord]] {
        guard !ids.isEmpty else { return [:] }
        if case .trees(let trees) = try result(.subtrees(ids)) { return trees }
        return [:]
    }

    private func dependencies(_ read: JobTreeReadMiss.Read) throws -> [JobDependency] {
        if case .dependencies(let found) = try result(read) { return found }
        return []
    }

    func dependencies(ofJobs ids: [String]) throws -> [JobDependency] {
        guard !ids.isEmpty else { return [] }
        return try dependencies(.dependencies(ids))
    }

    func dependents(of ids: [String]) throws -> [JobDependency] {
        guard !ids.isEmpty else { return [] }
        return try dependencies(.dependents(ids))
    }

    func awaitedLinks(of root: String) throws -> [(id: String, finished: Bool)] {
        if case .awaited(let found) = try result(.awaitedLinks(root)) { return found }
        return []
    }

    func unfinishedAwaitedLinks(of root: String, limit: Int) throws -> [String] {
        if case .ids(let found) = try result(.unfinishedAwaitedLinks(root, limit: limit)) { return found }
        return []
    }

    func hasSignalToTake(job: String, name: String) throws -> Bool {
        if case .flag(let found) = try result(.signal(job: job, name: name)) { return found }
        return false
    }
}

extension PostgresNames {
    var jobDependencies: String { "\(quoted).job_dependencies" }
    var signals: String { "\(quoted).signals" }
    var treeChanges: String { "\(quoted).tree_changes" }
    var fleetDuties: String { "\(quoted).fleet_duties" }
}
#endif
