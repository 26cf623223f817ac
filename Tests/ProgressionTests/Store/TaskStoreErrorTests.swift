import Foundation
import Testing

@testable import Progression
import ProgressionSQLite

/// What a SQLite result code becomes, as a table: the store error's reason, whether the executor waits and tries again
/// (transient), and the words people read.
struct TaskStoreErrorTests {
    static let rows: [(code: Int32, reason: TaskStoreError.Reason, transient: Bool, says: String)] = [
        (5, .busy, true, "is locked by another process"),  // SQLITE_BUSY
        (6, .busy, true, "is locked by another process"),  // SQLITE_LOCKED
        (15, .busy, true, "is locked by another process"),  // SQLITE_PROTOCOL
        (13, .storageFailure, true, "the storage of the database '/db' failed: database or disk is full"),  // FULL
        (10, .storageFailure, true, "the storage of the database '/db' failed"),  // SQLITE_IOERR
        (266, .storageFailure, true, "the storage of the database '/db' failed"),  // SQLITE_IOERR_READ
        (7, .storageFailure, true, "the storage of the database '/db' failed"),  // SQLITE_NOMEM
        (8, .readOnly, true, "is read-only"),  // SQLITE_READONLY
        (3, .readOnly, true, "is read-only"),  // SQLITE_PERM
        (14, .cannotOpen, true, "cannot open the database"),  // SQLITE_CANTOPEN
        (11, .corrupt, false, "is damaged"),  // SQLITE_CORRUPT
        (26, .notADatabase, false, "is not a Progression database"),  // SQLITE_NOTADB
        (1555, .conflict, false, "conflict"),  // SQLITE_CONSTRAINT_PRIMARYKEY
        (275, .constraint, false, "invalid data"),  // SQLITE_CONSTRAINT_CHECK
        (9, .cancelled, false, "cancelled"),  // SQLITE_INTERRUPT
        (18, .other, false, "database error '/db'"),  // SQLITE_TOOBIG: trying again cannot help
        (1, .other, false, "database error '/db'"),  // SQLITE_ERROR
    ]

    @Test(arguments: rows.indices)
    func aSQLiteCodeBecomesAReasonAndTheExecutorRetriesOnlyTransientOnes(_ index: Int) {
        let row = Self.rows[index]
        let error = SQLiteTaskStore.storeError(
            SQLiteError(code: row.code, message: row.code == 13 ? "database or disk is full" : "m"), path: "/db")
        #expect(error.reason == row.reason, "code \(row.code)")
        #expect(error.isTransient == row.transient, "code \(row.code)")
        #expect(error.description.contains(row.says), "code \(row.code): \(error.description)")
        #expect(error.sqliteCode == row.code)
    }
}
