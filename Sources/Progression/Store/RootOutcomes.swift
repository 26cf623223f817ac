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

/// One read of outcomes: those not counted before, where the next read goes on from, and whether more was left to
/// read at once.
package struct RootOutcomePage: Sendable, Hashable {
    package var outcomes: [RootOutcome]
    package var cursor: RootOutcomeCursor
    /// The read stopped at its page size: the history has more since.
    package var more: Bool

    package init(outcomes: [RootOutcome], cursor: RootOutcomeCursor, more: Bool) {
        self.outcomes = outcomes
        self.cursor = cursor
        self.more = more
    }
}

/// Where a reader of outcomes stands in the history.
///
/// With one writer at a time (SQLite), events are numbered in the order they commit: a reader goes on after the last
/// number it saw. With several (PostgreSQL, several hosts), a transaction takes its numbers when it writes and
/// shows them when it commits: another one may commit higher numbers first. A reader that went on after the highest
/// number it saw would never count the lower ones committed after its look. So the cursor goes only as far as the
/// numbers seen without a gap (``through``); outcomes seen above it are remembered (``counted``) so that they are
/// counted once; and a gap is passed once every transaction that was running when it was seen has ended (``Gap``):
/// its numbers were then taken by a transaction that rolled back, or by events deleted since (`prune`).
package struct RootOutcomeCursor: Sendable, Hashable {
    /// Every event numbered up to this one was looked at, or will never be seen.
    package var through: Int64
    /// Outcomes numbered above ``through`` counted already.
    package var counted: Set<Int64> = []
    /// Numbers up to ``Gap/upTo`` missing when last looked at.
    package var gap: Gap?

    /// Numbers up to `upTo` that no event had at a look whose snapshot's next transaction id was `settledBy`: the
    /// transactions that took them were running then (or had rolled back); once the oldest transaction running is at
    /// or past `settledBy`, whatever they stored is seen.
    package struct Gap: Sendable, Hashable {
        package var upTo: Int64
        package var settledBy: Int64

        package init(upTo: Int64, settledBy: Int64) {
            self.upTo = upTo
            self.settledBy = settledBy
        }
    }

    package init(through: Int64, counted: Set<Int64> = [], gap: Gap? = nil) {
        self.through = through
        self.counted = counted
        self.gap = gap
    }

    /// One look at the history: `events` are the numbers above ``through`` that the look's snapshot shows, in order
    /// (a page of them), each with its outcome when it is one. `oldestRunning` and `nextTransaction` are the
    /// snapshot's oldest running transaction and next transaction id (`pg_snapshot_xmin`, `pg_snapshot_xmax`).
    /// Returns the outcomes not counted before, and moves the cursor as far as it may.
    package mutating func advance(
        over events: [(sequence: Int64, outcome: RootOutcome?)], oldestRunning: Int64, nextTransaction: Int64
    ) -> [RootOutcome] {
        var fresh: [RootOutcome] = []
        for event in events where event.sequence > through {
            if let outcome = event.outcome, counted.insert(event.sequence).inserted { fresh.append(outcome) }
        }
        if let gap, oldestRunning >= gap.settledBy {
            through = max(through, gap.upTo)
            self.gap = nil
        }
        for event in events {
            if event.sequence <= through { continue }
            guard event.sequence == through + 1 else { break }
            through = event.sequence
        }
        if let gap, through >= gap.upTo { self.gap = nil }
        if gap == nil, let last = events.last?.sequence, last > through {
            gap = Gap(upTo: last, settledBy: nextTransaction)
        }
        counted = counted.filter { $0 > through }
        return fresh
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
    /// The roots that completed or failed, as their history says, oldest first: those recorded after `cursor`, or,
    /// without one, those at or after `date`; at most ``RootOutcomeReading/pageSize``. Costs the events read since (a
    /// bisection of the history to begin with), not the size of the history. One writer at a time numbers events in
    /// the order they commit: the cursor goes on after the last one.
    package func rootOutcomes(after cursor: RootOutcomeCursor?, since date: Date) async throws -> RootOutcomePage {
        try await read { connection in
            let last = try connection.scalarInt("SELECT max(id) FROM events") ?? 0
            let start: Int64
            if let cursor {
                start = cursor.through + 1
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
                [.integer(start), .integer(last), .integer(cursor == nil ? date.storedMilliseconds : 0),
                 .integer(Int64(RootOutcomeReading.pageSize))]
            ) { row in
                RootOutcome(
                    sequence: row.int64(at: 0), taskID: row.text(at: 1),
                    kind: TaskEvent.Kind(rawValue: row.text(at: 2)) ?? .completed,
                    at: Date(storedMilliseconds: row.int64(at: 3)))
            }
            let full = outcomes.count == RootOutcomeReading.pageSize
            let through = full ? outcomes[outcomes.count - 1].sequence : last
            return RootOutcomePage(
                outcomes: outcomes, cursor: RootOutcomeCursor(through: max(through, cursor?.through ?? 0)), more: full)
        }
    }
}
