import Foundation

/// A cron expression: five fields (minute, hour, day of month, month, day of week) or a macro, and the times it fires
/// in a time zone.
///
/// ```swift
/// let nightly = try CronExpression("30 3 * * *")               // 03:30 every day
/// let quarterHours = try CronExpression("*/15 9-17 * * MON-FRI")
/// let next = nightly.nextFire(after: .now, in: TimeZone(identifier: "Europe/Berlin")!)
/// ```
///
/// The syntax is Vixie cron's (the `cron` of Debian): a field is `*`, a number, a range `a-b`, a step `*/n`, `a-b/n` or
/// `a/n` (from `a` to the field's end), or a list of those separated by commas; months and days of the week may be
/// named (`JAN`–`DEC`, `SUN`–`SAT`, any case); Sunday is 0 or 7. The macros `@yearly` (`@annually`), `@monthly`,
/// `@weekly`, `@daily` (`@midnight`) and `@hourly` stand for their usual five fields. When both the day of the month
/// and the day of the week are restricted (neither starts with `*`), a day matches when either does, as in cron.
///
/// Daylight saving time is handled as cron does: a job at a fixed time (neither its minute nor its hour field starts
/// with `*`) whose time is skipped when the clocks go forward runs once at the change, and one whose time occurs twice
/// when they go back runs once, at the first; a job with `*` in its minute or hour field runs at the times that exist,
/// each real time once.
public struct CronExpression: Sendable, Hashable, CustomStringConvertible {
    /// The fields of an expression, as errors name them.
    public enum Field: String, Sendable, Hashable, CaseIterable {
        case minute
        case hour
        case dayOfMonth = "day of month"
        case month
        case dayOfWeek = "day of week"

        var range: ClosedRange<Int> {
            switch self {
            case .minute: 0...59
            case .hour: 0...23
            case .dayOfMonth: 1...31
            case .month: 1...12
            case .dayOfWeek: 0...7
            }
        }

        var names: [String] {
            switch self {
            case .month: ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
            case .dayOfWeek: ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
            default: []
            }
        }

        /// The value of a name (`JAN` is 1, `SUN` is 0).
        func value(ofName name: String) -> Int? {
            guard let index = names.firstIndex(of: name.uppercased()) else { return nil }
            return self == .month ? index + 1 : index
        }
    }

    /// The expression as written.
    public let source: String
    private let minutes: UInt64
    private let hours: UInt32
    private let daysOfMonth: UInt32
    private let months: UInt16
    /// Sunday is bit 0 (a 7 in the expression sets it too).
    private let daysOfWeek: UInt8
    private let dayOfMonthRestricted: Bool
    private let dayOfWeekRestricted: Bool
    /// Neither the minute nor the hour field starts with `*`: daylight saving time moves the job rather than skipping
    /// or doubling it.
    private let fixedTime: Bool

    /// Parses an expression.
    ///
    /// - Throws: ``CronExpressionError`` naming the field that is wrong and why, or saying that the expression never
    ///   fires (`0 0 30 2 *`).
    public init(_ text: String) throws(CronExpressionError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        source = trimmed
        var expanded = trimmed
        if trimmed.hasPrefix("@") {
            switch trimmed.lowercased() {
            case "@yearly", "@annually": expanded = "0 0 1 1 *"
            case "@monthly": expanded = "0 0 1 * *"
            case "@weekly": expanded = "0 0 * * 0"
            case "@daily", "@midnight": expanded = "0 0 * * *"
            case "@hourly": expanded = "0 * * * *"
            default:
                throw CronExpressionError(
                    expression: trimmed, field: nil,
                    reason: "unknown macro '\(trimmed)' (use @yearly, @annually, @monthly, @weekly, @daily, @midnight "
                        + "or @hourly)")
            }
        }
        let parts = expanded.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard parts.count == 5 else {
            throw CronExpressionError(
                expression: trimmed, field: nil,
                reason: "it has \(parts.count) field\(parts.count == 1 ? "" : "s"); a cron expression has 5 (minute, "
                    + "hour, day of month, month, day of week) or is a macro such as @daily")
        }
        let fields = Field.allCases
        var bits: [UInt64] = []
        for (field, part) in zip(fields, parts) {
            bits.append(try Self.parse(part, field: field, expression: trimmed))
        }
        minutes = bits[0]
        hours = UInt32(truncatingIfNeeded: bits[1])
        daysOfMonth = UInt32(truncatingIfNeeded: bits[2])
        months = UInt16(truncatingIfNeeded: bits[3])
        let week = bits[4]
        daysOfWeek = UInt8(truncatingIfNeeded: (week | (week >> 7)) & 0x7F)
        dayOfMonthRestricted = !parts[2].hasPrefix("*")
        dayOfWeekRestricted = !parts[4].hasPrefix("*")
        fixedTime = !parts[0].hasPrefix("*") && !parts[1].hasPrefix("*")
        if !dayOfWeekRestricted || daysOfWeek == 0 {
            // Only the day of the month decides: some month of the set must have one of the days.
            let possible = (1...12).contains { month in
                months & (1 << month) != 0
                    && (1...Self.maximumDays(inMonth: month)).contains { daysOfMonth & (1 << $0) != 0 }
            }
            if !possible {
                throw CronExpressionError(
                    expression: trimmed, field: .dayOfMonth,
                    reason: "it never fires: no month of the expression has day \(parts[2])")
            }
        }
    }

    public var description: String { source }

    /// Parses one field into a bit set of its values.
    private static func parse(_ text: String, field: Field, expression: String) throws(CronExpressionError) -> UInt64 {
        func fail(_ reason: String) -> CronExpressionError {
            CronExpressionError(expression: expression, field: field, reason: reason)
        }
        func value(_ token: Substring) throws(CronExpressionError) -> Int {
            if let number = Int(token), token.allSatisfy(\.isASCII) {
                guard field.range.contains(number) else {
                    throw fail("\(number) is out of range \(field.range.lowerBound)-\(field.range.upperBound)")
                }
                return number
            }
            if let named = field.value(ofName: String(token)) { return named }
            if token.isEmpty { throw fail("a value is missing in '\(text)'") }
            throw fail("'\(token)' is not a number\(field.names.isEmpty ? "" : " or a name such as \(field.names[0])")")
        }
        var bits: UInt64 = 0
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard !item.isEmpty else { throw fail("an empty item in '\(text)'") }
            let pieces = item.split(separator: "/", omittingEmptySubsequences: false)
            guard pieces.count <= 2 else { throw fail("'\(item)' has more than one '/'") }
            var step = 1
            if pieces.count == 2 {
                guard let number = Int(pieces[1]), pieces[1].allSatisfy(\.isASCII), number >= 1 else {
                    throw fail("the step in '\(item)' must be a positive number")
                }
                guard number <= field.range.upperBound else {
                    throw fail("the step \(number) is larger than the field's range")
                }
                step = number
            }
            let base = pieces[0]
            var lower: Int
            var upper: Int
            if base == "*" {
                lower = field.range.lowerBound
                upper = field == .dayOfWeek ? 6 : field.range.upperBound
            } else if let dash = base.firstIndex(of: "-") {
                lower = try value(base[base.startIndex..<dash])
                upper = try value(base[base.index(after: dash)...])
                guard lower <= upper else { throw fail("the range '\(base)' goes backwards") }
            } else {
                lower = try value(base)
                // `a/n`: from a to the end of the field.
                upper = pieces.count == 2 ? (field == .dayOfWeek ? 6 : field.range.upperBound) : lower
            }
            for number in stride(from: lower, through: upper, by: step) { bits |= 1 << UInt64(number) }
        }
        return bits
    }

    /// Days in a month of a leap year (February: 29).
    private static func maximumDays(inMonth month: Int) -> Int {
        switch month {
        case 2: 29
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Whether the expression matches a calendar day.
    private func matches(year: Int, month: Int, day: Int, weekday: Int) -> Bool {
        guard months & (1 << month) != 0 else { return false }
        let byMonthDay = daysOfMonth & (1 << day) != 0
        let byWeekday = daysOfWeek & (1 << weekday) != 0
        if dayOfMonthRestricted && dayOfWeekRestricted { return byMonthDay || byWeekday }
        return byMonthDay && byWeekday
    }

    /// The first time after `date` (strictly) at which the expression fires in `timeZone`; `nil` when it fires in none
    /// of the next 30 years.
    public func nextFire(after date: Date, in timeZone: TimeZone) -> Date? {
        let after = date.timeIntervalSince1970
        // The local calendar day of `date`, as days since 1970-01-01.
        let localSeconds = after + Double(timeZone.secondsFromGMT(for: date))
        var dayNumber = Int((localSeconds / 86_400).rounded(.down)) - 1  // a day early: a gap may move a time back
        let lastDay = dayNumber + 366 * 30
        while dayNumber <= lastDay {
            let (year, month, day) = CivilDate.fromDays(dayNumber)
            // 1970-01-01 was a Thursday (4).
            let weekday = ((dayNumber % 7) + 7 + 4) % 7
            if matches(year: year, month: month, day: day, weekday: weekday),
                let fire = firstFire(onDay: dayNumber, after: after, in: timeZone)
            {
                return fire
            }
            dayNumber += 1
        }
        return nil
    }

    /// The first time on a local day (given as days since 1970-01-01) after `after` at which the expression fires.
    /// The earliest of the day's times, not the first in wall-clock order: when the clocks go back, the second 02:00
    /// comes after the first 02:30.
    private func firstFire(onDay dayNumber: Int, after: TimeInterval, in timeZone: TimeZone) -> Date? {
        var earliest: TimeInterval?
        let midday = Date(timeIntervalSince1970: Double(dayNumber * 86_400 + 43_200))
        // The offsets around the day bound where a wall time can fall: once a wall time minus the largest of them is
        // past the earliest time found, no later wall time comes earlier.
        let largestOffset = TimeInterval(
            max(
                timeZone.secondsFromGMT(for: midday.addingTimeInterval(-86_400)),
                timeZone.secondsFromGMT(for: midday.addingTimeInterval(86_400))))
        for hour in 0..<24 where hours & (1 << hour) != 0 {
            for minute in 0..<60 where minutes & (1 << minute) != 0 {
                let naive = Double(dayNumber * 86_400 + hour * 3_600 + minute * 60)
                if let earliest, naive - largestOffset > earliest { return Date(timeIntervalSince1970: earliest) }
                for instant in instants(ofLocal: naive, in: timeZone) where instant > after {
                    earliest = min(earliest ?? instant, instant)
                }
            }
        }
        return earliest.map(Date.init(timeIntervalSince1970:))
    }

    /// The instants at which the local wall time `naive` (seconds since 1970 as if the zone were UTC) occurs: one,
    /// two when the clocks go back over it (a fixed-time job takes the first only), none when they skip it (a
    /// fixed-time job then runs at the change).
    private func instants(ofLocal naive: TimeInterval, in timeZone: TimeZone) -> [TimeInterval] {
        let before = TimeInterval(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: naive - 86_400)))
        let later = TimeInterval(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: naive + 86_400)))
        var found: [TimeInterval] = []
        for offset in [before, later] {
            let instant = naive - offset
            if TimeInterval(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: instant))) == offset,
                !found.contains(instant)
            {
                found.append(instant)
            }
        }
        found.sort()
        if found.isEmpty {
            // Skipped by a change of the clocks: a fixed-time job runs at the change.
            guard fixedTime,
                let change = timeZone.nextDaylightSavingTimeTransition(
                    after: Date(timeIntervalSince1970: naive - max(before, later)))
            else { return [] }
            return [change.timeIntervalSince1970]
        }
        if found.count > 1 && fixedTime { return [found[0]] }
        return found
    }
}

/// A cron expression that cannot be used: which field is wrong (or `nil`: the whole), and why.
public struct CronExpressionError: Error, Sendable, Hashable, LocalizedError, CustomStringConvertible {
    /// The expression as given.
    public var expression: String
    /// The field that is wrong, or `nil` when the expression as a whole is (the number of fields, a macro).
    public var field: CronExpression.Field?
    /// Why.
    public var reason: String

    public var errorDescription: String? { description }

    /// "invalid cron expression '61 * * * *': minute: 61 is out of range 0-59".
    public var description: String {
        "invalid cron expression '\(expression)': " + (field.map { "\($0.rawValue): " } ?? "") + reason
    }
}

/// Proleptic Gregorian dates as days since 1970-01-01 (Howard Hinnant's `civil_from_days`).
enum CivilDate {
    static func fromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
