import Foundation
import Testing

@testable import Progression

/// The cursor of the console's chart on its own (`RootOutcomeCursor.advance`): which numbers it keeps as missing,
/// which outcomes it counts, and when it forgets a missing number. Each row: the cursor before, the look (the events
/// found among the missing numbers, the new ones, which are outcomes, the snapshot's oldest running transaction id and
/// the read's own id), what is counted, the cursor after.
struct RootOutcomeCursorTests {
    typealias Missing = RootOutcomeCursor.Missing

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var before: RootOutcomeCursor
        var refilled: [Int64] = []
        var new: [Int64] = []
        var outcomes: Set<Int64> = []
        var oldestRunning: Int64 = 10
        var readerTransaction: Int64 = 100
        var counted: [Int64]
        var after: RootOutcomeCursor

        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "numbers without a gap: it goes to the last one",
            before: RootOutcomeCursor(seenThrough: 0), new: [1, 2, 3], outcomes: [2],
            counted: [2], after: RootOutcomeCursor(seenThrough: 3)),
        Row(
            name: "a gap: its numbers are missing, until the transactions running at this read ended",
            before: RootOutcomeCursor(seenThrough: 0), new: [1, 3, 4], outcomes: [3], readerTransaction: 50,
            counted: [3], after: RootOutcomeCursor(seenThrough: 4, missing: [Missing(2...2, settledBy: 50)])),
        Row(
            name: "a missing number committed later: counted when found",
            before: RootOutcomeCursor(seenThrough: 4, missing: [Missing(2...2, settledBy: 50)]),
            refilled: [2], outcomes: [2], oldestRunning: 40,
            counted: [2], after: RootOutcomeCursor(seenThrough: 4)),
        Row(
            name: "still missing while a transaction running then may commit it",
            before: RootOutcomeCursor(seenThrough: 4, missing: [Missing(2...2, settledBy: 50)]),
            new: [5], outcomes: [5], oldestRunning: 49, readerTransaction: 60,
            counted: [5], after: RootOutcomeCursor(seenThrough: 5, missing: [Missing(2...2, settledBy: 50)])),
        Row(
            name: "forgotten once they all ended (a rollback, a prune)",
            before: RootOutcomeCursor(seenThrough: 4, missing: [Missing(2...2, settledBy: 50)]),
            oldestRunning: 50,
            counted: [], after: RootOutcomeCursor(seenThrough: 4)),
        Row(
            name: "found at the read that forgets its range: counted",
            before: RootOutcomeCursor(seenThrough: 4, missing: [Missing(2...3, settledBy: 50)]),
            refilled: [3], outcomes: [3], oldestRunning: 50,
            counted: [3], after: RootOutcomeCursor(seenThrough: 4)),
        Row(
            name: "a range partly found keeps the rest",
            before: RootOutcomeCursor(seenThrough: 9, missing: [Missing(2...6, settledBy: 50)]),
            refilled: [4],
            counted: [],
            after: RootOutcomeCursor(
                seenThrough: 9, missing: [Missing(2...3, settledBy: 50), Missing(5...6, settledBy: 50)])),
        Row(
            name: "nothing new",
            before: RootOutcomeCursor(seenThrough: 9),
            counted: [], after: RootOutcomeCursor(seenThrough: 9)),
    ]

    @Test(arguments: rows)
    func theCursorKeepsWhatMayStillCommitAndCountsEachOutcomeOnce(row: Row) {
        var cursor = row.before
        func events(_ numbers: [Int64]) -> [(sequence: Int64, outcome: RootOutcome?)] {
            numbers.map { sequence in
                (
                    sequence: sequence,
                    outcome: row.outcomes.contains(sequence)
                        ? RootOutcome(sequence: sequence, taskID: "r\(sequence)", kind: .completed, at: Date()) : nil
                )
            }
        }
        let counted = cursor.advance(
            refilled: events(row.refilled), new: events(row.new), oldestRunning: row.oldestRunning,
            readerTransaction: row.readerTransaction)
        #expect(counted.map(\.sequence) == row.counted)
        #expect(cursor == row.after)
    }

    @Test func everyNumberUpToThroughWasLookedAtOrWillNeverBeSeen() {
        #expect(RootOutcomeCursor(seenThrough: 9).through == 9)
        #expect(RootOutcomeCursor(seenThrough: 9, missing: [Missing(5...6, settledBy: 1), Missing(2...3, settledBy: 1)]).through == 1)
    }
}
