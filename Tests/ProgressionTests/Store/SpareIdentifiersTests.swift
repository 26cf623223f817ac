import Foundation
import Testing

@testable import Progression

/// A `JobClient`'s ids (`SpareIdentifiers`): reserved 32 at a time, each value of the store's sequence handed out
/// once, however many submits take them at once; a batch of 32 or more reserves its own.
struct SpareIdentifiersTests {
    @Test func oneTransactionServesThirtyTwoSubmitsOfOneJob() async throws {
        let store = InMemoryTaskStore()
        let spare = SpareIdentifiers()
        var taken: [Range<Int64>] = []
        for _ in 0..<SpareIdentifiers.block { taken.append(try await spare.take(1, from: store)) }
        #expect(taken.allSatisfy { $0.count == 1 })
        #expect(taken.map(\.lowerBound) == Array(taken[0].lowerBound..<taken[0].lowerBound + 32))
        // The 33rd reserves again: the next value of the sequence.
        let next = try await spare.take(1, from: store)
        #expect(next.lowerBound == taken[0].lowerBound + 32)
        // A count of 0 takes one (a submit of no input still reserves as one); a batch of 32 reserves its own.
        #expect(try await spare.take(0, from: store).count == 1)
        let batch = try await spare.take(40, from: store)
        #expect(batch.count == 40)
        #expect(batch.lowerBound >= next.lowerBound + 32)
    }

    @Test func concurrentTakesNeverShareAValue() async throws {
        let store = InMemoryTaskStore()
        let spare = SpareIdentifiers()
        let ranges = try await withThrowingTaskGroup(of: Range<Int64>.self) { group in
            for index in 0..<400 { group.addTask { try await spare.take(1 + index % 5, from: store) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let values = ranges.flatMap { Array($0) }
        #expect(values.count == ranges.map(\.count).reduce(0, +))
        #expect(Set(values).count == values.count, "a value was handed out twice")
    }
}
