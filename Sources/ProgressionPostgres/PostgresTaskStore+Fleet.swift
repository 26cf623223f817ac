#if PostgreSQL
import Foundation
import PostgresNIO
import Progression

/// Job kinds with their limits and pauses, jobs that wait for a time, and schedules.
extension PostgresTaskStore {
    // MARK: Job kinds

    package func saveKinds(_ kinds: [String: StoredKind], at date: Date) async throws {
        guard !kinds.isEmpty else { return }
        let sorted = kinds.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        let options = try sorted.map { try encodedOptions($0.value.options) }
        let limits = sorted.map { $0.value.maxConcurrent.map(Int64.init) ?? -1 }
        try await write { [self] connection in
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO \(names.jobKinds) (name, options, updated_at, max_concurrent)
                        SELECT name, options, $3, nullif(max_concurrent, -1)
                        FROM unnest($1::text[], $2::text[], $4::int8[]) AS k(name, options, max_concurrent)
                        ON CONFLICT (name) DO UPDATE SET options = excluded.options, updated_at = excluded.updated_at,
                          max_concurrent = excluded.max_concurrent
                        """, binds: bindings(sorted.map(\.key), options, date.storedMilliseconds, limits)),
                logger: logger)
        }
    }

    package func registeredKinds() async throws -> [String: StoredKind] {
        let stored = try await read { [self] connection in
            try await self.rows(
                "SELECT name, options, max_concurrent FROM \(names.jobKinds) ORDER BY name", connection: connection
            ) { try $0.decode((String, String, Int?).self) }
        }
        let options = try TaskOptions.decodeKinds(
            stored.map { (name: $0.0, options: $0.1) }, decoder: decoder, location: location)
        var kinds: [String: StoredKind] = [:]
        for (name, _, limit) in stored {
            kinds[name] = StoredKind(options: options[name] ?? .default, maxConcurrent: limit)
        }
        return kinds
    }

    package func setKindPaused(_ kind: String, paused: Bool, at date: Date) async throws -> Bool {
        try await write { [self] connection in
            let sql =
                paused
                ? "INSERT INTO \(names.pausedKinds) (name, paused_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING 1"
                : "DELETE FROM \(names.pausedKinds) WHERE name = $1 AND $2::int8 IS NOT NULL RETURNING 1"
            let changed = try await rows(sql, bindings(kind, date.storedMilliseconds), connection: connection) {
                try $0.decode(Int.self)
            }
            try await connection.query(PostgresQuery(unsafeSQL: names.notify), logger: logger)
            return !changed.isEmpty
        }
    }

    package func pausedKinds() async throws -> [String: Date] {
        try await read { [self] connection in
            var kinds: [String: Date] = [:]
            for (name, at) in try await rows(
                "SELECT name, paused_at FROM \(names.pausedKinds)", connection: connection,
                { try $0.decode((String, Int64).self) })
            {
                kinds[name] = Date(storedMilliseconds: at)
            }
            return kinds
        }
    }

    // MARK: Waiting jobs

    package func nextWaitingTime(after date: Date) async throws -> Date? {
        try await read { [self] connection in
            try await rows(
                prepared: """
                SELECT next_attempt_at FROM \(names.tasks)
                WHERE parent_id IS NULL AND finished_at IS NULL AND next_attempt_at IS NOT NULL AND next_attempt_at > $1
                  AND status = 'pending'
                ORDER BY next_attempt_at LIMIT 1
                """, bindings(date.storedMilliseconds), connection: connection
            ) { try $0.decode(Int64.self) }.first.map(Date.init(storedMilliseconds:))
        }
    }

    // MARK: Schedules

    private var scheduleColumns: String {
        """
        name, kind, input, cron, time_zone, missed, max_missed, job_name, options, priority, paused, next_fire_at, \
        last_fire_at, last_job_id, declared_by, updated_at
        """
    }

    private func schedule(from row: PostgresRow) throws -> ScheduleRecord {
        let columns = row.makeRandomAccess()
        let name = try columns[0].decode(String.self)
        let kind = try columns[1].decode(String.self)
        let input = try columns[2].decode(ByteBuffer?.self)
        let cron = try columns[3].decode(String.self)
        let zone = try columns[4].decode(String.self)
        let missedText = try columns[5].decode(String.self)
        let maxMissed = try columns[6].decode(Int.self)
        let jobName = try columns[7].decode(String?.self)
        let optionsText = try columns[8].decode(String?.self)
        let priority = try columns[9].decode(Int.self)
        let paused = try columns[10].decode(Bool.self)
        let nextFireAt = try columns[11].decode(Int64.self)
        let lastFireAt = try columns[12].decode(Int64?.self)
        let lastJobID = try columns[13].decode(String?.self)
        let declaredBy = try columns[14].decode(String?.self)
        let updatedAt = try columns[15].decode(Int64.self)
        guard let missed = MissedTicks(storedName: missedText, maximum: maxMissed) else {
            throw TaskStoreError(
                .corrupt, path: location, message: "schedule '\(name)' cannot be read: unknown policy '\(missedText)'")
        }
        var options: TaskOptions?
        if let optionsText {
            do {
                options = try decoder.decode(TaskOptions.self, from: Data(optionsText.utf8))
            } catch {
                throw TaskStoreError(
                    .corrupt, path: location, message: "schedule '\(name)' cannot be read: its options do not decode")
            }
        }
        return ScheduleRecord(
            name: name, kind: kind, input: input.map { Data($0.readableBytesView) }, cron: cron, timeZone: zone,
            missed: missed, jobName: jobName, options: options, priority: priority, paused: paused,
            nextFireAt: Date(storedMilliseconds: nextFireAt), lastFireAt: lastFireAt.map(Date.init(storedMilliseconds:)),
            lastJobID: lastJobID, declaredBy: declaredBy, updatedAt: Date(storedMilliseconds: updatedAt))
    }

    package func saveSchedules(_ schedules: [ScheduleRecord], at date: Date) async throws -> [ScheduleRecord] {
        var encoded: [String: String?] = [:]
        for schedule in schedules { encoded[schedule.name] = try schedule.options.map { try encodedOptions($0) } }
        let options = encoded
        return try await write { [self] connection in
            let encoded = options
            var saved: [ScheduleRecord] = []
            for var schedule in schedules {
                let stored = try await rows(
                    "SELECT \(scheduleColumns) FROM \(names.schedules) WHERE name = $1 FOR UPDATE",
                    bindings(schedule.name), connection: connection
                ) { try self.schedule(from: $0) }.first
                if let stored {
                    schedule.lastFireAt = stored.lastFireAt
                    schedule.lastJobID = stored.lastJobID
                    schedule.paused = stored.paused
                    if stored.hasSameTicks(as: schedule) { schedule.nextFireAt = stored.nextFireAt }
                }
                schedule.updatedAt = date
                var binds = PostgresBindings()
                binds.append(schedule.name)
                binds.append(schedule.kind)
                if let input = schedule.input { binds.append(ByteBuffer(bytes: input)) } else { binds.appendNull() }
                binds.append(schedule.cron)
                binds.append(schedule.timeZone)
                binds.append(schedule.missed.storedName)
                binds.append(schedule.missed.storedMaximum)
                if let name = schedule.jobName { binds.append(name) } else { binds.appendNull() }
                if let options = encoded[schedule.name] ?? nil { binds.append(options) } else { binds.appendNull() }
                binds.append(schedule.priority)
                binds.append(schedule.paused)
                binds.append(schedule.nextFireAt.storedMilliseconds)
                if let last = schedule.lastFireAt { binds.append(last.storedMilliseconds) } else { binds.appendNull() }
                if let job = schedule.lastJobID { binds.append(job) } else { binds.appendNull() }
                if let owner = schedule.declaredBy { binds.append(owner) } else { binds.appendNull() }
                binds.append(date.storedMilliseconds)
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO \(names.schedules) (\(scheduleColumns))
                            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
                            ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, input = excluded.input,
                              cron = excluded.cron, time_zone = excluded.time_zone, missed = excluded.missed,
                              max_missed = excluded.max_missed, job_name = excluded.job_name, options = excluded.options,
                              priority = excluded.priority, paused = excluded.paused,
                              next_fire_at = excluded.next_fire_at, last_fire_at = excluded.last_fire_at,
                              last_job_id = excluded.last_job_id, declared_by = excluded.declared_by,
                              updated_at = excluded.updated_at
                            """, binds: binds), logger: logger)
                saved.append(schedule)
            }
            try await connection.query(PostgresQuery(unsafeSQL: names.notify), logger: logger)
            return saved
        }
    }

    package func schedules() async throws -> [ScheduleRecord] {
        try await read { [self] connection in
            try await rows("SELECT \(scheduleColumns) FROM \(names.schedules) ORDER BY name", connection: connection) {
                try self.schedule(from: $0)
            }
        }
    }

    package func dueSchedules(at date: Date, limit: Int) async throws -> [ScheduleRecord] {
        try await read { [self] connection in
            try await rows(
                """
                SELECT \(scheduleColumns) FROM \(names.schedules) WHERE NOT paused AND next_fire_at <= $1
                ORDER BY next_fire_at LIMIT $2
                """, bindings(date.storedMilliseconds, Int64(max(0, limit))), connection: connection
            ) { try self.schedule(from: $0) }
        }
    }

    package func earliestScheduleTick(after date: Date) async throws -> Date? {
        try await read { [self] connection in
            try await rows(
                """
                SELECT next_fire_at FROM \(names.schedules) WHERE NOT paused AND next_fire_at > $1
                ORDER BY next_fire_at LIMIT 1
                """, bindings(date.storedMilliseconds), connection: connection
            ) { try $0.decode(Int64.self) }.first.map(Date.init(storedMilliseconds:))
        }
    }

    package func fireSchedule(_ fire: ScheduleFire) async throws -> Bool {
        try await write { [self] connection in
            let moved = try await rows(
                """
                UPDATE \(names.schedules) SET next_fire_at = $1, last_fire_at = coalesce($2, last_fire_at),
                  last_job_id = coalesce($3, last_job_id)
                WHERE name = $4 AND next_fire_at = $5 AND NOT paused RETURNING 1
                """,
                bindings(
                    fire.nextFireAt.storedMilliseconds, fire.firedTick?.storedMilliseconds, fire.jobs.last?.id, fire.name,
                    fire.expectedNextFireAt.storedMilliseconds), connection: connection
            ) { try $0.decode(Int.self) }
            guard !moved.isEmpty else { return false }
            // The tick's key refuses a second job for it whatever happened to the compare-and-set.
            _ = try await apply(TaskBatch(inserts: fire.jobs, events: fire.events), connection: connection)
            try await connection.query(PostgresQuery(unsafeSQL: names.notify), logger: logger)
            return true
        }
    }

    package func setSchedulePaused(
        _ name: String, paused: Bool, nextFireAt: Date?, at date: Date
    ) async throws -> ScheduleRecord? {
        try await write { [self] connection in
            let changed = try await rows(
                """
                UPDATE \(names.schedules) SET paused = $1, next_fire_at = coalesce($2, next_fire_at), updated_at = $3
                WHERE name = $4 RETURNING \(scheduleColumns)
                """, bindings(paused, nextFireAt?.storedMilliseconds, date.storedMilliseconds, name),
                connection: connection
            ) { try self.schedule(from: $0) }.first
            try await connection.query(PostgresQuery(unsafeSQL: names.notify), logger: logger)
            return changed
        }
    }

    package func removeSchedule(_ name: String) async throws -> Bool {
        try await write { [self] connection in
            let removed = try await rows(
                "DELETE FROM \(names.schedules) WHERE name = $1 RETURNING 1", bindings(name), connection: connection
            ) { try $0.decode(Int.self) }
            try await connection.query(PostgresQuery(unsafeSQL: names.notify), logger: logger)
            return !removed.isEmpty
        }
    }

    package func forgetIdleOwners(_ ids: [String]) async throws -> Int {
        guard !ids.isEmpty else { return 0 }
        // The rows are locked in id order, as a claim locks the owners it judged dead: two workers forgetting and
        // claiming the same owners at once wait for each other instead of deadlocking.
        return try await write { [self] connection in
            try await rows(
                """
                DELETE FROM \(names.owners) AS o
                WHERE o.id IN (SELECT id FROM \(names.owners) WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE)
                  AND NOT EXISTS (
                    SELECT 1 FROM \(names.tasks) t WHERE t.parent_id IS NULL AND t.finished_at IS NULL AND t.owner_id = o.id)
                RETURNING 1
                """, bindings(ids), connection: connection
            ) { try $0.decode(Int.self) }.count
        }
    }

    // MARK: Partial failure

    /// How many failed subtasks each of these roots has; roots without any are left out.
    public func failedSteps(ofRoots ids: [String]) async throws -> [String: Int] {
        guard !ids.isEmpty else { return [:] }
        return try await read { [self] connection in
            var counts: [String: Int] = [:]
            for (root, count) in try await rows(
                """
                SELECT root_id, count(*) FROM \(names.tasks)
                WHERE root_id = ANY($1::text[]) AND parent_id IS NOT NULL AND status = 'failed'
                GROUP BY root_id
                """, bindings(Array(Set(ids))), connection: connection, { try $0.decode((String, Int64).self) })
            {
                counts[root] = Int(count)
            }
            return counts
        }
    }
}
#endif
