import Foundation
import Testing

@testable import Progression

struct GraphPublisherTests {
    /// A stream subscribed while the publisher finishes ends either way: it is finished by `finish` or sees that the
    /// publisher finished. (The fix is by construction, one lock for both; the race's window was nanoseconds wide, so
    /// this exercises it rather than proving the old code wrong.)
    @Test func aSubscriptionRacingFinishAlwaysEnds() async throws {
        for _ in 0..<500 {
            let publisher = GraphPublisher()
            publisher.publish(TaskGraph())
            async let finished: Void = publisher.finish()
            let stream = publisher.subscribe(current: nil)
            await finished
            let ended = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    for await _ in stream {}
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(30))
                    return false
                }
                let first = try await group.next() ?? false
                group.cancelAll()
                return first
            }
            #expect(ended, "the stream stayed open after the publisher finished")
            if !ended { return }
        }
    }

    /// A graph published while a subscriber's current graph was being built (before it was registered) is not lost:
    /// it follows the current one, since the publisher never sends a graph twice.
    @Test func aGraphPublishedWhileTheCurrentOneIsBuiltFollowsIt() async {
        let publisher = GraphPublisher()
        publisher.publish(TaskGraph(storage: .healthy))
        let since = publisher.publishCount
        let built = TaskGraph(storage: .healthy)  // the subscriber's current graph, built now
        let newer = TaskGraph(storage: .failing(since: Date(timeIntervalSince1970: 1), error: "disk full"))
        publisher.publish(newer)  // published in between, to no one
        var stream = publisher.subscribe(current: built, publishedSince: since).makeAsyncIterator()
        #expect(await stream.next() == newer, "the newest graph is the one kept")
        var unchanged = publisher.subscribe(current: built, publishedSince: publisher.publishCount).makeAsyncIterator()
        #expect(await unchanged.next() == built, "nothing published meanwhile: the current graph")
        publisher.finish()
    }

    /// A subscriber gets the latest graph first, then what is published after, and nothing once finished.
    @Test func aSubscriberStartsWithTheLatestGraphAndEndsWithThePublisher() async {
        let publisher = GraphPublisher()
        #expect(!publisher.hasSubscribers)
        publisher.publish(TaskGraph(storage: .healthy))
        let stream = publisher.subscribe(current: nil)
        #expect(publisher.hasSubscribers)
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next() == TaskGraph(storage: .healthy))
        let second = TaskGraph(tasks: [], storage: .healthy)
        publisher.publish(second)
        #expect(await iterator.next() == second)
        publisher.finish()
        #expect(await iterator.next() == nil)
        #expect(!publisher.hasSubscribers)
        var late = publisher.subscribe(current: nil).makeAsyncIterator()
        #expect(await late.next() == second, "a late subscriber still gets the last graph")
        #expect(await late.next() == nil)
    }
}
