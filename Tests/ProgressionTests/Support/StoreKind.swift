import Foundation
import Progression
import ProgressionTestSupport
#if PostgreSQL
import ProgressionPostgres
import ProgressionPostgresTestSupport
#endif

/// The store implementations, for tests that must hold for each.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    case memory
    #if PostgreSQL
    /// A schema of its own on the test process's PostgreSQL server (started by the first test that needs it).
    case postgres
    #endif

    var testDescription: String { rawValue }

    /// A new, empty store; the directory keeps the SQLite file alive for the test.
    func make(in directory: TemporaryDirectory) async throws -> any TaskStoreBackend {
        switch self {
        case .sqlite: try SQLiteTaskStore(path: directory.file("tasks.sqlite"))
        case .memory: InMemoryTaskStore()
        #if PostgreSQL
        // Opens in the background: the first call waits for the schema (and fails when the server could not start).
        // The shared server is started off the cooperative pool (initdb and pg_ctl take seconds on a loaded machine).
        case .postgres:
            try PostgresTaskStore.start(
                configuration: try await LocalPostgresServer.shared().configuration(
                    schema: "test_" + UUID().uuidString.prefix(8).lowercased() + "_\(UInt32.random(in: 0...UInt32.max))"))
        #endif
        }
    }
}

import Testing

/// Closes a store made by ``StoreKind/make(in:)`` that holds connections (PostgreSQL's count against the test
/// server's limit).
func close(_ store: any TaskStoreBackend) async {
    #if PostgreSQL
    await (store as? PostgresTaskStore)?.close()
    #endif
}

/// A record with every optional field set, for round trips.
func makeRecord(
    id: String, parent: TaskRecord? = nil, name: String? = nil, occurrence: Int = 0, status: TaskStatus = .pending,
    createdAt: Date = Date(timeIntervalSince1970: 1_700_000_000), owner: String? = nil, kind: String? = nil
) -> TaskRecord {
    TaskRecord(
        id: id, parentID: parent?.id, rootID: parent?.rootID ?? id, name: name ?? "task \(id)", occurrence: occurrence,
        kind: kind, options: .interactive, status: status, ownerID: owner, createdAt: createdAt,
        finishedAt: status.isFinished ? createdAt.addingTimeInterval(1) : nil)
}
