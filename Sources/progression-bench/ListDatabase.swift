import Foundation
import Progression
import ProgressionSQLite

/// The large database that listing is measured on: `tasks` task rows (a quarter of them roots, each with three
/// children) and `eventsPerTask` history events per task, built once with raw batched inserts through
/// ProgressionSQLite into a file that `SQLiteTaskStore` created (so the schema is the library's), then reused.
///
/// It is built under a temporary name and renamed when complete, so an interrupted build is never reused. Ids are
/// UUID-shaped and increase with creation (like UUIDv7), which keeps the inserts in index order.
struct ListDatabase: Sendable {
    let path: String
    let tasks: Int
    let eventsPerTask: Int

    /// The database for `tasks` tasks in `directory` (created when missing).
    init(directory: String, tasks: Int, eventsPerTask: Int) {
        self.tasks = tasks
        self.eventsPerTask = eventsPerTask
        // Named by the schema it was built with: a new migration builds a new file (an old one is left alone).
        let schema = SQLiteMigration.embedded.last?.identifier ?? "none"
        path = directory + "/list-\(tasks)-tasks-\(eventsPerTask)-events-\(schema).sqlite"
    }

    var exists: Bool { FileManager.default.fileExists(atPath: path) }

    static let childrenPerRoot = 3

    /// Builds the file unless it exists. Returns whether it built it.
    ///
    /// - Throws: ``TaskStoreError`` or ``SQLiteError`` when the build fails (the partial file is removed).
    @discardableResult
    func buildIfMissing(log: (String) -> Void) async throws -> Bool {
        guard !exists else { return false }
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let partial = path + ".partial"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: partial + suffix) }
        do {
            let store = try SQLiteTaskStore(path: partial)
            await store.close()
            try fill(partial, log: log)
            try FileManager.default.moveItem(atPath: partial, toPath: path)
        } catch {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: partial + suffix) }
            throw error
        }
        return true
    }

    private func fill(_ file: String, log: (String) -> Void) throws {
        let connection = try SQLiteConnection(path: file)
        defer { connection.close() }
        try connection.execute("PRAGMA synchronous=OFF")
        try connection.execute("PRAGMA cache_size=-262144")
        let insertTask = try connection.prepare(
            """
            INSERT INTO tasks (id, parent_id, root_id, name, occurrence, kind, options, status, progress, step, weight,
              attempt, interruptions, error_type, error_description, owner_id, priority, created_at, started_at,
              updated_at, finished_at)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 1.0, 1, 0, ?11, ?12, ?13, 0, ?14, ?15, ?16, ?17)
            """, persistent: true)
        let insertEvent = try connection.prepare(
            """
            INSERT INTO events (task_id, root_id, kind, at, attempt, progress, message, error_type)
            VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7)
            """, persistent: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let options = String(decoding: try encoder.encode(TaskOptions.default), as: UTF8.self)
        let nodesPerRoot = 1 + Self.childrenPerRoot
        let roots = max(1, tasks / nodesPerRoot)
        let base = Int64(Date().timeIntervalSince1970 * 1000) - Int64(roots) * 1_000
        let rootsPerTransaction = 2_500
        let clock = ContinuousClock.now
        for first in stride(from: 0, to: roots, by: rootsPerTransaction) {
            try connection.transaction {
                for root in first..<min(roots, first + rootsPerTransaction) {
                    try insertTree(
                        root: root, createdAt: base + Int64(root) * 1_000, options: options, task: insertTask,
                        event: insertEvent)
                }
            }
            if first % 50_000 == 0, first > 0 {
                let done = Double(first) / Double(roots)
                log(
                    "list database: \(Int(done * 100))% after "
                        + "\(String(format1: (ContinuousClock.now - clock).inSeconds, decimals: 1)) s")
            }
        }
        try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    /// What a root of the list database is: mostly completed, some failed, the newest ones running or pending.
    private func status(ofRoot root: Int, roots: Int) -> TaskStatus {
        if root >= roots - 20 { return root % 2 == 0 ? .running : .pending }
        if root % 20 == 7 { return .failed }
        if root % 50 == 13 { return .cancelled }
        return .completed
    }

    private func insertTree(
        root: Int, createdAt: Int64, options: String, task: SQLiteStatement, event: SQLiteStatement
    ) throws {
        let roots = max(1, tasks / (1 + Self.childrenPerRoot))
        let rootStatus = status(ofRoot: root, roots: roots)
        let rootID = Self.id(root: root, node: 0)
        for node in 0...Self.childrenPerRoot {
            let id = Self.id(root: root, node: node)
            let status: TaskStatus =
                node == 0 ? rootStatus : (rootStatus == .running && node == Self.childrenPerRoot ? .running : .completed)
            let started = status == .pending ? nil : createdAt + Int64(node) * 10
            let finished: Int64? = status.isFinished ? createdAt + 500 + Int64(node) : nil
            let failed = status == .failed
            task.reset()
            try task.bind(id, at: 1)
            if node == 0 { try task.bindNull(at: 2) } else { try task.bind(rootID, at: 2) }
            try task.bind(rootID, at: 3)
            try task.bind(node == 0 ? "import batch \(root)" : "part \(node)", at: 4)
            try task.bind(Int64(0), at: 5)
            if node == 0, root % 3 == 0 { try task.bind("report.render", at: 6) } else { try task.bindNull(at: 6) }
            try task.bind(options, at: 7)
            try task.bind(status.rawValue, at: 8)
            try task.bind(status == .completed ? 1.0 : 0.5, at: 9)
            try task.bind("phase 3", at: 10)
            if failed { try task.bind("Bench.Failure", at: 11) } else { try task.bindNull(at: 11) }
            if failed { try task.bind("the input was not valid", at: 12) } else { try task.bindNull(at: 12) }
            if status == .running { try task.bind("dead-owner", at: 13) } else { try task.bindNull(at: 13) }
            try task.bind(createdAt + Int64(node), at: 14)
            if let started { try task.bind(started, at: 15) } else { try task.bindNull(at: 15) }
            try task.bind(finished ?? createdAt + 400, at: 16)
            if let finished { try task.bind(finished, at: 17) } else { try task.bindNull(at: 17) }
            try task.step()
            try insertEvents(
                taskID: id, rootID: rootID, status: status, at: createdAt + Int64(node), statement: event)
        }
    }

    private func insertEvents(
        taskID: String, rootID: String, status: TaskStatus, at start: Int64, statement: SQLiteStatement
    ) throws {
        for index in 0..<eventsPerTask {
            let kind: TaskEvent.Kind
            var message: String?
            var progress: Double?
            switch index {
            case 0: kind = .created
            case 1: kind = .started
            case eventsPerTask - 1 where status.isFinished:
                kind = status == .completed ? .completed : (status == .failed ? .failed : .cancelled)
            case let index where index % 3 == 2:
                kind = .step
                message = "phase \(index / 3 + 1)"
            default:
                kind = .progress
                progress = Double(index) / Double(eventsPerTask)
            }
            statement.reset()
            try statement.bind(taskID, at: 1)
            try statement.bind(rootID, at: 2)
            try statement.bind(kind.rawValue, at: 3)
            try statement.bind(start + Int64(index) * 40, at: 4)
            if let progress { try statement.bind(progress, at: 5) } else { try statement.bindNull(at: 5) }
            if let message { try statement.bind(message, at: 6) } else { try statement.bindNull(at: 6) }
            if kind == .failed { try statement.bind("Bench.Failure", at: 7) } else { try statement.bindNull(at: 7) }
            try statement.step()
        }
    }

    /// A UUID-shaped id that sorts by root, then node.
    static func id(root: Int, node: Int) -> String {
        hex(root, digits: 8) + "-" + hex(node, digits: 4) + "-4000-8000-" + hex(root &* 2_654_435_761 % 0xFFFF_FFFF, digits: 12)
    }

    private static func hex(_ value: Int, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
