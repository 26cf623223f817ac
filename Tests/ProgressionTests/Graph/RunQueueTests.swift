import Foundation
import Testing

@testable import Progression

/// The run queue alone, as tables: each row is a script of operations on a fresh queue and what each one returns.
struct RunQueueTests {
    enum Step: CustomStringConvertible, Sendable {
        /// Queue root `handle` with a priority, a creation time (seconds) and a job kind.
        case enqueue(Int, priority: Int = 0, at: Int = 0, kind: String? = nil)
        /// Take the next root if a slot is free, holding back the kinds given.
        case next(holding: Set<String> = [])
        case take(Int)
        case release(Int)
        case drain
        /// The counters: running, queued, unclaimed slots.
        case counts
        /// A claim pass reserves slots; one ends, giving back what it reserved.
        case reserveForClaim
        case endClaim(Int)
        /// A claim takes a slot for a job it starts; the job, loaded, holds it; slots taken for none are given back.
        case takeClaimStart
        case holdClaimStart(Int)
        case giveBackClaimStarts(Int)

        var description: String {
            switch self {
            case .enqueue(let handle, let priority, let at, let kind): "enqueue \(handle) p\(priority) t\(at) \(kind ?? "-")"
            case .next(let held): "next holding \(held.sorted())"
            case .take(let handle): "take \(handle)"
            case .release(let handle): "release \(handle)"
            case .drain: "drain"
            case .counts: "counts"
            case .reserveForClaim: "reserve for a claim"
            case .endClaim(let room): "end a claim of \(room)"
            case .takeClaimStart: "take a slot for a claim's start"
            case .holdClaimStart(let handle): "\(handle) holds its claim's slot"
            case .giveBackClaimStarts(let count): "give back \(count) slots of claims' starts"
            }
        }
    }

    struct Script: CustomTestStringConvertible, Sendable {
        var name: String
        var maxConcurrent: Int
        /// Each step and what it returns ("" for enqueue).
        var steps: [(Step, String)]
        var testDescription: String { name }
    }

    static let scripts: [Script] = [
        Script(
            name: "higher priority first, then older, then queued first", maxConcurrent: 1,
            steps: [
                (.enqueue(1, priority: 0, at: 10), ""), (.enqueue(2, priority: 5, at: 20), ""),
                (.enqueue(3, priority: 5, at: 5), ""), (.enqueue(4, priority: 5, at: 5), ""),
                (.next(), "3"), (.next(), "nil"), (.release(3), "true"),
                (.next(), "4"), (.release(4), "true"), (.next(), "2"), (.release(2), "true"), (.next(), "1"),
            ]),
        Script(
            name: "no more roots run than there are slots", maxConcurrent: 2,
            steps: [
                (.enqueue(1), ""), (.enqueue(2, at: 1), ""), (.enqueue(3, at: 2), ""),
                (.next(), "1"), (.next(), "2"), (.next(), "nil"), (.counts, "running 2 queued 1 unclaimed 0"),
                (.release(1), "true"), (.next(), "3"), (.counts, "running 2 queued 0 unclaimed 0"),
            ]),
        Script(
            name: "a root of a held kind stays queued until its kind is released", maxConcurrent: 2,
            steps: [
                (.enqueue(1, kind: "a"), ""), (.enqueue(2, at: 1, kind: "b"), ""),
                (.next(holding: ["a"]), "2"), (.next(holding: ["a"]), "nil"), (.counts, "running 1 queued 1 unclaimed 0"),
                (.next(), "1"),
            ]),
        Script(
            name: "a root queued twice takes one slot, and its stale entry is dropped", maxConcurrent: 2,
            steps: [
                (.enqueue(7), ""), (.enqueue(7), ""), (.next(), "7"), (.next(), "nil"),
                (.counts, "running 1 queued 0 unclaimed 1"), (.release(7), "true"), (.release(7), "false"),
            ]),
        Script(
            name: "taking and giving back are idempotent", maxConcurrent: 1,
            steps: [
                (.take(1), "true"), (.take(1), "true"), (.take(2), "false"), (.release(2), "false"),
                (.release(1), "true"), (.release(1), "false"), (.take(2), "true"), (.counts, "running 1 queued 0 unclaimed 0"),
            ]),
        Script(
            name: "a worker claims only slots no root holds and no queued root will take", maxConcurrent: 4,
            steps: [
                (.counts, "running 0 queued 0 unclaimed 4"), (.enqueue(1), ""), (.take(2), "true"),
                (.counts, "running 1 queued 1 unclaimed 2"),
            ]),
        Script(
            name: "a shutdown drains the queue in run order and leaves the slots", maxConcurrent: 1,
            steps: [
                (.take(9), "true"), (.enqueue(1, at: 3), ""), (.enqueue(2, priority: 1, at: 9), ""), (.enqueue(3, at: 1), ""),
                (.drain, "[2, 3, 1]"), (.counts, "running 1 queued 0 unclaimed 0"), (.next(), "nil"),
            ]),
        Script(
            name: "claim passes at once reserve disjoint slots until they end", maxConcurrent: 4,
            steps: [
                (.take(1), "true"), (.reserveForClaim, "3"), (.reserveForClaim, "0"),
                (.enqueue(2), ""), (.enqueue(3, at: 1), ""), (.endClaim(3), ""),
                (.counts, "running 1 queued 2 unclaimed 1"), (.reserveForClaim, "1"), (.endClaim(1), ""),
                (.reserveForClaim, "1"),
            ]),
        Script(
            name: "a slot a claim takes for a start is in use until its job holds it or it is given back",
            maxConcurrent: 2,
            steps: [
                (.takeClaimStart, "true"), (.takeClaimStart, "true"), (.takeClaimStart, "false"),
                (.enqueue(1), ""), (.next(), "nil"), (.take(2), "false"), (.counts, "running 0 queued 1 unclaimed 0"),
                (.holdClaimStart(5), ""), (.counts, "running 1 queued 1 unclaimed 0"), (.next(), "nil"),
                (.giveBackClaimStarts(1), ""), (.counts, "running 1 queued 1 unclaimed 0"), (.next(), "1"),
                (.release(5), "true"), (.giveBackClaimStarts(1), ""), (.counts, "running 1 queued 0 unclaimed 1"),
            ]),
        Script(
            name: "a limit below one is one", maxConcurrent: 0,
            steps: [(.enqueue(1), ""), (.enqueue(2), ""), (.next(), "1"), (.next(), "nil")]),
    ]

    @Test(arguments: scripts)
    func aScriptReturnsWhatItsTableSays(_ script: Script) {
        var queue = RunQueue(maxConcurrent: script.maxConcurrent)
        for (index, (step, expected)) in script.steps.enumerated() {
            let got: String
            switch step {
            case .enqueue(let handle, let priority, let at, let kind):
                queue.enqueue(handle, priority: priority, createdAt: Date(timeIntervalSince1970: Double(at)), kind: kind)
                got = ""
            case .next(let held): got = queue.next(holding: held).map(String.init) ?? "nil"
            case .take(let handle): got = String(queue.take(handle))
            case .release(let handle): got = String(queue.release(handle))
            case .drain: got = "\(queue.drain())"
            case .counts: got = "running \(queue.running) queued \(queue.queued) unclaimed \(queue.unclaimedSlots)"
            case .reserveForClaim: got = String(queue.reserveForClaim())
            case .endClaim(let room):
                queue.endClaim(reserved: room)
                got = ""
            case .takeClaimStart: got = String(queue.takeClaimStart())
            case .holdClaimStart(let handle):
                queue.holdClaimStart(handle)
                got = ""
            case .giveBackClaimStarts(let count):
                queue.giveBackClaimStarts(count)
                got = ""
            }
            #expect(got == expected, "step \(index): \(step)")
        }
    }
}

/// The timer queue alone, as a table on a manual timeline (deadlines are durations on the executor's clock).
struct TimerQueueTests {
    @Test func deadlinesComeDueInOrderTiesByInsertionAndTheEarliestWakesTheLoop() {
        var timers = TimerQueue()
        let steps: [(add: TimerQueue.Action, at: Int, wakes: Bool)] = [
            (.timeout(1), 50, true),  // the first deadline: the loop must wake to wait for it
            (.retry(2), 80, false),  // later than the earliest
            (.timeout(3), 20, true),  // earlier
            (.retry(4), 20, false),  // a tie: not earlier
        ]
        for (index, step) in steps.enumerated() {
            #expect(timers.add(step.add, at: .milliseconds(step.at)) == step.wakes, "add \(index)")
        }
        #expect(timers.earliest == .milliseconds(20))
        let due: [(at: Int, actions: [TimerQueue.Action])] = [
            (19, []),
            (20, [.timeout(3), .retry(4)]),
            (20, []),
            (79, [.timeout(1)]),
            (1000, [.retry(2)]),
        ]
        for step in due {
            #expect(timers.due(at: .milliseconds(step.at)) == step.actions, "due at \(step.at)")
        }
        #expect(timers.earliest == nil)
    }

    @Test func removingAllReturnsEveryActionInDeadlineOrder() {
        var timers = TimerQueue()
        _ = timers.add(.retry(1), at: .seconds(3))
        _ = timers.add(.timeout(2), at: .seconds(1))
        _ = timers.add(.timeout(1), at: .seconds(2))
        #expect(timers.removeAll() == [.timeout(2), .timeout(1), .retry(1)])
        #expect(timers.earliest == nil && timers.due(at: .seconds(10)).isEmpty)
    }
}
