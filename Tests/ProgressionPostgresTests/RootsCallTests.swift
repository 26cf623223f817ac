#if PostgreSQL
import Foundation
import PostgresNIO
import Progression
import Testing
@testable import ProgressionPostgres

/// A batch of a few roots' rows goes in `apply_roots` (migration 0008), row by row, rather than in `apply_batch`'s one
/// statement: which batches it takes, and that for each it writes what `apply_batch` writes (the same answer, rows,
/// events and queued tree work), run on two schemas from the same rows.
struct RootsCallTests {
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    static func root(
        _ id: String, _ status: TaskStatus, owner: String?, parentJob: String? = nil, finished: Bool = false
    ) -> TaskRecord {
        var record = TaskRecord(
            id: id, name: id, kind: "k", status: status, ownerID: owner, createdAt: t0, parentJobID: parentJob)
        if status != .pending { record.startedAt = t0.addingTimeInterval(1) }
        if finished { record.finishedAt = t0.addingTimeInterval(2) }
        return record
    }

    static func event(_ id: String, _ kind: TaskEvent.Kind, message: String? = nil) -> TaskEvent {
        TaskEvent(taskID: id, rootID: id, kind: kind, at: t0.addingTimeInterval(3), attempt: 1, message: message)
    }

    /// The end of `record` (completed, by its owner).
    static func completed(_ record: TaskRecord) -> TaskUpdate {
        var ended = record
        ended.status = .completed
        ended.progress = 1
        ended.result = Data("{}".utf8)
        ended.finishedAt = t0.addingTimeInterval(4)
        ended.updatedAt = t0.addingTimeInterval(4)
        return TaskUpdate(ended, columns: TaskColumns.changed(from: record, to: ended))
    }

    /// The start of a job queued unowned, taken by its start (guarded by the status the writer read).
    static func started(_ record: TaskRecord, by owner: String) -> TaskUpdate {
        var started = record
        started.status = .running
        started.ownerID = owner
        started.startedAt = t0.addingTimeInterval(4)
        started.updatedAt = t0.addingTimeInterval(4)
        return TaskUpdate(
            started, columns: TaskColumns.changed(from: record, to: started), unownedWithStatus: record.status)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        /// Rows stored before the batch, and jobs that depend on others (job, the one it waits for).
        var stored: [TaskRecord]
        var dependencies: [(String, String)] = []
        var batch: TaskBatch
        var testDescription: String { name }
    }

    static let cases: [Case] = {
        let mine = root("mine", .running, owner: "o")
        let theirs = root("theirs", .running, owner: "p")
        let queued = root("queued", .pending, owner: nil)
        let taken = root("taken", .running, owner: "p")
        let child = root("child", .running, owner: "o", parentJob: "parent")
        let parent = root("parent", .pending, owner: nil)
        let awaited = root("awaited", .running, owner: "o")
        let waiting = root("waiting", .pending, owner: nil)
        var new = root("new", .running, owner: "o")
        new.startedAt = t0
        return [
            Case(
                name: "a new root, started", stored: [],
                batch: TaskBatch(inserts: [new], events: [event("new", .created), event("new", .started)], owner: "o")),
            Case(
                name: "its owner's end of a root", stored: [mine],
                batch: TaskBatch(updates: [completed(mine)], events: [event("mine", .completed)], owner: "o")),
            Case(
                name: "the end of a root another owner holds: refused, its event too", stored: [theirs],
                batch: TaskBatch(updates: [completed(theirs)], events: [event("theirs", .completed)], owner: "o")),
            Case(
                name: "the start of a job queued unowned", stored: [queued],
                batch: TaskBatch(updates: [started(queued, by: "o")], events: [event("queued", .started)], owner: "o")),
            Case(
                name: "the start of a queued job another worker took first: refused", stored: [taken],
                batch: TaskBatch(
                    updates: [started(root("taken", .pending, owner: nil), by: "o")],
                    events: [event("taken", .started)], owner: "o")),
            Case(
                name: "a new root whose id is taken: a conflict, its events not written", stored: [theirs],
                batch: TaskBatch(
                    inserts: [root("theirs", .running, owner: "o")],
                    events: [event("theirs", .created, message: "mine")], owner: "o")),
            Case(
                name: "two ends, one refused, and a new root", stored: [mine, theirs],
                batch: TaskBatch(
                    inserts: [new], updates: [completed(theirs), completed(mine)],
                    events: [
                        event("theirs", .completed), event("new", .created), event("mine", .completed),
                        event("new", .started),
                    ], owner: "o")),
            Case(
                name: "the end of a child job: its mirror is queued", stored: [parent, child],
                batch: TaskBatch(updates: [completed(child)], events: [event("child", .completed)], owner: "o")),
            Case(
                name: "the end of a job another waits for: its dependents are looked at", stored: [awaited, waiting],
                dependencies: [("waiting", "awaited")],
                batch: TaskBatch(updates: [completed(awaited)], events: [event("awaited", .completed)], owner: "o")),
        ]
    }()

    /// What a batch left in its schema: the answer, the rows, each row's events, and the tree work queued.
    struct Written: Equatable {
        var result: TaskBatchResult
        var rows: [TaskRecord?]
        var events: [[String]]
        var treeWork: [String]
    }

    static func write(_ batch: Case, rootCalls: Bool) async throws -> Written {
        let store = try await PostgresSchemaTests.open(PostgresSchemaTests.schemaName("roots")) {
            $0.rootCalls = rootCalls
        }
        defer { Task { await store.close() } }
        try await store.insert(
            batch.stored, events: [],
            dependencies: batch.dependencies.map { JobDependency(jobID: $0.0, dependsOn: $0.1, onFailure: .cancel) })
        let queuedBefore = try await treeWork(in: store)
        let result = try await store.apply(batch.batch)
        let ids = Set(batch.stored.map(\.id) + batch.batch.inserts.map(\.id)).sorted()
        var rows: [TaskRecord?] = []
        var events: [[String]] = []
        for id in ids {
            rows.append(try await store.task(id: id))
            events.append(try await store.events(of: id).map { "\($0.taskID) \($0.kind) \($0.message ?? "")" })
        }
        let queued = try await treeWork(in: store).filter { !queuedBefore.contains($0) }
        return Written(result: result, rows: rows, events: events, treeWork: queued)
    }

    static func treeWork(in store: PostgresTaskStore) async throws -> [String] {
        let table = "\(store.names.quoted).tree_changes"
        return try await store.read { connection in
            try await store.rows(
                "SELECT task_id || ' ' || action FROM \(table) ORDER BY 1", PostgresBindings(), connection: connection
            ) { try $0.decode(String.self) }
        }
    }

    @Test(arguments: cases)
    func aBatchOfAFewRootsIsWrittenAsApplyBatchWritesIt(_ batch: Case) async throws {
        #expect(RootsCall.fits(batch.batch))
        let byRows = try await Self.write(batch, rootCalls: true)
        let inOneStatement = try await Self.write(batch, rootCalls: false)
        #expect(byRows == inOneStatement)
        // And the cases say what they are named for.
        switch batch.name {
        case let name where name.contains("refused"):
            #expect(!byRows.result.rejectedTaskIDs.isEmpty)
        case let name where name.contains("conflict"):
            #expect(byRows.result.conflictingTaskIDs == ["theirs"])
            #expect(byRows.events.joined().allSatisfy { !$0.hasSuffix("mine") })
        case let name where name.contains("mirror"):
            #expect(byRows.treeWork == ["child mirror"])
        case let name where name.contains("dependents"):
            #expect(byRows.treeWork == ["awaited dependents"])
        default:
            #expect(byRows.result == TaskBatchResult())
        }
    }

    /// Which batches go in `apply_roots`: a few rows, all of roots, in a batch that goes in one call at all.
    @Test func onlyABatchOfAFewRootsRowsGoesRowByRow() {
        let roots = (0..<RootsCall.maximumRows + 1).map { Self.root("r\($0)", .running, owner: "o") }
        #expect(RootsCall.fits(TaskBatch(inserts: Array(roots.prefix(RootsCall.maximumRows)), owner: "o")))
        #expect(!RootsCall.fits(TaskBatch(inserts: roots, owner: "o")), "too many rows")
        let step = TaskRecord(id: "r0.1", parentID: "r0", rootID: "r0", name: "step", createdAt: Self.t0)
        #expect(!RootsCall.fits(TaskBatch(inserts: [step], owner: "o")), "a subtask's row is fenced by its root")
        #expect(!RootsCall.fits(TaskBatch(inserts: [roots[0]])), "no owner: statement by statement")
        #expect(
            !RootsCall.fits(TaskBatch(inserts: [roots[0]], updates: [Self.completed(roots[0])], owner: "o")),
            "a row twice")
    }
}
#endif
