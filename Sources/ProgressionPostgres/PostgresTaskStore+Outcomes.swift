#if PostgreSQL
import Foundation
import PostgresNIO
import Progression

extension PostgresTaskStore {
    /// The roots that completed or failed, as their history says, oldest first: those not seen at `cursor`, or,
    /// without one, those at or after `date`. Reads at most ``RootOutcomeReading/pageSize`` new events, and the
    /// cursor's missing numbers; costs the events read since (a bisection of the history to begin with), not the size
    /// of the history.
    ///
    /// Several writers commit their events out of the order of their numbers: one snapshot gives the events, the
    /// oldest transaction running and an id above those running (the read's own), and
    /// ``RootOutcomeCursor/advance(refilled:new:oldestRunning:readerTransaction:)`` keeps the numbers a running
    /// transaction may still show.
    package func rootOutcomes(after cursor: RootOutcomeCursor?, since date: Date) async throws -> RootOutcomePage {
        try await write(setUp: "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ") { [self] connection in
            // The snapshot is taken as this statement starts; the read's id is drawn after it, above every id a
            // transaction had then.
            let (oldestRunning, readerTransaction, visible) =
                try await rows(
                    """
                    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint, pg_current_xact_id()::text::bigint,
                           (SELECT coalesce(max(id), 0) FROM \(names.events))
                    """, connection: connection
                ) { try $0.decode((Int64, Int64, Int64).self) }.first ?? (Int64(0), Int64(0), Int64(0))
            var reading: RootOutcomeCursor
            if let cursor {
                reading = cursor
            } else {
                var low: Int64 = 1
                var high = visible + 1
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
                reading = RootOutcomeCursor(seenThrough: low - 1)
            }
            let since = cursor == nil ? date.storedMilliseconds : Int64(0)
            // Every event's number (to see the gaps), and what an outcome is.
            let columns = """
                id, CASE WHEN kind IN ('completed', 'failed') AND task_id = root_id AND at >= $1 THEN task_id END,
                kind, at
                """
            func event(_ row: PostgresRow) throws -> (sequence: Int64, outcome: RootOutcome?) {
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
            var refilled: [(sequence: Int64, outcome: RootOutcome?)] = []
            if !reading.missing.isEmpty {
                var parameters = PostgresBindings()
                parameters.append(since)
                parameters.append(reading.missing.map(\.numbers.lowerBound))
                parameters.append(reading.missing.map(\.numbers.upperBound))
                refilled = try await rows(
                    """
                    SELECT \(columns) FROM \(names.events)
                    JOIN unnest($2::int8[], $3::int8[]) AS missing(low, high) ON id BETWEEN missing.low AND missing.high
                    ORDER BY id
                    """, parameters, connection: connection, event)
            }
            var parameters = PostgresBindings()
            parameters.append(since)
            parameters.append(reading.seenThrough)
            parameters.append(visible)
            parameters.append(Int64(RootOutcomeReading.pageSize))
            let new = try await rows(
                "SELECT \(columns) FROM \(names.events) WHERE id > $2 AND id <= $3 ORDER BY id LIMIT $4",
                parameters, connection: connection, event)
            let outcomes = reading.advance(
                refilled: refilled, new: new, oldestRunning: oldestRunning, readerTransaction: readerTransaction)
            let page = RootOutcomePage(
                outcomes: outcomes, cursor: reading, more: new.count == RootOutcomeReading.pageSize)
            return (page, nil)
        }
    }
}
#endif
