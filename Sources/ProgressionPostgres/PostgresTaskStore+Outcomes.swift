#if PostgreSQL
import Foundation
import PostgresNIO
import Progression

extension PostgresTaskStore {
    /// The roots that completed or failed, as their history says, oldest first: those recorded after the event
    /// `sequence`, or, without one, those at or after `date`; at most ``RootOutcomeReading/pageSize``. Costs the
    /// events read since (a bisection of the history to begin with), not the size of the history.
    package func rootOutcomes(after sequence: Int64?, since date: Date) async throws -> RootOutcomePage {
        try await read { [self] connection in
            let last =
                try await rows("SELECT coalesce(max(id), 0) FROM \(names.events)", connection: connection) {
                    try $0.decode(Int64.self)
                }.first ?? 0
            let start: Int64
            if let sequence {
                start = sequence + 1
            } else {
                var low: Int64 = 1
                var high = last + 1
                // RootOutcomeReading.firstSequence, with an await in its probe.
                while low < high {
                    let middle = low + (high - low) / 2
                    var probe = PostgresBindings()
                    probe.append(middle)
                    let found = try await rows(
                        "SELECT id, at FROM \(names.events) WHERE id >= $1 ORDER BY id LIMIT 1", probe,
                        connection: connection
                    ) { try $0.decode((Int64, Int64).self) }.first
                    guard let found else {
                        high = middle
                        continue
                    }
                    if found.1 < date.storedMilliseconds { low = found.0 + 1 } else { high = middle }
                }
                start = low
            }
            var bindings = PostgresBindings()
            bindings.append(start)
            bindings.append(last)
            bindings.append(sequence == nil ? date.storedMilliseconds : Int64(0))
            bindings.append(Int64(RootOutcomeReading.pageSize))
            let outcomes = try await rows(
                """
                SELECT id, task_id, kind, at FROM \(names.events) WHERE id >= $1 AND id <= $2
                AND kind IN ('completed', 'failed') AND task_id = root_id AND at >= $3 ORDER BY id LIMIT $4
                """, bindings, connection: connection
            ) { row in
                let (id, taskID, kind, at) = try row.decode((Int64, String, String, Int64).self)
                return RootOutcome(
                    sequence: id, taskID: taskID, kind: TaskEvent.Kind(rawValue: kind) ?? .completed,
                    at: Date(storedMilliseconds: at))
            }
            let through = outcomes.count == RootOutcomeReading.pageSize ? outcomes[outcomes.count - 1].sequence : last
            return RootOutcomePage(outcomes: outcomes, through: max(through, sequence ?? 0))
        }
    }
}
#endif
