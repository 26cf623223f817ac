import Foundation
import Progression

/// JSON output: one document on stdout, keys sorted, times in ISO 8601.
enum JSONOutput {
    static func print<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        let data = try encoder.encode(value)
        Terminal.output(String(decoding: data, as: UTF8.self))
    }
}

/// A task as `--json` shows it. Field names are stable; absent values are `null`.
struct TaskJSON: Codable, Equatable {
    var id: String
    var parentID: String?
    var rootID: String
    var name: String
    var kind: String?
    var status: String
    var progress: Double?
    var step: String?
    var attempt: Int
    var interruptions: Int
    var priority: Int
    var errorType: String?
    var errorDescription: String?
    var ownerID: String?
    var canCancel: Bool
    var canPause: Bool
    var canRetry: Bool
    var checkpointBytes: Int
    /// How deep in the tree shown (0 for the node asked for); only in `show`.
    var depth: Int?
    var createdAt: Date
    var startedAt: Date?
    var updatedAt: Date
    var finishedAt: Date?
    var nextAttemptAt: Date?

    init(_ record: TaskRecord, depth: Int? = nil) {
        id = record.id
        parentID = record.parentID
        rootID = record.rootID
        name = record.name
        kind = record.kind
        status = record.status.rawValue
        progress = record.progress
        step = record.step
        attempt = record.attempt
        interruptions = record.interruptions
        priority = record.priority
        errorType = record.errorType
        errorDescription = record.errorDescription
        ownerID = record.ownerID
        canCancel = record.options.canCancel
        canPause = record.options.canPause
        canRetry = record.options.canRetry
        checkpointBytes = record.checkpoint?.count ?? 0
        self.depth = depth
        createdAt = record.createdAt
        startedAt = record.startedAt
        updatedAt = record.updatedAt
        finishedAt = record.finishedAt
        nextAttemptAt = record.nextAttemptAt
    }

    enum CodingKeys: String, CodingKey {
        case id, parentID, rootID, name, kind, status, progress, step, attempt, interruptions, priority, errorType,
            errorDescription, ownerID, canCancel, canPause, canRetry, checkpointBytes, depth, createdAt, startedAt,
            updatedAt, finishedAt, nextAttemptAt
    }

    /// Writes `null` for absent values, so every document has the same fields.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(parentID, forKey: .parentID)
        try container.encode(rootID, forKey: .rootID)
        try container.encode(name, forKey: .name)
        try container.encode(kind, forKey: .kind)
        try container.encode(status, forKey: .status)
        try container.encode(progress, forKey: .progress)
        try container.encode(step, forKey: .step)
        try container.encode(attempt, forKey: .attempt)
        try container.encode(interruptions, forKey: .interruptions)
        try container.encode(priority, forKey: .priority)
        try container.encode(errorType, forKey: .errorType)
        try container.encode(errorDescription, forKey: .errorDescription)
        try container.encode(ownerID, forKey: .ownerID)
        try container.encode(canCancel, forKey: .canCancel)
        try container.encode(canPause, forKey: .canPause)
        try container.encode(canRetry, forKey: .canRetry)
        try container.encode(checkpointBytes, forKey: .checkpointBytes)
        try container.encodeIfPresent(depth, forKey: .depth)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(startedAt, forKey: .startedAt)
        try container.encode(updatedAt, forKey: .updatedAt)
        try container.encode(finishedAt, forKey: .finishedAt)
        try container.encode(nextAttemptAt, forKey: .nextAttemptAt)
    }
}
