#if PostgreSQL
import Foundation
import PostgresNIO
import Progression

extension PostgresTaskStore {
    /// The roots that completed or failed, as their history says, oldest first: those not counted at `cursor`, or,
    /// without one, those at or after `date`. Reads at most ``RootOutcomeReading/pageSize`` events; costs the events
    /// read since (a bisection of the history to begin with), not the size of the history.
    ///
    /// Several writers commit their events out of the order of their numbers: one snapshot gives the events and the
    /// transactions running, and ``RootOutcomeCursor/advance(over:oldestRunning:nextTransaction:)`` keeps the numbers
    /// a running transaction may still show.
    package func rootOutcomes(after cursor: RootOutcomeCursor?, since date: Date) async throws -> RootOutcomePage {
        try await write(setUp: "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY") { [self] connection in
            let (oldestRunning, nextTransaction, last) =
                try await rows(
                    """
                    SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint,
                           (SELECT coalesce(max(id), 0) FROM \(names.events))
                    FROM pg_current_snapshot() AS s
                    """, connection: connection
                ) { try $0.decode((Int64, Int64, Int64).self) }.first ?? (Int64(0), Int64(0), Int64(0))
            var reading: RootOutcomeCursor
            if let cursor {
                reading = cursor
            } else {
                var low: Int64 = 1
                var high = last + 1
                // RootOutcomeReading.firstSequence, with an await in its probe.
                while low < high {
                    let middle = low + (high - low) / 2
                    let found = try await rows(
                        "SELECT id, at FROM \(names.events) WHERE id >= $1 ORDER BY id LIMIT 1", bindings(middle),
                        connection: connection
                    ) { try $0.decode((Int64, Int64).self) }.first
                    guard let found else {
                        high = middle
                        continue
                    }
                    if found.1 < date.storedMilliseconds { low = found.0 + 1 } else { high = middle }
                }
                reading = RootOutcomeCursor(through: low - 1)
            }
            var parameters = PostgresBindings()
            parameters.append(reading.through)
            parameters.append(last)
            parameters.append(cursor == nil ? date.storedMilliseconds : Int64(0))
            parameters.append(Int64(RootOutcomeReading.pageSize))
            // Every event's number (to see the gaps), and what an outcome is.
            let events = try await rows(
                """
                SELECT id, CASE WHEN kind IN ('completed', 'failed') AND task_id = root_id AND at >= $3 THEN task_id END,
                       kind, at
                FROM \(names.events) WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $4
                """, parameters, connection: connection
            ) { row -> (sequence: Int64, outcome: RootOutcome?) in
                let (id, taskID, kind, at) = try row.decode((Int64, String?, String, Int64).self)
                return (
                    id,
                    taskID.map {
                        RootOutcome(
                            sequence: id, taskID: $0, kind: TaskEvent.Kind(rawValue: kind) ?? .completed,
                            at: Date(storedMilliseconds: at))
                    }
                )
            }
            let outcomes = reading.advance(over: events, oldestRunning: oldestRunning, nextTransaction: nextTransaction)
            return (RootOutcomePage(outcomes: outcomes, cursor: reading, more: events.count == RootOutcomeReading.pageSize), nil)
        }
    }
}
#endif
