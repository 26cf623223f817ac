import Foundation

/// Where tasks live, as a library user reads them: tasks, trees, history and statistics.
///
/// ``SQLiteTaskStore`` (durable, the default) and ``InMemoryTaskStore`` (for tests and for work that need not survive
/// the process) implement it, and `PostgresTaskStore` in the `ProgressionPostgres` product for executors on several
/// hosts. All pass one contract suite. What the executor writes goes through the package's own write side; a store is
/// opened by its initializer and handed to ``TaskExecutor/init(store:configuration:)-(SQLiteTaskStore,_)`` (or its
/// in-memory and PostgreSQL siblings). A `TaskStore` of your own can be read the same way, but an executor or a job
/// client refuses it (``ProgressionError/unsupportedStore(_:)``).
///
/// ```swift
/// let store = try SQLiteTaskStore(path: "/var/lib/myservice/tasks.sqlite")
/// for root in try await store.roots(TaskQuery(statuses: [.failed], limit: 20)) {
///     print(root.id, root.name, root.errorDescription ?? "")
/// }
/// ```
public protocol TaskStore: Sendable {
    /// One task, or `nil`.
    func task(id: String) async throws -> TaskRecord?

    /// The task and every node below it, parents before children, siblings in creation order.
    func tree(of id: String) async throws -> [TaskRecord]

    /// Roots matching `query`, in its order.
    func roots(_ query: TaskQuery) async throws -> [TaskRecord]

    /// How many roots match `query` (its limit and offset ignored), counting at most `bound` of them when given: a
    /// result equal to `bound` means "that many or more". A bounded count costs at most `bound` index entries, where
    /// an exact one of a million roots reads a million.
    func countRoots(_ query: TaskQuery, upTo bound: Int?) async throws -> Int

    /// History matching `query`, oldest first.
    func events(_ query: EventQuery) async throws -> [TaskEvent]

    /// The root whose kind and idempotency key are these, if any.
    func root(kind: String, idempotencyKey: String) async throws -> TaskRecord?

    /// Ids of roots (or, with `rootsOnly` false, of any task) that begin with `prefix`, at most `limit`, in order.
    func taskIDs(withPrefix prefix: String, rootsOnly: Bool, limit: Int) async throws -> [String]

    /// Counts of roots by status and kind, and the oldest pending root.
    func statistics() async throws -> TaskStoreStatistics

    /// How many failed subtasks each of these roots has (a root that completed with failed steps); roots without any
    /// are left out.
    func failedSteps(ofRoots ids: [String]) async throws -> [String: Int]
}

extension TaskStore {
    /// How many roots match `query` (its limit and offset ignored).
    public func countRoots(_ query: TaskQuery) async throws -> Int {
        try await countRoots(query, upTo: nil)
    }

    /// The history of a task and the nodes below it, oldest first: `limit` events after `sequence`.
    public func events(of id: String, after sequence: Int64? = nil, limit: Int = 1000) async throws -> [TaskEvent] {
        try await events(EventQuery(taskID: id, after: sequence, limit: limit))
    }

    /// Ids of any task (root or subtask) that begin with `prefix`.
    public func taskIDs(withPrefix prefix: String, limit: Int) async throws -> [String] {
        try await taskIDs(withPrefix: prefix, rootsOnly: false, limit: limit)
    }
}

/// Which roots to list, and in which order.
public struct TaskQuery: Sendable, Hashable {
    /// The order of a listing.
    public enum Sort: String, Sendable, Hashable, CaseIterable, Codable {
        /// Newest first.
        case created
        /// Most recently changed first.
        case updated
        /// Furthest along first.
        case progress
    }

    /// Only these statuses (`nil`: any).
    public var statuses: Set<TaskStatus>?
    /// Only jobs of this kind.
    public var kind: String?
    /// Roots created at or after this date.
    public var createdSince: Date?
    /// Roots created before this date.
    public var createdUntil: Date?
    /// Roots whose name contains this text (case-insensitive for ASCII letters).
    public var nameContains: String?
    /// Roots whose input (the JSON bytes stored for a job) contains this text's UTF-8 bytes, exactly (case
    /// included): `"file":"a.csv"` or just `a.csv`.
    public var inputContains: String?
    /// Roots whose JSON input has these values (every filter must match).
    public var input: [InputFilter]
    /// The order; `reverse` turns it around (oldest, least recently changed, least advanced first).
    public var sort: Sort
    /// Turns the order around.
    public var reverse: Bool
    /// At most this many (0 or more).
    public var limit: Int
    /// Skip this many first.
    public var offset: Int

    /// A query; by default every root, newest first, 50 at a time.
    public init(
        statuses: Set<TaskStatus>? = nil, kind: String? = nil, createdSince: Date? = nil, createdUntil: Date? = nil,
        nameContains: String? = nil, inputContains: String? = nil, input: [InputFilter] = [], sort: Sort = .created,
        reverse: Bool = false,
        limit: Int = 50, offset: Int = 0
    ) {
        self.input = input
        self.statuses = statuses
        self.kind = kind
        self.createdSince = createdSince
        self.createdUntil = createdUntil
        self.nameContains = nameContains
        self.inputContains = inputContains
        self.sort = sort
        self.reverse = reverse
        self.limit = limit
        self.offset = offset
    }

    /// Whether `record` (a root) matches the filters (not the limit and offset).
    public func matches(_ record: TaskRecord) -> Bool {
        guard record.isRoot else { return false }
        if let statuses, !statuses.contains(record.status) { return false }
        if let kind, record.kind != kind { return false }
        if let createdSince, record.createdAt.storedMilliseconds < createdSince.storedMilliseconds { return false }
        if let createdUntil, record.createdAt.storedMilliseconds >= createdUntil.storedMilliseconds { return false }
        if let nameContains, !nameContains.isEmpty, !record.name.asciiLowercased.contains(nameContains.asciiLowercased) {
            return false
        }
        if let inputContains, !inputContains.isEmpty {
            guard let input = record.input, input.range(of: Data(inputContains.utf8)) != nil else { return false }
        }
        if !input.isEmpty {
            guard let data = record.input else { return false }
            return input.allSatisfy { $0.matches(input: data) }
        }
        return true
    }
}

/// A condition on a job's JSON input: the value at a key path equals a text.
///
/// ```swift
/// let filter = try InputFilter("customer.id=42")     // {"customer": {"id": 42}} matches
/// try await store.roots(TaskQuery(input: [filter]))
/// ```
///
/// A string matches its text, a number its JSON text (`42`, `1.5`), a boolean `true` or `false`, `null` the text
/// `null`; an object or an array matches nothing.
public struct InputFilter: Sendable, Hashable, CustomStringConvertible {
    /// The keys from the input's top level down.
    public let path: [String]
    /// The text the value must read as.
    public let value: String

    /// A filter on the value at `path` (keys separated by dots: letters, digits, `_` and `-`).
    ///
    /// - Throws: ``InvalidInputFilterError`` for an empty path or a key with other characters.
    public init(path: String, equals value: String) throws(InvalidInputFilterError) {
        let keys = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard !path.isEmpty,
            keys.allSatisfy({ key in
                !key.isEmpty && key.utf8.allSatisfy { byte in
                    (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122)
                        || byte == 95 || byte == 45
                }
            })
        else {
            throw InvalidInputFilterError(
                text: "\(path)=\(value)",
                reason: "the key path '\(path)' must be keys of letters, digits, '_' and '-' separated by dots")
        }
        self.path = keys
        self.value = value
    }

    /// A filter written `path=value`.
    ///
    /// - Throws: ``InvalidInputFilterError`` without a `=`, or for a bad key path.
    public init(_ text: String) throws(InvalidInputFilterError) {
        guard let equals = text.firstIndex(of: "=") else {
            throw InvalidInputFilterError(text: text, reason: "write it as key=value (or a.b=value for a nested key)")
        }
        try self.init(path: String(text[..<equals]), equals: String(text[text.index(after: equals)...]))
    }

    public var description: String { path.joined(separator: ".") + "=" + value }

    /// Whether a job's input (JSON) matches.
    func matches(input data: Data) -> Bool {
        guard var current = try? JSONDecoder().decode(FilterJSON.self, from: data) else { return false }
        for key in path {
            guard case .object(let object) = current, let next = object[key] else { return false }
            current = next
        }
        switch current {
        case .text(let text): return text == value
        case .integer(let number): return String(number) == value
        case .real(let number): return String(number) == value
        case .boolean(let flag): return value == (flag ? "true" : "false")
        case .null: return value == "null"
        case .object, .array: return false
        }
    }
}

/// A JSON value, as an input filter reads it.
private enum FilterJSON: Decodable {
    case text(String), integer(Int64), real(Double), boolean(Bool), null
    case object([String: FilterJSON]), array([FilterJSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .boolean(flag)
        } else if let number = try? container.decode(Int64.self) {
            self = .integer(number)
        } else if let number = try? container.decode(Double.self) {
            self = .real(number)
        } else if let text = try? container.decode(String.self) {
            self = .text(text)
        } else if let object = try? container.decode([String: FilterJSON].self) {
            self = .object(object)
        } else {
            self = .array(try container.decode([FilterJSON].self))
        }
    }
}

/// An input filter that cannot be used.
public struct InvalidInputFilterError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    /// The filter as given.
    public var text: String
    /// Why it cannot be used.
    public var reason: String

    public var errorDescription: String? { description }
    public var description: String { "invalid input filter '\(text)': \(reason)" }
}

/// Which history to read.
public struct EventQuery: Sendable, Hashable {
    /// The task whose history (with the nodes below it) is read.
    public var taskID: String
    /// Only events stored after this sequence number.
    public var after: Int64?
    /// Only events at or after this date.
    public var since: Date?
    /// Only events of these kinds.
    public var kinds: Set<TaskEvent.Kind>?
    /// At most this many.
    public var limit: Int
    /// The last `limit` events instead of the first (still returned oldest first).
    public var tail: Bool

    /// The history of `taskID` and the nodes below it; by default its first 1,000 events.
    public init(
        taskID: String, after: Int64? = nil, since: Date? = nil, kinds: Set<TaskEvent.Kind>? = nil, limit: Int = 1000,
        tail: Bool = false
    ) {
        self.taskID = taskID
        self.after = after
        self.since = since
        self.kinds = kinds
        self.limit = limit
        self.tail = tail
    }

    /// Whether `event` matches the filters (not the task, limit or tail).
    public func matches(_ event: TaskEvent) -> Bool {
        if let after, let sequence = event.sequence, sequence <= after { return false }
        if let since, event.at.storedMilliseconds < since.storedMilliseconds { return false }
        if let kinds, !kinds.contains(event.kind) { return false }
        return true
    }
}

/// Counts for `progressctl stats`.
public struct TaskStoreStatistics: Sendable, Hashable, Codable {
    /// Roots by status.
    public var rootsByStatus: [String: Int]
    /// Roots by job kind (`""` for closure tasks).
    public var rootsByKind: [String: Int]
    /// When the oldest pending root was submitted; `nil` when none is pending.
    public var oldestPendingCreatedAt: Date?
    /// Events in the history.
    public var events: Int
    /// Size of the database in bytes (0 for the in-memory store).
    public var databaseBytes: Int64
    /// Completed roots that have failed subtasks (a partial failure).
    public var completedWithFailedSteps: Int
    /// Pending roots by job kind (`""` for closure tasks): what waits to run, for `doctor`.
    public var pendingByKind: [String: Int]

    /// Counts as given.
    public init(
        rootsByStatus: [String: Int] = [:], rootsByKind: [String: Int] = [:], oldestPendingCreatedAt: Date? = nil,
        events: Int = 0, databaseBytes: Int64 = 0, completedWithFailedSteps: Int = 0, pendingByKind: [String: Int] = [:]
    ) {
        self.completedWithFailedSteps = completedWithFailedSteps
        self.pendingByKind = pendingByKind
        self.rootsByStatus = rootsByStatus
        self.rootsByKind = rootsByKind
        self.oldestPendingCreatedAt = oldestPendingCreatedAt
        self.events = events
        self.databaseBytes = databaseBytes
    }

    /// Encodes every field, `null` when absent.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(rootsByStatus, forKey: .rootsByStatus)
        try container.encode(rootsByKind, forKey: .rootsByKind)
        // `null` when absent, not a missing key.
        try container.encode(oldestPendingCreatedAt, forKey: .oldestPendingCreatedAt)
        try container.encode(events, forKey: .events)
        try container.encode(databaseBytes, forKey: .databaseBytes)
        try container.encode(completedWithFailedSteps, forKey: .completedWithFailedSteps)
        try container.encode(pendingByKind, forKey: .pendingByKind)
    }
}

extension String {
    /// The text with ASCII letters lowercased (what SQLite's `lower()` and `LIKE` fold).
    package var asciiLowercased: String {
        String(decoding: utf8.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }, as: UTF8.self)
    }
}
