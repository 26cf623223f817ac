import Foundation
import Testing

@testable import Progression

/// The cursor of the console's chart on its own (`RootOutcomeCursor.advance`): how far it goes over the numbers a
/// look shows, which outcomes it counts, and when it passes a gap. Each row: the cursor before, the look (numbers seen,
/// those that are outcomes, the snapshot's oldest running and next transaction ids), what is counted, the cursor after.
struct RootOutcomeCursorTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var before: RootOutcomeCursor
        var seen: [Int64]
        var outcomes: Set<Int64>
        var oldestRunning: Int64 = 100
        var nextTransaction: Int64 = 100
        var counted: [Int64]
        var after: RootOutcomeCursor

        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "numbers without a gap: it goes to the last one",
            before: RootOutcomeCursor(through: 0), seen: [1, 2, 3], outcomes: [2],
            counted: [2], after: RootOutcomeCursor(through: 3)),
        Row(
            name: "a gap: it stops before it, and remembers what it counted above",
            before: RootOutcomeCursor(through: 0), seen: [1, 3, 4], outcomes: [3], nextTransaction: 50,
            counted: [3],
            after: RootOutcomeCursor(through: 1, counted: [3], gap: .init(upTo: 4, settledBy: 50))),
        Row(
            name: "the gap filled by a later commit: its outcome is counted, the one above not again",
            before: RootOutcomeCursor(through: 1, counted: [3], gap: .init(upTo: 4, settledBy: 50)),
            seen: [2, 3, 4], outcomes: [2, 3], oldestRunning: 40,
            counted: [2], after: RootOutcomeCursor(through: 4)),
        Row(
            name: "a gap while the transactions that were running then may still commit: it waits",
            before: RootOutcomeCursor(through: 1, counted: [3], gap: .init(upTo: 4, settledBy: 50)),
            seen: [3, 4, 5], outcomes: [3, 5], oldestRunning: 49,
            counted: [5],
            after: RootOutcomeCursor(through: 1, counted: [3, 5], gap: .init(upTo: 4, settledBy: 50))),
        Row(
            name: "a gap once they all ended (a rollback, a prune): it is passed",
            before: RootOutcomeCursor(through: 1, counted: [3], gap: .init(upTo: 4, settledBy: 50)),
            seen: [3, 4, 5], outcomes: [3, 5], oldestRunning: 50,
            counted: [5], after: RootOutcomeCursor(through: 5)),
        Row(
            name: "a gap passed, and a new one above it: the new one waits for its own transactions",
            before: RootOutcomeCursor(through: 1, gap: .init(upTo: 4, settledBy: 50)),
            seen: [3, 4, 7], outcomes: [7], oldestRunning: 60, nextTransaction: 70,
            counted: [7],
            after: RootOutcomeCursor(through: 4, counted: [7], gap: .init(upTo: 7, settledBy: 70))),
        Row(
            name: "nothing new",
            before: RootOutcomeCursor(through: 9), seen: [], outcomes: [],
            counted: [], after: RootOutcomeCursor(through: 9)),
    ]

    @Test(arguments: rows)
    func theCursorGoesAsFarAsItMayAndCountsEachOutcomeOnce(row: Row) {
        var cursor = row.before
        let events = row.seen.map { sequence in
            (
                sequence: sequence,
                outcome: row.outcomes.contains(sequence)
                    ? RootOutcome(sequence: sequence, taskID: "r\(sequence)", kind: .completed, at: Date()) : nil
            )
        }
        let counted = cursor.advance(
            over: events, oldestRunning: row.oldestRunning, nextTransaction: row.nextTransaction)
        #expect(counted.map(\.sequence) == row.counted)
        #expect(cursor == row.after)
    }
}
