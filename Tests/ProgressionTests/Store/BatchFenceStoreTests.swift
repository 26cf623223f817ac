import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// The fencing table of ``BatchFenceTests`` run against every store: the rule carried out in Swift (the in-memory
/// store, and SQLite's, which checks a root's own row in its update) and in PL/pgSQL (PostgreSQL's `apply_batch`,
/// which keeps the batch one round trip) writes what each row says, and reports the same rows refused.
struct BatchFenceStoreTests {
    /// What an update sets, so that a written column differs from the stored one.
    static func changed(_ record: TaskRecord) -> TaskRecord {
        var record = record
        record.progress = 0.5
        record.priority = 7
        record.step = "written"
        return record
    }

    @Test(arguments: StoreKind.allCases, BatchFenceTests.rows)
    func everyStoreWritesWhatTheFencingTableSays(kind: StoreKind, row: BatchFenceTests.Row) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        do {
            try await check(row, on: store)
        } catch {
            await close(store)
            throw error
        }
        await close(store)
    }

    func check(_ row: BatchFenceTests.Row, on store: any TaskStoreBackend) async throws {
        // The store as the row has it: each root with its holder, the rows the batch updates in the roots that are
        // there (all of them for a batch without an owner, which reads no root), and a root whose insert finds its
        // id taken held by another owner.
        let inserted = Set(row.batch.inserts.map(\.id))
        var stored: [TaskRecord] = row.holders.sorted { $0.key < $1.key }.map { id, holder in
            BatchFenceTests.root(id, owner: holder.owner, status: holder.status ?? .running)
        }
        stored += row.conflicted.map { BatchFenceTests.root($0, owner: "p") }
        let there = Set(stored.map(\.id))
        for update in row.batch.updates where row.batch.owner == nil || there.contains(update.record.rootID) {
            let id = update.record.id
            if !there.contains(id) && !inserted.contains(id) { stored.append(update.record) }
        }
        try await store.insert(stored, events: [])
        var batch = row.batch
        batch.updates = batch.updates.map {
            TaskUpdate(Self.changed($0.record), columns: $0.columns, unownedWithStatus: $0.unownedWithStatus)
        }

        let result = try await store.apply(batch)

        let records = batch.inserts + batch.updates.map(\.record)
        let refused = Set(records.filter { row.fenced.contains($0.rootID) }.map(\.id))
        #expect(Set(result.rejectedTaskIDs) == refused)
        #expect(result.conflictingTaskIDs == row.conflicted)
        for insert in batch.inserts {
            let now = try await store.task(id: insert.id)
            if row.fenced.contains(insert.rootID) {
                #expect(now == nil || now?.ownerID != insert.ownerID, "\(insert.id) not inserted")
            } else {
                #expect(now?.name == insert.name && now?.ownerID == insert.ownerID, "\(insert.id) inserted")
            }
        }
        for update in batch.updates {
            let now = try await store.task(id: update.record.id)
            let written = row.fenced.contains(update.record.rootID) == false
            if update.columns.contains(.progress) { #expect((now?.progress == 0.5) == written, "\(update.record.id)") }
            if update.columns.contains(.priority) { #expect((now?.priority == 7) == written, "\(update.record.id)") }
            if update.columns.contains(.step) { #expect((now?.step == "written") == written, "\(update.record.id)") }
        }
    }
}
