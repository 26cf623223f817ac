import Foundation
import Progression

/// JSON documents (progressctl's `--json`, the console's API): keys sorted, times in ISO 8601 with milliseconds, `null` for absent values.
package enum JSONOutput {
    /// Times as `2026-11-21T08:17:55.123Z`: UTC, to the millisecond the store keeps.
    package static let dateEncodingStrategy = JSONEncoder.DateEncodingStrategy.custom { date, encoder in
        var container = encoder.singleValueContainer()
        try container.encode(date.formatted(timeFormat))
    }

    private static let timeFormat = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// The encoder of every `--json` document.
    package static func encoder(pretty: Bool = true) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = dateEncodingStrategy
        return encoder
    }

    /// `value` as one pretty-printed document; empty arrays and objects as `[]` and `{}`.
    package static func text<T: Encodable>(_ value: T) throws -> String {
        let text = String(decoding: try encoder().encode(value), as: UTF8.self)
        // The encoder writes an empty container over three lines. A raw newline is never inside a JSON string.
        return text.replacing(/\[\n\s*\n\s*\]/, with: "[]").replacing(/\{\n\s*\n\s*\}/, with: "{}")
    }
}

/// An optional value that a `--json` document writes as `null` when absent, never leaving its key out (what the
/// synthesized `Encodable` does with a plain optional).
///
/// ```swift
/// struct Report: Encodable { @Null var finishedAt: Date? }   // {"finishedAt": null}
/// ```
@propertyWrapper
package struct Null<Value> {
    package var wrappedValue: Value?

    package init(wrappedValue: Value?) {
        self.wrappedValue = wrappedValue
    }
}

extension Null: Encodable where Value: Encodable {
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue {
            try container.encode(wrappedValue)
        } else {
            try container.encodeNil()
        }
    }
}

extension Null: Equatable where Value: Equatable {}
extension Null: Sendable where Value: Sendable {}

/// Any JSON value: a job's input or result shown as JSON inside a `--json` document, and pretty-printed by `show`.
package enum JSONValue: Codable, Equatable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The JSON in `data`, or `nil` when it is not JSON.
    package init?(data: Data) {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: data) else { return nil }
        self = value
    }

    /// Stored bytes as `--json` shows them: their JSON, or, for bytes that are not JSON (the library stores JSON,
    /// so only another writer's), a string `base64:…`; `nil` for none.
    package static func stored(_ data: Data?) -> JSONValue? {
        guard let data else { return nil }
        return JSONValue(data: data) ?? .string("base64:" + data.base64EncodedString())
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// Indented JSON with sorted keys, for people (`show`): two spaces a level, `"key": value`, empty objects and
    /// arrays as `{}` and `[]`.
    package var prettyText: String {
        prettyText(indent: "")
    }

    private func prettyText(indent: String) -> String {
        let inner = indent + "  "
        switch self {
        case .array(let values) where !values.isEmpty:
            return "[\n" + values.map { inner + $0.prettyText(indent: inner) }.joined(separator: ",\n") + "\n\(indent)]"
        case .object(let members) where !members.isEmpty:
            let lines = members.sorted { $0.key < $1.key }.map { key, value in
                inner + JSONValue.string(key).compactText + ": " + value.prettyText(indent: inner)
            }
            return "{\n" + lines.joined(separator: ",\n") + "\n\(indent)}"
        default:
            return compactText
        }
    }

    /// Compact JSON with sorted keys.
    package var compactText: String {
        String(decoding: compactData, as: UTF8.self)
    }

    /// Compact JSON with sorted keys, as stored (`submit --from`).
    package var compactData: Data {
        (try? JSONOutput.encoder(pretty: false).encode(self)) ?? Data("null".utf8)
    }
}

/// A task as `--json` shows it. Field names are stable; absent values are `null`.
package struct TaskJSON: Encodable, Equatable, Sendable {
    package var id: String
    package var parentID: String?
    package var rootID: String
    package var name: String
    package var kind: String?
    package var status: String
    /// The status as people read it: `scheduled`, `retrying`, `sleeping` or `waiting` for a pending root that waits
    /// (``TaskRecord/waitReason``), else the status.
    package var state: String
    /// Failed subtasks of a root (a job that completed with failed steps); 0 for a subtask.
    package var failedSteps: Int
    package var progress: Double?
    /// The units of work the task declared (`TaskProgress.total`), or `null`.
    package var total: Double?
    /// The smoothed rate of a running task: a fraction of the whole per second.
    package var rate: Double?
    /// Seconds until a running task is done at its rate.
    package var secondsRemaining: Double?
    package var step: String?
    package var attempt: Int
    package var interruptions: Int
    package var priority: Int
    package var errorType: String?
    package var errorDescription: String?
    package var ownerID: String?
    package var canCancel: Bool
    package var canPause: Bool
    package var canRetry: Bool
    package var checkpointBytes: Int
    /// The job's input and result as JSON (see ``JSONValue/stored(_:)``).
    package var input: JSONValue?
    package var result: JSONValue?
    package var idempotencyKey: String?
    /// How deep in the tree shown (0 for the node asked for); `null` outside `show`.
    package var depth: Int?
    package var createdAt: Date
    package var startedAt: Date?
    package var updatedAt: Date
    package var finishedAt: Date?
    package var nextAttemptAt: Date?
    /// On a child job: the job that started it.
    package var parentJobID: String?
    /// On a link (the node of a parent's tree that stands for a child job): that child job's id.
    package var childJobID: String?
    /// What a waiting job waits for, for people (`3 child jobs`, `job 3xjggyz2`, `the signal 'approve'`).
    package var waitingFor: String?
    /// Seconds a running job past its stall limit has not moved (its `state` is then `stalled`); `null` otherwise.
    package var stalledSeconds: Double?
    /// The version of its kind's code the job began under (``JobVersion``); `null` when it recorded none.
    package var version: String?

    package init(_ record: TaskRecord, depth: Int? = nil, failedSteps: Int = 0) {
        let now = Date()
        state = record.displayStatus(at: now)
        self.failedSteps = failedSteps
        id = record.id
        parentID = record.parentID
        rootID = record.rootID
        name = record.name
        kind = record.kind
        status = record.status.rawValue
        progress = record.progress
        total = record.total
        let rates = ProgressRates()
        rate = rates.rate(of: record)
        secondsRemaining = rates.timeLeft(of: record).map { ($0 * 1000).rounded() / 1000 }
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
        input = JSONValue.stored(record.input)
        result = JSONValue.stored(record.result)
        idempotencyKey = record.idempotencyKey
        self.depth = depth
        createdAt = record.createdAt
        startedAt = record.startedAt
        updatedAt = record.updatedAt
        finishedAt = record.finishedAt
        // A job that waits until released (not until a time) has no next attempt to show.
        nextAttemptAt = record.nextAttemptAt.flatMap {
            record.waitReason == .waiting && $0 >= JobOptions.latestRunAt ? nil : $0
        }
        parentJobID = record.parentJobID
        childJobID = record.childJobID
        waitingFor = record.waitReason == .waiting ? record.waitingFor : nil
        stalledSeconds = record.stalledFor(at: now).map { $0.seconds }
        version = record.version
    }

    enum CodingKeys: String, CodingKey {
        case id, parentID, rootID, name, kind, status, state, failedSteps, progress, total, rate, secondsRemaining, step, attempt, interruptions, priority, errorType,
            errorDescription, ownerID, canCancel, canPause, canRetry, checkpointBytes, input, result, idempotencyKey,
            depth, createdAt, startedAt, updatedAt, finishedAt, nextAttemptAt, parentJobID, childJobID, waitingFor,
            stalledSeconds, version
    }

    /// Writes `null` for absent values, so every document has the same fields.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(parentID, forKey: .parentID)
        try container.encode(rootID, forKey: .rootID)
        try container.encode(name, forKey: .name)
        try container.encode(kind, forKey: .kind)
        try container.encode(status, forKey: .status)
        try container.encode(state, forKey: .state)
        try container.encode(failedSteps, forKey: .failedSteps)
        try container.encode(progress, forKey: .progress)
        try container.encode(total, forKey: .total)
        try container.encode(rate, forKey: .rate)
        try container.encode(secondsRemaining, forKey: .secondsRemaining)
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
        try container.encode(input, forKey: .input)
        try container.encode(result, forKey: .result)
        try container.encode(idempotencyKey, forKey: .idempotencyKey)
        try container.encode(depth, forKey: .depth)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(startedAt, forKey: .startedAt)
        try container.encode(updatedAt, forKey: .updatedAt)
        try container.encode(finishedAt, forKey: .finishedAt)
        try container.encode(nextAttemptAt, forKey: .nextAttemptAt)
        try container.encode(parentJobID, forKey: .parentJobID)
        try container.encode(childJobID, forKey: .childJobID)
        try container.encode(waitingFor, forKey: .waitingFor)
        try container.encode(stalledSeconds, forKey: .stalledSeconds)
        try container.encode(version, forKey: .version)
    }
}
