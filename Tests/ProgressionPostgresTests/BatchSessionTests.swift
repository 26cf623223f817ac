#if PostgreSQL
import Foundation
import Progression
import Testing
@testable import ProgressionPostgres

/// The chain of a store's batches (``BatchSession``) alone: numbers, what each presupposes, and the batches settled as
/// not committed that a later look at the server's mark may show committed after all.
struct BatchSessionTests {
    static let event = TaskEvent(
        taskID: "r.1", rootID: "r", kind: .step, at: Date(timeIntervalSince1970: 1_700_000_000), attempt: 1,
        message: "one")

    static func settled(_ batch: Int64) -> BatchSession.Unconfirmed {
        BatchSession.Unconfirmed(batch: batch, writes: .init(inserts: ["r.\(batch)"], events: [event: 1]))
    }

    enum Step: Sendable, CustomTestStringConvertible {
        /// A batch is numbered; expected: its number and the one it presupposes.
        case number(batch: Int64, after: Int64)
        case committed(Int64)
        /// Sent, its answer lost, settled as not committed.
        case settledNotCommitted(Int64)
        /// Never sent.
        case notSent(Int64)
        /// The server's mark was read; expected: the settled batches it shows committed.
        case resynchronized(mark: Int64, committedAfterAll: [Int64])

        var testDescription: String {
            switch self {
            case .number(let batch, let after): "number → \(batch) after \(after)"
            case .committed(let batch): "\(batch) committed"
            case .settledNotCommitted(let batch): "\(batch) settled as not committed"
            case .notSent(let batch): "\(batch) not sent"
            case .resynchronized(let mark, let found): "mark \(mark) → committed after all \(found)"
            }
        }
    }

    static let sequences: [(String, [Step], unconfirmedLeft: [Int64])] = [
        ("each batch follows the last", [.number(batch: 1, after: 0), .committed(1), .number(batch: 2, after: 1)], []),
        ("one sent behind a failed one presupposes the last committed",
         [.number(batch: 1, after: 0), .committed(1), .number(batch: 2, after: 1), .number(batch: 3, after: 2),
          .settledNotCommitted(2), .notSent(3), .number(batch: 4, after: 1)], [2]),
        ("a later commit proves the settled one did not commit",
         [.number(batch: 1, after: 0), .settledNotCommitted(1), .number(batch: 2, after: 0), .committed(2)], []),
        ("a mark ahead shows the settled one committed after all",
         [.number(batch: 1, after: 0), .committed(1), .number(batch: 2, after: 1), .settledNotCommitted(2),
          .number(batch: 3, after: 1), .resynchronized(mark: 2, committedAfterAll: [2]), .number(batch: 4, after: 2)],
         []),
        ("a mark behind (removed) shows nothing committed",
         [.number(batch: 1, after: 0), .committed(1), .number(batch: 2, after: 1), .settledNotCommitted(2),
          .number(batch: 3, after: 1), .resynchronized(mark: 0, committedAfterAll: []), .number(batch: 4, after: 0)],
         [2]),
        ("a batch never sent is not kept",
         [.number(batch: 1, after: 0), .notSent(1), .resynchronized(mark: 1, committedAfterAll: [])], []),
    ]

    @Test(arguments: sequences)
    func theChainFollowsItsSteps(_ name: String, _ steps: [Step], unconfirmedLeft: [Int64]) {
        var session = BatchSession()
        for step in steps {
            switch step {
            case .number(let batch, let after):
                let numbers = session.number()
                #expect(numbers.batch == batch && numbers.after == after, "\(name): \(step.testDescription)")
            case .committed(let batch):
                session.committed(batch)
            case .settledNotCommitted(let batch):
                session.failed(batch, settled: Self.settled(batch))
            case .notSent(let batch):
                session.failed(batch)
            case .resynchronized(let mark, let expected):
                let found = session.resynchronized(mark: mark)
                #expect(found == expected.map(Self.settled), "\(name): \(step.testDescription)")
            }
        }
        #expect(session.unconfirmed.map(\.batch) == unconfirmedLeft, "\(name)")
    }
}
#endif
