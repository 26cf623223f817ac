#if Console
import Foundation
import Progression
import ProgressionSQLite

/// The database the console's pages are measured on: `roots` root jobs (mostly completed, some failed and
/// cancelled, the newest pending and running) and one job whose tree has `treeNodes` nodes (100 folders of files,
/// some running), built once with raw batched inserts into a file that `SQLiteTaskStore` created (so the schema is
/// the library's), then reused from `.build/console-bench/`.
struct BenchDatabase: Sendable {
    let path: String
    let roots: Int
    let treeNodes: Int
    /// The id of the job with the large tree.
    static let treeRoot = "big-tree"
    /// The creation time of the first root, in milliseconds (roots follow 10 ms apart).
    static let firstCreated: Int64 = 1_767_225_600_000

    init(directory: String, roots: Int, treeNodes: Int) {
        self.roots = roots
        self.treeNodes = treeNodes
        let schema = SQLiteMigration.embedded.last?.identifier ?? "none"
        path = directory + "/console-\(roots)-roots-\(treeNodes)-tree-\(schema).sqlite"
    }

    /// The root of number `index` (0 the oldest).
    static func id(_ index: Int) -> String {
        let text = String(index, radix: 16)
        return "job-" + String(repeating: "0", count: max(0, 8 - text.count)) + text
    }

    static func createdAt(_ index: Int) -> Int64 { firstCreated + Int64(index) * 10 }

    /// Builds the file unless it exists.
    func buildIfMissing(log: (String) -> Void) async throws {
        guard !FileManager.default.fileExists(atPath: path) else { return }
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let partial = path + ".partial"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: partial + suffix) }
        let store = try SQLiteTaskStore(path: partial)
        await store.close()
        let started = ContinuousClock.now
        try fill(partial, log: log)
        try FileManager.default.moveItem(atPath: partial, toPath: path)
        log("built \(path) in \(ContinuousClock.now - started)")
    }

    private func fill(_ file: String, log: (String) -> Void) throws {
        let connection = try SQLiteConnection(path: file)
        defer { connection.close() }
        try connection.execute("PRAGMA synchronous=OFF")
        try connection.execute("PRAGMA cache_size=-262144")
        let insert = try connection.prepare(
            """
            INSERT INTO tasks (id, parent_id, root_id, name, occurrence, kind, input, options, status, progress, step,
              weight, attempt, interruptions, error_type, error_description, priority, created_at, started_at,
              updated_at, finished_at)
            VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?7, ?8, ?9, ?10, 1.0, 1, 0, ?11, ?12, 0, ?13, ?14, ?15, ?16)
            """, persistent: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let options = String(decoding: try encoder.encode(TaskOptions.interactive), as: UTF8.self)
        let kinds = ["import", "export", "report"]
        func row(
            id: String, parent: String?, root: String, name: String, kind: String?, input: String?, status: TaskStatus,
            progress: Double?, created: Int64, error: Bool = false
        ) throws {
            insert.reset()
            try insert.bind(id, at: 1)
            if let parent { try insert.bind(parent, at: 2) } else { try insert.bindNull(at: 2) }
            try insert.bind(root, at: 3)
            try insert.bind(name, at: 4)
            if let kind { try insert.bind(kind, at: 5) } else { try insert.bindNull(at: 5) }
            if let input { try insert.bind(Array(input.utf8), at: 6) } else { try insert.bindNull(at: 6) }
            try insert.bind(options, at: 7)
            try insert.bind(status.rawValue, at: 8)
            if let progress { try insert.bind(progress, at: 9) } else { try insert.bindNull(at: 9) }
            try insert.bind("phase 2", at: 10)
            if error {
                try insert.bind("Bench.Failure", at: 11)
                try insert.bind("the input was not valid", at: 12)
            } else {
                try insert.bindNull(at: 11)
                try insert.bindNull(at: 12)
            }
            try insert.bind(created, at: 13)
            if status == .pending { try insert.bindNull(at: 14) } else { try insert.bind(created + 5, at: 14) }
            try insert.bind(created + 400, at: 15)
            if status.isFinished { try insert.bind(created + 400, at: 16) } else { try insert.bindNull(at: 16) }
            _ = try insert.step()
        }
        let batch = 5_000
        for first in stride(from: 0, to: roots, by: batch) {
            try connection.transaction {
                for index in first..<min(roots, first + batch) {
                    let status: TaskStatus =
                        index >= roots - 40 ? (index % 2 == 0 ? .running : .pending)
                        : index % 20 == 7 ? .failed : index % 50 == 13 ? .cancelled : .completed
                    try row(
                        id: Self.id(index), parent: nil, root: Self.id(index), name: "nightly job \(index)",
                        kind: kinds[index % 3], input: #"{"file":"part-\#(index).csv"}"#, status: status,
                        progress: status == .completed ? 1 : 0.5, created: Self.createdAt(index), error: status == .failed)
                }
            }
            if first > 0, first % 200_000 == 0 { log("database: \(first) roots") }
        }
        // The large tree: 100 folders of files; the first folder running, with 20 files running, the rest pending.
        let created = Self.createdAt(roots)
        try connection.transaction {
            try row(
                id: Self.treeRoot, parent: nil, root: Self.treeRoot, name: "large tree", kind: "import",
                input: #"{"folders":100}"#, status: .running, progress: 0.3, created: created)
            let folders = 100
            let files = max(1, (treeNodes - 1) / folders - 1)
            var made = 1
            for folder in 0..<folders where made < treeNodes {
                let folderID = "\(Self.treeRoot).\(folder)"
                let folderStatus: TaskStatus = folder < 30 ? .completed : folder == 30 ? .running : .pending
                try row(
                    id: folderID, parent: Self.treeRoot, root: Self.treeRoot, name: "folder-\(folder)/", kind: nil,
                    input: nil, status: folderStatus, progress: folderStatus == .completed ? 1 : 0, created: created + 1)
                made += 1
                for file in 0..<files where made < treeNodes {
                    let status: TaskStatus =
                        folder < 30 ? .completed : folder == 30 ? (file < 20 ? .running : .completed) : .pending
                    try row(
                        id: "\(folderID).\(file)", parent: folderID, root: Self.treeRoot,
                        name: "folder-\(folder)/file-\(file).txt", kind: nil, input: nil, status: status,
                        progress: status == .completed ? 1 : 0.4, created: created + 2)
                    made += 1
                }
            }
        }
        try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }
}
#endif
