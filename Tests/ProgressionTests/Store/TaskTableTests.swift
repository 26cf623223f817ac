import Foundation
import Progression
import ProgressionSQLite
import ProgressionTestSupport
import Testing

/// The `tasks` table's columns are described once (``TaskTableColumn``): both SQL stores select, insert, update and
/// read through that description, so it must name the table's columns and give every changeable column its place.
struct TaskTableTests {
    /// The changeable columns one by one, in bit order.
    static let eachChangeable: [TaskColumns] = (0..<32).map { TaskColumns(rawValue: 1 << $0) }
        .filter { TaskColumns.all.contains($0) }

    @Test func theDescriptionNamesEveryColumnOfTheSQLiteTableOnce() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("columns.sqlite")
        _ = try SQLiteTaskStore(path: path)
        let connection = try SQLiteConnection(path: path)
        let names = try connection.query("SELECT name FROM pragma_table_info('tasks') ORDER BY cid") { $0.text(at: 0) }
        #expect(names == TaskTableColumn.allCases.map(\.name))
    }

    /// A flag of ``TaskColumns`` that no column carried would be dropped by every update; a column carrying a flag
    /// outside `.all` would never be written.
    @Test(arguments: eachChangeable)
    func everyChangeableColumnIsWrittenByItsFlagAlone(flag: TaskColumns) {
        let written = Array(TaskTableColumn.written(by: flag))
        #expect(!written.isEmpty)
        #expect(written.allSatisfy { $0.changeable == flag })
        #expect(written == TaskTableColumn.allCases.filter { $0.changeable == flag })
    }

    @Test func anUpdateBindsItsColumnsInFlagOrderThenByPosition() {
        #expect(Array(TaskTableColumn.written(by: .all)) == TaskTableColumn.updatable)
        #expect(TaskTableColumn.updatable.count == TaskTableColumn.allCases.filter { $0.changeable != nil }.count)
        #expect(
            Array(TaskTableColumn.written(by: [.error, .status, .options]))
                == [.status, .errorType, .errorDescription, .options])
        #expect(Array(TaskTableColumn.written(by: .report)) == [.progress, .step, .updatedAt, .total, .rate])
        #expect(Array(TaskTableColumn.written(by: [])).isEmpty)
        let order = TaskTableColumn.updatable.map { $0.changeable!.rawValue }
        #expect(order == order.sorted())
    }

    @Test func theColumnsWrittenOnlyAtInsertAreTheIdentityAndCreation() {
        #expect(
            TaskTableColumn.allCases.filter { $0.changeable == nil }
                == [.id, .parentID, .rootID, .name, .occurrence, .kind, .input, .idempotencyKey, .leaseExpiresAt,
                    .createdAt, .parentJobID, .childJobID])
    }

    /// Each column's value is the record's field, in the type of its column.
    @Test func aRecordsValuesAreItsFieldsInTheirColumnsTypes() throws {
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let record = TaskRecord(
            id: "r.1", parentID: "r", rootID: "r", name: "step", occurrence: 2, kind: "k", input: Data("in".utf8),
            idempotencyKey: "key", status: .failed, progress: 0.5, step: "s", weight: 3, attempt: 4, interruptions: 5,
            errorType: "E", errorDescription: "e", result: Data("out".utf8), checkpoint: Data("cp".utf8),
            ownerID: "o", priority: 7, createdAt: t0, startedAt: t0.addingTimeInterval(1),
            updatedAt: t0.addingTimeInterval(2), finishedAt: t0.addingTimeInterval(3),
            nextAttemptAt: t0.addingTimeInterval(4), total: 10, rate: 0.25, parentJobID: "p", childJobID: "c",
            waitingFor: "w")
        var linked = record
        linked.wait = .children(all: false)
        linked.waitingProgress = 0.125
        linked.share = 0.5
        linked.awaited = true
        linked.version = "v2"
        let values = TaskTableColumn.allCases.map { $0.value(of: linked) { _ in "{}" } }
        let ms = t0.storedMilliseconds
        #expect(
            values == [
                .text("r.1"), .text("r"), .text("r"), .text("step"), .integer(2), .text("k"), .blob(Data("in".utf8)),
                .text("key"), .text("{}"), .text("failed"), .real(0.5), .text("s"), .real(3), .integer(4),
                .integer(5), .text("E"), .text("e"), .blob(Data("out".utf8)), .blob(Data("cp".utf8)), .text("o"),
                .null, .integer(7), .integer(ms), .integer(ms + 1000), .integer(ms + 2000), .integer(ms + 3000),
                .integer(ms + 4000), .real(10), .real(0.25), .text("p"), .text("c"), .text("children:any"),
                .text("w"), .real(0.125), .real(0.5), .integer(1), .text("v2"),
            ])
        for (column, value) in zip(TaskTableColumn.allCases, values) {
            switch (column.type, value) {
            case (_, .null), (.text, .text), (.int4, .integer), (.int8, .integer), (.float8, .real), (.bytea, .blob):
                continue
            default:
                Issue.record("\(column) is \(column.type) but its value is \(value)")
            }
        }
    }
}
