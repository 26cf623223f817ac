import Foundation
import ProgressionSQLite

/// Job kinds with their limits and pauses, jobs that wait for a time, and schedules.
extension SQLiteTaskStore {
    // MARK: Job kinds

    package func saveKinds(_ kinds: [String: StoredKind], at date: Date) async throws {
        guard !kinds.isEmpty else { return }
        try await write { connection in
            let upsert = try connection.cachedStatement(
                """
                INSERT INTO job_kinds (name, options, updated_at, max_concurrent) VALUES (?, ?, ?, ?)
                ON CONFLICT(name) DO UPDATE SET options = excluded.options, updated_at = excluded.updated_at,
                  max_concurrent = excluded.max_concurrent
                """)
            for (name, kind) in kinds.sorted(by: { $0.key < $1.key }) {
                try upsert.execute([
                    .text(name), .text(try encodedOptions(kind.options)), .integer(date.storedMilliseconds),
                    SQLiteValue(kind.maxConcurrent.map(Int64.init)),
                ])
            }
        }
    }

    package func registeredKinds() async throws -> [String: StoredKind] {
        try await read { connection in
            let rows = try connection.query("SELECT name, options, max_concurrent FROM job_kinds ORDER BY name") {
                (name: $0.text(at: 0), options: $0.text(at: 1), limit: $0.optionalInt64(at: 2))
            }
            let options = try TaskOptions.decodeKinds(rows.map { ($0.name, $0.options) }, decoder: decoder, location: path)
            var kinds: [String: StoredKind] = [:]
            for row in rows {
                kinds[row.name] = StoredKind(options: options[row.name] ?? .default, maxConcurrent: row.limit.map(Int.init))
            }
            return kinds
        }
    }

    package func setKindPaused(_ kind: String, paused: Bool, at date: Date) async throws -> Bool {
        try await write { connection in
            if paused {
                try connection.execute(
                    "INSERT INTO paused_kinds (name, paused_at) VALUES (?, ?) ON CONFLICT(name) DO NOTHING",
                    [.text(kind), .integer(date.storedMilliseconds)])
            } else {
                try connection.execute("DELETE FROM paused_kinds WHERE name = ?", [.text(kind)])
            }
            return connection.changes > 0
        }
    }

    package func pausedKinds() async throws -> [String: Date] {
        try await read { connection in
            var kinds: [String: Date] = [:]
            for row in try connection.query("SELECT name, paused_at FROM paused_kinds", [], {
                ($0.text(at: 0), Date(storedMilliseconds: $0.int64(at: 1)))
            }) {
                kinds[row.0] = row.1
            }
            return kinds
        }
    }

    /// The claim's plan (``ClaimPlan``) from the kinds paused, the limits and the roots of limited kinds owned now:
    /// read in the claim's transaction, so that no two claims both see room for the same job.
    func claimPlan(_ claim: RootClaim, connection: SQLiteConnection) throws -> ClaimPlan {
        // The kinds paused and the limits, in one statement.
        var paused: Set<String> = []
        var limits: [String: Int] = [:]
        for row in try connection.query(
            """
            SELECT 0, name, 0 FROM paused_kinds
            UNION ALL SELECT 1, name, max_concurrent FROM job_kinds WHERE max_concurrent IS NOT NULL
            """, [], { ($0.int64(at: 0), $0.text(at: 1), Int($0.int64(at: 2))) })
        {
            if row.0 == 0 {
                paused.insert(row.1)
            } else if claim.kinds?.contains(row.1) ?? true {
                limits[row.1] = row.2
            }
        }
        guard !limits.isEmpty else { return ClaimPlan(claim, paused: paused, limits: [:], owned: [:]) }
        // Owned unfinished roots that are not paused: running, or claimed to start now.
        var owned: [String: Int] = [:]
        for row in try connection.query(
            """
            SELECT kind, count(*) FROM tasks INDEXED BY tasks_roots_unfinished
            WHERE parent_id IS NULL AND finished_at IS NULL AND owner_id IS NOT NULL
              AND (status = 'running' OR status = 'pending') AND kind IS NOT NULL
            GROUP BY kind
            """, [], { ($0.text(at: 0), Int($0.int64(at: 1))) })
        where limits[row.0] != nil {
            owned[row.0] = row.1
        }
        return ClaimPlan(claim, paused: paused, limits: limits, owned: owned)
    }

    // MARK: Waiting jobs

    package func nextWaitingTime(after date: Date) async throws -> Date? {
        try await read { connection in try nextWaitingTime(after: date, connection: connection) }
    }

    /// ``nextWaitingTime(after:)`` on `connection` (a claim's transaction reads it too, ``ClaimStarts``).
    func nextWaitingTime(after date: Date, connection: SQLiteConnection) throws -> Date? {
        try connection.scalarInt(
            """
            SELECT next_attempt_at FROM tasks INDEXED BY tasks_roots_waiting
            WHERE parent_id IS NULL AND finished_at IS NULL AND next_attempt_at IS NOT NULL AND next_attempt_at > ?
              AND status = 'pending'
            ORDER BY next_attempt_at LIMIT 1
            """, [.integer(date.storedMilliseconds)]
        ).map(Date.init(storedMilliseconds:))
    }

    // MARK: Schedules

    static let scheduleColumns = """
        name, kind, input, cron, time_zone, missed, max_missed, job_name, options, priority, paused, next_fire_at, \
        last_fire_at, last_job_id, declared_by, updated_at
        """

    func schedule(from row: SQLiteStatement) throws -> ScheduleRecord {
        let name = row.text(at: 0)
        guard let missed = MissedTicks(storedName: row.text(at: 5), maximum: Int(row.int64(at: 6))) else {
            throw TaskStoreError(
                .corrupt, path: path, message: "schedule '\(name)' cannot be read: unknown policy '\(row.text(at: 5))'")
        }
        var options: TaskOptions?
        if let text = row.optionalText(at: 8) {
            do {
                options = try decoder.decode(TaskOptions.self, from: Data(text.utf8))
            } catch {
                throw TaskStoreError(
                    .corrupt, path: path, message: "schedule '\(name)' cannot be read: its options do not decode")
            }
        }
        return ScheduleRecord(
            name: name, kind: row.text(at: 1), input: row.optionalBlob(at: 2).map { Data($0) }, cron: row.text(at: 3),
            timeZone: row.text(at: 4), missed: missed, jobName: row.optionalText(at: 7), options: options,
            priority: Int(row.int64(at: 9)), paused: row.int64(at: 10) != 0,
            nextFireAt: Date(storedMilliseconds: row.int64(at: 11)),
            lastFireAt: row.optionalInt64(at: 12).map(Date.init(storedMilliseconds:)), lastJobID: row.optionalText(at: 13),
            declaredBy: row.optionalText(at: 14), updatedAt: Date(storedMilliseconds: row.int64(at: 15)))
    }

    private func scheduleValues(_ schedule: ScheduleRecord) throws -> [SQLiteValue] {
        [
            .text(schedule.name), .text(schedule.kind), SQLiteValue(schedule.input.map { [UInt8]($0) }), .text(schedule.cron),
            .text(schedule.timeZone), .text(schedule.missed.storedName), .integer(Int64(schedule.missed.storedMaximum)),
            SQLiteValue(schedule.jobName), SQLiteValue(try schedule.options.map { try encodedOptions($0) }),
            .integer(Int64(schedule.priority)), .integer(schedule.paused ? 1 : 0),
            .integer(schedule.nextFireAt.storedMilliseconds), SQLiteValue(schedule.lastFireAt?.storedMilliseconds),
            SQLiteValue(schedule.lastJobID), SQLiteValue(schedule.declaredBy), .integer(schedule.updatedAt.storedMilliseconds),
        ]
    }

    package func saveSchedules(_ schedules: [ScheduleRecord], at date: Date) async throws -> [ScheduleRecord] {
        try await write { connection in
            var saved: [ScheduleRecord] = []
            for var schedule in schedules {
                let stored = try connection.query(
                    "SELECT \(Self.scheduleColumns) FROM schedules WHERE name = ?", [.text(schedule.name)]
                ) { try self.schedule(from: $0) }.first
                if let stored {
                    schedule.lastFireAt = stored.lastFireAt
                    schedule.lastJobID = stored.lastJobID
                    schedule.paused = stored.paused
                    if stored.hasSameTicks(as: schedule) { schedule.nextFireAt = stored.nextFireAt }
                }
                schedule.updatedAt = date
                try connection.execute(
                    "INSERT OR REPLACE INTO schedules (\(Self.scheduleColumns)) VALUES (\(Self.placeholders(16)))",
                    try scheduleValues(schedule))
                saved.append(schedule)
            }
            return saved
        }
    }

    package func schedules() async throws -> [ScheduleRecord] {
        try await read { connection in
            try connection.query("SELECT \(Self.scheduleColumns) FROM schedules ORDER BY name") {
                try schedule(from: $0)
            }
        }
    }

    package func dueSchedules(at date: Date, limit: Int) async throws -> [ScheduleRecord] {
        try await read { connection in
            try connection.query(
                """
                SELECT \(Self.scheduleColumns) FROM schedules INDEXED BY schedules_due
                WHERE paused = 0 AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ?
                """, [.integer(date.storedMilliseconds), .integer(Int64(max(0, limit)))]
            ) { try schedule(from: $0) }
        }
    }

    package func earliestScheduleTick(after date: Date) async throws -> Date? {
        try await read { connection in
            try connection.scalarInt(
                """
                SELECT next_fire_at FROM schedules INDEXED BY schedules_due WHERE paused = 0 AND next_fire_at > ?
                ORDER BY next_fire_at LIMIT 1
                """, [.integer(date.storedMilliseconds)]
            ).map(Date.init(storedMilliseconds:))
        }
    }

    package func fireSchedule(_ fire: ScheduleFire) async throws -> Bool {
        try await write { connection in
            try connection.execute(
                """
                UPDATE schedules SET next_fire_at = ?, last_fire_at = coalesce(?, last_fire_at),
                  last_job_id = coalesce(?, last_job_id)
                WHERE name = ? AND next_fire_at = ? AND paused = 0
                """,
                [
                    .integer(fire.nextFireAt.storedMilliseconds), SQLiteValue(fire.firedTick?.storedMilliseconds),
                    SQLiteValue(fire.jobs.last?.id), .text(fire.name), .integer(fire.expectedNextFireAt.storedMilliseconds),
                ])
            guard connection.changes > 0 else { return false }
            // The tick's key refuses a second job for it whatever happened to the compare-and-set.
            _ = try apply(TaskBatch(inserts: fire.jobs, events: fire.events), connection: connection)
            return true
        }
    }

    package func setSchedulePaused(
        _ name: String, paused: Bool, nextFireAt: Date?, at date: Date
    ) async throws -> ScheduleRecord? {
        try await write { connection in
            try connection.execute(
                """
                UPDATE schedules SET paused = ?, next_fire_at = coalesce(?, next_fire_at), updated_at = ?
                WHERE name = ?
                """,
                [
                    .integer(paused ? 1 : 0), SQLiteValue(nextFireAt?.storedMilliseconds),
                    .integer(date.storedMilliseconds), .text(name),
                ])
            return try connection.query(
                "SELECT \(Self.scheduleColumns) FROM schedules WHERE name = ?", [.text(name)]
            ) { try schedule(from: $0) }.first
        }
    }

    package func removeSchedule(_ name: String) async throws -> Bool {
        try await write { connection in
            try connection.execute("DELETE FROM schedules WHERE name = ?", [.text(name)])
            return connection.changes > 0
        }
    }

    package func forgetIdleOwners(_ ids: [String]) async throws -> Int {
        guard !ids.isEmpty else { return 0 }
        let list = String(decoding: try JSONEncoder().encode(ids), as: UTF8.self)
        return try await write { connection in
            // The unfinished roots an owner holds are found by tasks_roots_unfinished (owner_id first).
            try connection.execute(
                """
                DELETE FROM owners WHERE id IN (SELECT value FROM json_each(?)) AND NOT EXISTS (
                  SELECT 1 FROM tasks WHERE parent_id IS NULL AND finished_at IS NULL AND owner_id = owners.id)
                """, [.text(list)])
            return connection.changes
        }
    }

    // MARK: Partial failure

    public func failedSteps(ofRoots ids: [String]) async throws -> [String: Int] {
        guard !ids.isEmpty else { return [:] }
        return try await read { connection in
            let count = try connection.cachedStatement(
                """
                SELECT count(*) FROM tasks INDEXED BY tasks_failed_steps
                WHERE root_id = ? AND parent_id IS NOT NULL AND status = 'failed'
                """)
            var counts: [String: Int] = [:]
            for id in Set(ids) {
                let failed = try count.query([.text(id)]) { Int($0.int64(at: 0)) }.first ?? 0
                if failed > 0 { counts[id] = failed }
            }
            return counts
        }
    }
}
