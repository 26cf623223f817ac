import Foundation
import Progression
import ProgressionTestSupport

/// A database file filled through the public store API.
struct Fixture {
    let directory: TemporaryDirectory
    let path: String
    let store: SQLiteTaskStore
    let start = Date(timeIntervalSince1970: 1_780_000_000)

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.file("tasks.sqlite")
        store = try SQLiteTaskStore(path: path)
    }

    /// A root job (or closure task when `kind` is nil), with a `created` event.
    @discardableResult
    func root(
        _ id: String, name: String? = nil, kind: String? = "import", status: TaskStatus = .pending,
        options: TaskOptions = .default, progress: Double? = nil, step: String? = nil, owner: String? = nil,
        attempt: Int = 1, error: (String, String)? = nil, createdAt: Date? = nil, finishedAt: Date? = nil
    ) async throws -> TaskRecord {
        let created = createdAt ?? start
        let record = TaskRecord(
            id: id, name: name ?? "task \(id)", kind: kind, input: kind == nil ? nil : Data("{}".utf8),
            options: options, status: status, progress: progress, step: step, attempt: attempt,
            errorType: error?.0, errorDescription: error?.1, ownerID: owner, createdAt: created,
            startedAt: status == .pending ? nil : created,
            finishedAt: status.isFinished ? (finishedAt ?? created.addingTimeInterval(60)) : nil)
        var events = [TaskEvent(taskID: id, rootID: id, kind: .created, at: created, attempt: 1)]
        if status == .failed {
            events.append(TaskEvent(taskID: id, rootID: id, kind: .failed, at: created.addingTimeInterval(60),
                                    attempt: attempt, progress: progress, message: error?.1, errorType: error?.0))
        }
        try await store.insert([record], events: events)
        return record
    }

    /// A child of `parent`.
    @discardableResult
    func child(
        _ id: String, of parent: TaskRecord, name: String, status: TaskStatus = .running, progress: Double? = nil,
        checkpoint: Data? = nil
    ) async throws -> TaskRecord {
        let record = TaskRecord(
            id: id, parentID: parent.id, rootID: parent.rootID, name: name, status: status, progress: progress,
            checkpoint: checkpoint, ownerID: parent.ownerID, createdAt: start.addingTimeInterval(1),
            startedAt: start.addingTimeInterval(1), finishedAt: status.isFinished ? start.addingTimeInterval(2) : nil)
        try await store.insert(
            [record],
            events: [TaskEvent(taskID: id, rootID: parent.rootID, kind: .started, at: start.addingTimeInterval(1), attempt: 1)])
        return record
    }

    /// Registers an owner; `alive` uses this test process's pid and host.
    func owner(_ id: String, alive: Bool) async throws {
        let now = Date()
        try await store.saveOwner(
            OwnerRecord(
                id: id, host: OwnerRecord.currentHost, pid: alive ? getpid() : 2_147_483_000,
                startedAt: alive ? now.addingTimeInterval(-1) : now.addingTimeInterval(-3600),
                heartbeatAt: alive ? now : now.addingTimeInterval(-3600)))
    }

    /// The file's bytes (main file and WAL), to show that a command changed nothing. A WAL file that opening the
    /// database created empty counts as none.
    func bytes() -> [Data] {
        [path, path + "-wal"].map { FileManager.default.contents(atPath: $0) ?? Data() }
    }

    /// Runs progressctl with `--db` this file (and `environment` added to this process's, `input` on stdin).
    func run(
        _ arguments: [String], environment: [String: String] = [:], input: Data? = nil,
        timeout: Duration = .seconds(60)
    ) async throws -> ChildProcess.Outcome {
        try await CLI.run(
            ["--db", path] + arguments, in: directory, environment: environment, input: input, timeout: timeout)
    }
}

/// Decodes `--json` output. Its times must be ISO 8601 with milliseconds (`2026-11-21T08:17:55.123Z`).
func decodeJSON<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .custom { decoder in
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(text)' is not an ISO 8601 time with milliseconds")
        }
        return date
    }
    return try decoder.decode(type, from: Data(text.utf8))
}

/// The top-level object of a `--json` document, or each object of an array, as key-value pairs (to check that a
/// key is present with `null`, which a `Decodable` cannot tell from a missing one).
func jsonObjects(_ text: String) throws -> [[String: Any]] {
    let value = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    if let object = value as? [String: Any] { return [object] }
    return (value as? [[String: Any]]) ?? []
}

extension Dictionary where Key == String, Value == Any {
    /// Whether `key` is present with JSON `null`.
    func isNull(_ key: String) -> Bool { self[key].map { $0 is NSNull } ?? false }
}

extension Fixture {
    /// Writes a task's progress and step as an executor's writer would (the other columns as they are).
    func report(_ id: String, _ progress: Double, step: String? = nil, rate: Double? = nil) async throws {
        guard var record = try await store.task(id: id) else { return }
        record.progress = progress
        record.step = step
        record.rate = rate
        record.updatedAt = Date()
        _ = try await store.apply(
            TaskBatch(updates: [TaskUpdate(record, columns: [.progress, .step, .rate, .updatedAt])]))
    }
}
