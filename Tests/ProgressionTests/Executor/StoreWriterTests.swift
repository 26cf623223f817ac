import Foundation
import Testing

@testable import Progression

/// The writer's pauses, alone: the gathering pause after a commit that resumed waiting tasks (so that what they do
/// next shares the following batch), and the backoff after failed batches.
struct StoreWriterTests {
    struct Pause: Sendable, CustomTestStringConvertible {
        var commit: Duration
        var resumed: Int
        var limit: Duration
        var expected: Duration?
        var why: String
        var testDescription: String { why }
    }

    static let pauses: [Pause] = [
        Pause(commit: .milliseconds(2), resumed: 0, limit: .microseconds(100), expected: nil,
              why: "nobody was resumed: nothing is coming"),
        Pause(commit: .milliseconds(2), resumed: 8, limit: .microseconds(100), expected: .microseconds(100),
              why: "a slow commit (PostgreSQL): the limit"),
        Pause(commit: .microseconds(600), resumed: 8, limit: .microseconds(100), expected: .microseconds(60),
              why: "a tenth of the commit when that is below the limit"),
        Pause(commit: .microseconds(150), resumed: 8, limit: .microseconds(100), expected: nil,
              why: "a fast commit (SQLite): shorter than 20 µs, not taken"),
        Pause(commit: .microseconds(200), resumed: 1, limit: .microseconds(100), expected: .microseconds(20),
              why: "exactly 20 µs is taken"),
        Pause(commit: .milliseconds(2), resumed: 8, limit: .zero, expected: nil, why: "turned off"),
    ]

    @Test(arguments: pauses)
    func theGatheringPauseIsATenthOfTheCommitWithinItsLimit(_ row: Pause) {
        #expect(StoreWriter.gatheringPause(afterCommitOf: row.commit, resumed: row.resumed, limit: row.limit) == row.expected)
    }

    @Test(arguments: [(1, 25), (2, 50), (3, 100), (6, 800), (7, 1_000), (30, 1_000)])
    func theBackoffDoublesFrom25MillisecondsToASecond(failures: Int, milliseconds: Int) {
        #expect(StoreWriter.backoff(afterFailures: failures) == .milliseconds(milliseconds))
    }
}
