import Foundation
import Progression

/// Parsing the values of options: statuses, durations, dates.
enum InputParsing {
    /// Statuses from repeated `--status` options, each possibly a comma list; `nil` when none is given.
    ///
    /// - Throws: ``CLIError`` naming the first value that is not a status.
    static func statuses(_ values: [String]) throws -> Set<TaskStatus>? {
        let names = values.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard !names.isEmpty else { return values.isEmpty ? nil : [] }
        var statuses = Set<TaskStatus>()
        for name in names {
            guard let status = TaskStatus(rawValue: name.lowercased()) else {
                throw CLIError.usage(
                    "invalid status '\(name)' (expected one of: \(TaskStatus.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            statuses.insert(status)
        }
        return statuses
    }

    /// Seconds in a duration like `90s`, `30m`, `12h`, `7d`, `2w` (a plain number is seconds).
    static func seconds(_ text: String, option: String) throws -> TimeInterval {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604_800]
        var number = Substring(trimmed)
        var factor = 1.0
        if let last = trimmed.last, let unit = units[last] {
            number = trimmed.dropLast()
            factor = unit
        }
        guard let value = Double(number), value.isFinite, value >= 0 else {
            throw CLIError.usage("invalid duration '\(text)' for \(option) (expected e.g. 30m, 12h, 7d)")
        }
        return value * factor
    }

    /// A point in time: `now - duration` for a duration (`12h`), else an ISO-8601 date or date-time.
    static func since(_ text: String, option: String, now: Date = Date()) throws -> Date {
        if let seconds = try? seconds(text, option: option) { return now.addingTimeInterval(-seconds) }
        let full = ISO8601DateFormatter()
        if let date = full.date(from: text) { return date }
        full.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = full.date(from: text) { return date }
        let day = DateFormatter()
        day.locale = Locale(identifier: "en_US_POSIX")
        day.dateFormat = "yyyy-MM-dd"
        if let date = day.date(from: text) { return date }
        day.dateFormat = "yyyy-MM-dd'T'HH:mm:ss"
        if let date = day.date(from: text) { return date }
        throw CLIError.usage(
            "invalid value '\(text)' for \(option) (expected a duration like 30m, 12h, 7d, or an ISO-8601 date)")
    }
}
