import Foundation
import Synchronization
@testable import Progression
import ProgressionTestSupport
import Testing

/// The ends of roots told by id (``RootEnds``): what a ``JobClient`` waiting for a job learns from an executor of its
/// process, so that it returns the row as committed, or reads the job at once rather than after the spacing it keeps
/// between reads that any commit causes (issue 38: the latency of one job).
struct RootEndsTests {
    @Test func anEndToldBeforeTheWaitIsKeptUntilTakenAndOnlyForItsRoot() async throws {
        let ends = RootEnds()
        #expect(!ends.isWatched)
        // Nobody watches: nothing is kept.
        ends.post([end("a")])
        let token = ends.watch("a")
        let other = ends.watch("b")
        #expect(ends.isWatched)
        #expect(ends.takeEnd("a", token: token) == nil)
        let row = Self.root(.completed)
        ends.post([end("a", row), end("c")])
        // Told before the wait: the wait returns at once, and the end is taken once, with the row told.
        try await within(.seconds(30), "a wait for an end told before it") { await ends.wait("a", token: token) }
        #expect(ends.takeEnd("a", token: token) == end("a", row))
        #expect(ends.takeEnd("a", token: token) == nil)
        #expect(ends.takeEnd("b", token: other) == nil)
        // An action left for the next end is called once, by the post, and not when an end waits to be taken.
        let calls = Mutex(0)
        #expect(ends.onEnd("b", token: other) { calls.withLock { $0 += 1 } })
        ends.post([end("b")])
        ends.post([end("b")])
        #expect(calls.withLock { $0 } == 1)
        #expect(!ends.onEnd("b", token: other) { calls.withLock { $0 += 1 } })
        #expect(ends.takeEnd("b", token: other) == end("b"))
        // Dropped, it is not called.
        #expect(ends.onEnd("b", token: other) { calls.withLock { $0 += 1 } })
        ends.cancelOnEnd("b", token: other)
        ends.post([end("b")])
        #expect(calls.withLock { $0 } == 1)
        ends.unwatch("a", token: token)
        ends.unwatch("b", token: other)
        #expect(!ends.isWatched)
    }

    @Test func anEndWakesEveryWatcherOfItsRootAndAnUnwatchOrACancelEndsAWait() async throws {
        let ends = RootEnds()
        let first = ends.watch("a")
        let second = ends.watch("a")
        let waiters = [first, second].map { token in Task { await ends.wait("a", token: token) } }
        // One post, whether the waiters have parked yet or not: an end told before a wait is kept for it.
        ends.post([end("a")])
        for waiter in waiters { try await within(.seconds(60), "a watcher of the ended root") { await waiter.value } }
        #expect(ends.takeEnd("a", token: first) == end("a"))
        #expect(ends.takeEnd("a", token: second) == end("a"))
        // A wait that no end comes to: its unwatch ends it, and so does its task's cancellation.
        let unwatched = Task { await ends.wait("a", token: first) }
        ends.unwatch("a", token: first)
        try await within(.seconds(30), "the wait of a watch that ended") { await unwatched.value }
        let cancelled = Task { await ends.wait("a", token: second) }
        cancelled.cancel()
        try await within(.seconds(30), "the cancelled wait") { await cancelled.value }
        ends.unwatch("a", token: second)
        #expect(!ends.isWatched)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var update: TaskUpdate?
        var insert: TaskRecord?
        var rejected: [String] = []
        var conflicting: [String] = []
        var told: [String]
        /// Whether the row goes with the end.
        var withRow = true
    }

    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static func root(_ status: TaskStatus) -> TaskRecord { TaskRecord(id: "r", name: "r", status: status, createdAt: t0) }
    static let subtask = TaskRecord(id: "r.s", parentID: "r", rootID: "r", name: "s", status: .completed, createdAt: t0)

    /// Which of a committed batch's rows the writer tells as ended.
    static let rows: [Row] = [
        Row(testDescription: "a root's completion", update: TaskUpdate(root(.completed), columns: .status), told: ["r"]),
        Row(testDescription: "a root's failure", update: TaskUpdate(root(.failed), columns: [.status, .error]), told: ["r"]),
        Row(testDescription: "a root's cancellation", update: TaskUpdate(root(.cancelled), columns: .status), told: ["r"]),
        Row(testDescription: "a root's start", update: TaskUpdate(root(.running), columns: .status), told: []),
        Row(testDescription: "a retry's wait", update: TaskUpdate(root(.pending), columns: .status), told: []),
        Row(
            testDescription: "a finished root's progress (its status not written)",
            update: TaskUpdate(root(.completed), columns: .progress), told: []),
        Row(testDescription: "a subtask's end", update: TaskUpdate(subtask, columns: .status), told: []),
        Row(
            testDescription: "a root's end the store refused",
            update: TaskUpdate(root(.completed), columns: .status), rejected: ["r"], told: []),
        Row(testDescription: "a root inserted finished", insert: root(.cancelled), told: ["r"]),
        Row(
            testDescription: "a root inserted finished whose id another row has",
            insert: root(.cancelled), conflicting: ["r"], told: []),
        Row(
            testDescription: "the end of a root queued here, unowned in the store (others may change its row)",
            update: TaskUpdate(root(.cancelled), columns: .status, unownedWithStatus: .pending), told: ["r"],
            withRow: false),
        Row(testDescription: "a root inserted pending", insert: root(.pending), told: []),
    ]

    @Test(arguments: rows)
    func theWriterTellsTheEndsOfRootsItCommitted(row: Row) {
        let batch = TaskBatch(inserts: row.insert.map { [$0] } ?? [], updates: row.update.map { [$0] } ?? [])
        let ended = StoreWriter.endedRoots(batch, rejected: row.rejected, conflicting: row.conflicting)
        #expect(ended.map(\.id) == row.told)
        // With the row as the batch wrote it, or without.
        let written = row.update?.record ?? row.insert
        #expect(ended.map(\.record) == ended.map { _ in row.withRow ? written : nil })
    }

    func end(_ id: String, _ record: TaskRecord? = nil) -> RootEnd { RootEnd(id: id, record: record) }
}
