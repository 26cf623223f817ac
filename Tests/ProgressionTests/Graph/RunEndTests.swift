import Foundation
import Testing

@testable import Progression

/// The end of a root's run, on the graph alone (`GraphState.endRun`): for each way a run ends, the table says the
/// status it records, whether an automatic retry is due, whether the end waits for its commit before the root is
/// settled, and whether the root stays in memory. Whatever the ending, the slot goes to the root that waited for it,
/// in the same change (their start shares the end's commit).
struct RunEndTests {
    enum Ending: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case completes, fails, failsAndRetries, cancelled, timedOut, shutDown, sleeps, lost
        var testDescription: String { rawValue }
    }

    struct Ended: Equatable, CustomStringConvertible {
        var status: TaskStatus
        var retries: Bool
        /// The end is written: the root is settled once the writer commits it.
        var waitsForCommit: Bool
        var inMemory: Bool
        var counted: Bool

        var description: String {
            "\(status), retries \(retries), waits for its commit \(waitsForCommit), in memory \(inMemory), "
                + "counted \(counted)"
        }
    }

    struct Failure: Error {}

    struct Graph {
        var state: GraphState
        let root: TaskNode
        let other: TaskNode

        init(retries: Bool = false) {
            state = GraphState.alone(slots: 1)
            let created = Date(timeIntervalSince1970: 1_000)
            var options = TaskOptions.interactive
            if retries { options.retryPolicy = .exponential(maxAttempts: 3) }
            root = state.addRoot(
                TaskRecord(
                    id: "root", name: "root", kind: "job", options: options, status: .running, ownerID: "owner",
                    createdAt: created, startedAt: created),
                stored: true)
            other = state.addRoot(
                TaskRecord(id: "other", name: "other", kind: "job", status: .pending, createdAt: created), stored: true)
            other.body = { _ in nil }
            _ = state.runQueue.take(root.handle)
            root.phase = .running
            state.enqueue(other)
        }

        mutating func end(_ handle: NodeHandle, _ result: Result<Data?, any Error>) -> RunEnd {
            state.endRun(
                handle, result, now: Date(timeIntervalSince1970: 2_000), monotonicNow: .seconds(10), random: 0.5,
                configuration: TaskExecutor.Configuration())
        }
    }

    static let table: [(Ending, Ended)] = [
        (.completes, Ended(status: .completed, retries: false, waitsForCommit: true, inMemory: true, counted: true)),
        (.fails, Ended(status: .failed, retries: false, waitsForCommit: true, inMemory: true, counted: true)),
        (.failsAndRetries, Ended(status: .pending, retries: true, waitsForCommit: true, inMemory: true, counted: true)),
        (.cancelled, Ended(status: .cancelled, retries: false, waitsForCommit: true, inMemory: true, counted: true)),
        (.timedOut, Ended(status: .failed, retries: false, waitsForCommit: true, inMemory: true, counted: true)),
        // A graceful stop hands it back, pending and unowned, for any worker.
        (.shutDown, Ended(status: .pending, retries: false, waitsForCommit: true, inMemory: true, counted: true)),
        // A durable sleep: pending until its time, unowned; it leaves memory once that is committed.
        (.sleeps, Ended(status: .pending, retries: false, waitsForCommit: true, inMemory: true, counted: true)),
        // Another owner has it: nothing is written or counted, and it leaves memory at once.
        (.lost, Ended(status: .running, retries: false, waitsForCommit: false, inMemory: false, counted: false)),
    ]

    @Test(arguments: table)
    func aRunEndsAsItsRowSaysAndItsSlotGoesToTheNextRoot(ending: Ending, expected: Ended) {
        var graph = Graph(retries: ending == .failsAndRetries)
        let result: Result<Data?, any Error>
        switch ending {
        case .completes: result = .success(nil)
        case .fails, .failsAndRetries: result = .failure(Failure())
        case .cancelled, .timedOut, .shutDown, .sleeps, .lost:
            graph.root.stopReason =
                switch ending {
                case .cancelled: .cancelled
                case .timedOut: .timedOut(.seconds(1))
                case .shutDown: .shutdown
                case .sleeps: .sleeping(until: Date(timeIntervalSince1970: 3_000))
                default: .leaseLost
                }
            result = .failure(CancellationError())
        }
        let end = graph.end(graph.root.handle, result)
        let ended = Ended(
            status: graph.root.record.status, retries: end.retryDelay != nil,
            waitsForCommit: graph.state.endedRuns.contains { $0.run.handle == graph.root.handle },
            inMemory: graph.state.node(id: "root") != nil, counted: end.ended != nil && !end.lost)
        #expect(ended == expected)
        // The slot went to the root that waited, in this change.
        #expect(end.dispatch.launches == [graph.other.handle])
        #expect(graph.state.runQueue.slots == [graph.other.handle])
        #expect(graph.other.record.status == .running)
        switch ending {
        case .failsAndRetries:
            #expect(graph.root.record.nextAttemptAt != nil)
        case .shutDown:
            #expect(graph.root.record.ownerID == nil)
        case .sleeps:
            #expect(graph.root.record.ownerID == nil)
            #expect(graph.root.record.nextAttemptAt == Date(timeIntervalSince1970: 3_000))
        default:
            break
        }
    }

    /// A root resumed while every slot was taken, then cancelled before it got one: once its code ends it waits for no
    /// slot any more. (Left waiting, its next run's code would wait at its first report for ever: a retried root
    /// stuck pending.)
    @Test func aRunThatEndsWhileWaitingForASlotWaitsForNoneAfter() {
        var graph = Graph()
        graph.root.waitsForSlot = true
        graph.root.stopReason = .cancelled
        _ = graph.end(graph.root.handle, .failure(CancellationError()))
        #expect(graph.root.waitsForSlot == false)
        #expect(graph.root.record.status == .cancelled)
    }

    /// A subtask stopped by its own timeout fails, and says which timeout; once its root is lost to another owner,
    /// a subtask's end is not written at all (there is nothing to wait for).
    @Test func aSubtaskEndsWithItsTimeoutNamedAndWritesNothingOnceItsRootIsLost() {
        var graph = Graph()
        func step(_ id: String) -> TaskNode {
            graph.state.addChild(
                TaskRecord(
                    id: id, parentID: "root", rootID: "root", name: id, status: .running,
                    createdAt: Date(timeIntervalSince1970: 1_000)),
                to: graph.root)
        }
        let configuration = TaskExecutor.Configuration()
        let now = Date(timeIntervalSince1970: 2_000)
        let timed = step("root.1")
        timed.stopReason = .timedOut(.seconds(2))
        let ended = graph.state.endChild(timed.handle, .failure(CancellationError()), now: now, configuration: configuration)
        #expect(ended.timedOut == .seconds(2) && ended.sequence != nil)
        #expect(timed.record.status == .failed)
        let orphan = step("root.2")
        graph.root.stopReason = .leaseLost
        let lost = graph.state.endChild(orphan.handle, .success(nil), now: now, configuration: configuration)
        #expect(lost.sequence == nil && lost.timedOut == nil)
        #expect(orphan.record.status == .running)
    }

    /// A root that left memory while its code ran (removed): its slot still goes to the next root.
    @Test func theSlotOfARootGoneFromMemoryGoesToTheNextRoot() {
        var graph = Graph()
        let handle = graph.root.handle
        _ = graph.state.removeRoot(graph.root)
        let end = graph.end(handle, .success(nil))
        #expect(end.ended == nil)
        #expect(end.dispatch.launches == [graph.other.handle])
        #expect(graph.state.runQueue.slots == [graph.other.handle])
    }

    /// A start the store refused (another worker took the root first): the root is dropped without running, and the
    /// slot goes to the next root; a start merely not committed keeps the root.
    @Test(arguments: [true, false])
    func aRefusedStartDropsTheRootAndFreesTheSlot(refused: Bool) {
        var graph = Graph()
        graph.root.conflicted = refused
        let dispatch = graph.state.giveUpStart(
            graph.root.handle, now: Date(timeIntervalSince1970: 2_000), monotonicNow: .seconds(10))
        #expect(dispatch.launches == [graph.other.handle])
        #expect((graph.state.node(id: "root") == nil) == refused)
    }
}
