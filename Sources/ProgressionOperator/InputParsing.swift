import Foundation
import Progression

/// Parsing the values of options: statuses, durations, dates.
package enum InputParsing {
    /// Statuses from repeated `--status` options, each possibly a comma list; `nil` when none is given.
    ///
    /// - Throws: ``CLIError`` naming the first value that is not a status.
    package static func statuses(_ values: [String]) throws -> Set<TaskStatus>? {
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

    /// The longest duration accepted, 100 years: longer ones reach back before any task was made, and far enough
    /// ones before any date a computer can count.
    package static let maximumDays = 36_500

    /// Seconds in a duration like `90s`, `30m`, `12h`, `7d`, `2w` (a plain number is seconds), at most
    /// ``maximumDays``.
    ///
    /// - Throws: ``CLIError`` (a usage error) for a value that is not such a duration, or is longer.
    package static func seconds(_ text: String, option: String) throws -> TimeInterval {
        guard let seconds = try duration(text, option: option) else {
            throw CLIError.usage("invalid duration '\(text)' for \(option) (expected e.g. 30m, 12h, 7d)")
        }
        return seconds
    }

    /// Seconds in `text` when it is a duration, `nil` when it is not one.
    ///
    /// - Throws: ``CLIError`` (a usage error) for a duration longer than ``maximumDays``.
    private static func duration(_ text: String, option: String) throws -> TimeInterval? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604_800]
        var number = Substring(trimmed)
        var factor = 1.0
        if let last = trimmed.last, let unit = units[last] {
            number = trimmed.dropLast()
            factor = unit
        }
        guard let value = Double(number), value.isFinite, value >= 0 else { return nil }
        let seconds = value * factor
        guard seconds <= Double(maximumDays) * 86_400 else {
            throw CLIError.usage(
                "duration '\(text)' for \(option) is too long (at most \(maximumDays)d, 100 years)")
        }
        return seconds
    }

    /// A point in time: `now - duration` for a duration (`12h`), else an ISO-8601 date or date-time.
    package static func since(_ text: String, option: String, now: Date = Date()) throws -> Date {
        if let seconds = try duration(text, option: option) { return now.addingTimeInterval(-seconds) }
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

    /// A point in time to come: an ISO-8601 date-time (`2026-11-26T03:00:00Z`, with an offset or fractional seconds),
    /// or a local one (`2026-11-26 03:00`, `2026-11-26T03:00:00`).
    ///
    /// - Throws: ``CLIError`` (a usage error) for anything else, or a time past the year 9999.
    package static func at(_ text: String, option: String) throws -> Date {
        let full = ISO8601DateFormatter()
        var date = full.date(from: text)
        if date == nil {
            full.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            date = full.date(from: text)
        }
        if date == nil {
            let local = DateFormatter()
            local.locale = Locale(identifier: "en_US_POSIX")
            for format in ["yyyy-MM-dd HH:mm", "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd'T'HH:mm:ss"] {
                local.dateFormat = format
                if let parsed = local.date(from: text) {
                    date = parsed
                    break
                }
            }
        }
        guard let date else {
            throw CLIError.usage(
                "invalid time '\(text)' for \(option) (expected e.g. 2026-11-26T03:00:00Z or 2026-11-26 03:00 local time)")
        }
        guard date <= JobOptions.latestRunAt else {
            throw CLIError.usage("the time '\(text)' for \(option) is past the year 9999")
        }
        return date
    }
}
