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
/// number it saw. With several (PostgreSQL, several hosts), a transaction takes its numbers when it writes and shows
/// them when it commits: another one may commit higher numbers first. A reader that went on after the highest number
/// it saw would never count the lower ones committed after its look. So the cursor keeps the numbers missing below
/// the highest one it saw (``missing``), looks at those again at each read, and forgets a range once every
/// transaction that was running when it was first missed has ended: its numbers were then taken by a transaction that
/// rolled back, or by events deleted since (`prune`). Each event is read once: when it is first seen.
package struct RootOutcomeCursor: Sendable, Hashable {
    /// The highest event number looked at.
    package var seenThrough: Int64
    /// Numbers at most ``seenThrough`` that no event had when looked at, which a transaction still running may show.
    package var missing: [Missing] = []

    /// Every number up to this one was looked at, or will never be seen.
    package var through: Int64 { (missing.map(\.numbers.lowerBound).min() ?? seenThrough + 1) - 1 }

    /// Numbers missed at a read whose transaction took the id `settledBy`: every transaction that could have taken them
    /// had an id below it (a writer takes its id before its event numbers); once none below it runs (the oldest one
    /// running is at or past it), whatever they stored is seen.
    package struct Missing: Sendable, Hashable {
        package var numbers: ClosedRange<Int64>
        package var settledBy: Int64

        package init(_ numbers: ClosedRange<Int64>, settledBy: Int64) {
            self.numbers = numbers
            self.settledBy = settledBy
        }
    }

    package init(seenThrough: Int64, missing: [Missing] = []) {
        self.seenThrough = seenThrough
        self.missing = missing
    }

    /// One look at the history, in one snapshot: `refilled` are the events found among the ``missing`` numbers, `new`
    /// the events above ``seenThrough`` (in order, a page of them), each with its outcome when it is one.
    /// `oldestRunning` is the snapshot's oldest running transaction id (`pg_snapshot_xmin`), `readerTransaction` the
    /// id the read took (`pg_current_xact_id`), above every id a transaction had when the snapshot was taken. Returns
    /// the outcomes seen for the first time, and moves the cursor.
    package mutating func advance(
        refilled: [(sequence: Int64, outcome: RootOutcome?)], new: [(sequence: Int64, outcome: RootOutcome?)],
        oldestRunning: Int64, readerTransaction: Int64
    ) -> [RootOutcome] {
        // The missing numbers found now are no longer missing; a range whose transactions all ended is forgotten
        // (after this read, which saw whatever they committed).
        var remaining: [Missing] = []
        let found = Set(refilled.map(\.sequence))
        for range in missing where oldestRunning < range.settledBy {
            var low = range.numbers.lowerBound
            for number in found.sorted() where range.numbers.contains(number) {
                if number > low { remaining.append(Missing(low...(number - 1), settledBy: range.settledBy)) }
                low = number + 1
            }
            if low <= range.numbers.upperBound {
                remaining.append(Missing(low...range.numbers.upperBound, settledBy: range.settledBy))
            }
        }
        // Numbers skipped by the new events are missing from now on.
        var next = seenThrough + 1
        for event in new where event.sequence >= next {
            if event.sequence > next {
                remaining.append(Missing(next...(event.sequence - 1), settledBy: readerTransaction))
            }
            next = event.sequence + 1
        }
        seenThrough = next - 1
        missing = remaining
        return (refilled + new).compactMap(\.outcome)
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
                start = cursor.seenThrough + 1
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
                outcomes: outcomes, cursor: RootOutcomeCursor(seenThrough: max(through, cursor?.seenThrough ?? 0)),
                more: full)
        }
    }
}
