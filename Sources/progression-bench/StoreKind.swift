import Progression

/// Which store a scenario runs on: the durable SQLite store, or the in-memory store that serves as its baseline.
enum StoreKind: String, Sendable, CaseIterable {
    case sqlite
    case memory

    /// A new, empty store; a SQLite one lives in a new file in `scratch`.
    ///
    /// - Throws: ``TaskStoreError`` when the database cannot be created.
    func makeStore(in scratch: ScratchDirectory) throws -> OpenStore {
        switch self {
        case .sqlite: OpenStore(store: try SQLiteTaskStore(path: scratch.file("bench.sqlite")))
        case .memory: OpenStore(store: InMemoryTaskStore())
        }
    }
}

/// A store opened for one run, closed (a SQLite store's connection) by ``close()``.
struct OpenStore: Sendable {
    let store: any TaskStore

    /// Closes a SQLite store's connection; nothing for the in-memory store.
    func close() async {
        if let sqlite = store as? SQLiteTaskStore { await sqlite.close() }
    }
}
