import Foundation
import Progression

/// Roots completed and failed per minute over the last hour, kept up to date by reading only the history recorded
/// since the last look (``OperatorStore/rootOutcomes(after:since:)``): the console's overview chart.
package struct OutcomesPerMinute: Sendable {
    /// One minute of the chart.
    package struct Minute: Encodable, Sendable, Equatable {
        package var start: Date
        package var completed: Int
        package var failed: Int
    }

    /// How many minutes are kept and shown.
    package static let minutes = 60

    private var counts: [Int64: (completed: Int, failed: Int)] = [:]
    /// Where the reads of the history stand; `nil` before the first one.
    package private(set) var cursor: RootOutcomeCursor?

    package init() {}

    /// Counts `page`'s outcomes and forgets minutes older than the hour before `now`.
    package mutating func add(_ page: RootOutcomePage, now: Date) {
        for outcome in page.outcomes {
            let minute = Self.minute(of: outcome.at)
            var count = counts[minute] ?? (0, 0)
            if outcome.kind == .failed { count.failed += 1 } else { count.completed += 1 }
            counts[minute] = count
        }
        cursor = page.cursor
        let oldest = Self.minute(of: now) - Int64(Self.minutes) + 1
        counts = counts.filter { $0.key >= oldest }
    }

    /// Reads what the history recorded since the last look (at most `pages` reads) and counts it.
    ///
    /// - Returns: `false` when the store cannot tell (the in-memory store).
    package mutating func refresh(from store: OperatorStore, now: Date = Date(), pages: Int = 20) async throws -> Bool {
        for _ in 0..<pages {
            guard let page = try await store.rootOutcomes(after: cursor, since: now.addingTimeInterval(-3600)) else {
                return false
            }
            add(page, now: now)
            if !page.more { break }
        }
        return true
    }

    /// The last ``minutes`` minutes up to the one of `now`, oldest first, minutes without outcomes as zeros.
    package func chart(now: Date) -> [Minute] {
        let last = Self.minute(of: now)
        return ((last - Int64(Self.minutes) + 1)...last).map { minute in
            let count = counts[minute] ?? (0, 0)
            return Minute(
                start: Date(timeIntervalSince1970: Double(minute) * 60), completed: count.completed,
                failed: count.failed)
        }
    }

    private static func minute(of date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 / 60).rounded(.down))
    }
}
