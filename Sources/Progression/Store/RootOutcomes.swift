import Foundation
import ProgressionSQLite

/// A root that completed or failed, as its history recorded it: what the console's overview counts per minute.
package struct RootOutcome: Sendable, Hashable {
    /// The event's sequence number: reads go on after the last one seen.
    package var sequence: Int64
    package var taskID: String
    /// `.completed` or `.failed`.
    package var kind: TaskEvent.Kind
    package var at: Date

    package init(sequence: Int64, taskID: String, kind: TaskEvent.Kind, at: Date) {
        self.sequence = sequence
        self.taskID = taskID
        self.kind = kind
        self.at = at
    }
}

/// One read of outcomes: those found, and the last event of the history looked at (the next read goes on after it,
/// whether or not it was an outcome).
package struct RootOutcomePage: Sendable, Hashable {
    package var outcomes: [RootOutcome]
    package var through: Int64

    package init(outcomes: [RootOutcome], through: Int64) {
        self.outcomes = outcomes
        self.through = through
    }
}

/// How the reads of outcomes start: the history is append-only, its sequence numbers grow with time (commits of
/// one writer are in order; several writers interleave by milliseconds), so the first event of a time is found by
/// bisecting the sequence instead of scanning the history, which has no index by time.
package enum RootOutcomeReading {
    /// The most outcomes one read returns.
    package static let pageSize = 5_000

    /// The smallest sequence number in `1...last` whose event's time is at or after `date`, found by bisection with
    /// `time(ofFirstAtOrAfter:)` (the time of the first event whose number is at least the one given, and that number).
    package static func firstSequence(
        since date: Date, last: Int64, time: (Int64) throws -> (sequence: Int64, at: Date)?
    ) rethrows -> Int64 {
        var low: Int64 = 1
        var high = last + 1
        while low < high {
            let middle = low + (high - low) / 2
            guard let found = try time(middle) else { high = middle; continue }
            if found.at < date { low = found.sequence + 1 } else { high = middle }
        }
        return low
    }
}

extension SQLiteTaskStore {
    /// The roots that completed or failed, as their history says, oldest first: those recorded after the event
    /// `sequence`, or, without one, those at or after `date`; at most ``RootOutcomeReading/pageSize``. Costs the
    /// events read since (a bisection of the history to begin with), not the size of the history.
    package func rootOutcomes(after sequence: Int64?, since date: Date) async throws -> RootOutcomePage {
        try await read { connection in
            let last = try connection.scalarInt("SELECT max(id) FROM events") ?? 0
            let start: Int64
            if let sequence {
                start = sequence + 1
            } else {
                start = try RootOutcomeReading.firstSequence(since: date, last: last) { from in
                    try connection.query(
                        "SELECT id, at FROM events WHERE id >= ? ORDER BY id LIMIT 1", [.integer(from)]
                    ) { (sequence: $0.int64(at: 0), at: Date(storedMilliseconds: $0.int64(at: 1))) }.first
                }
            }
            let outcomes = try connection.query(
                """
                SELECT id, task_id, kind, at FROM events WHERE id >= ? AND id <= ?
                AND (kind = 'completed' OR kind = 'failed') AND task_id = root_id AND at >= ? ORDER BY id LIMIT ?
                """,
                [.integer(start), .integer(last), .integer(sequence == nil ? date.storedMilliseconds : 0),
                 .integer(Int64(RootOutcomeReading.pageSize))]
            ) { row in
                RootOutcome(
                    sequence: row.int64(at: 0), taskID: row.text(at: 1),
                    kind: TaskEvent.Kind(rawValue: row.text(at: 2)) ?? .completed,
                    at: Date(storedMilliseconds: row.int64(at: 3)))
            }
            let through = outcomes.count == RootOutcomeReading.pageSize ? outcomes[outcomes.count - 1].sequence : last
            return RootOutcomePage(outcomes: outcomes, through: max(through, sequence ?? 0))
        }
    }
}
