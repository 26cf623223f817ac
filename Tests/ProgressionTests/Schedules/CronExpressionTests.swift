import Foundation
import Progression
import Testing

/// The cron expression as a table: parsing, the next fire times across month ends, leap days and daylight saving time
/// changes, and bad expressions refused with the field named.
struct CronExpressionTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var expression: String
        var zone: String
        var after: String
        var fires: [String]
        var testDescription: String { "\(expression) in \(zone) after \(after)" }
    }

    static let cases: [Case] = [
        Case(expression: "*/15 * * * *", zone: "UTC", after: "2026-01-01T00:07:00Z",
             fires: ["2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:45:00Z", "2026-01-01T01:00:00Z"]),
        // Month ends: the 31st skips the months without one.
        Case(expression: "0 0 31 * *", zone: "UTC", after: "2026-01-31T00:00:00Z",
             fires: ["2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z"]),
        Case(expression: "59 23 L * *".replacingOccurrences(of: "L", with: "28-31"), zone: "UTC",
             after: "2026-02-27T00:00:00Z", fires: ["2026-02-28T23:59:00Z", "2026-03-28T23:59:00Z"]),
        // Leap days.
        Case(expression: "0 12 29 2 *", zone: "UTC", after: "2026-01-01T00:00:00Z",
             fires: ["2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"]),
        // The year's end.
        Case(expression: "0 0 1 1 *", zone: "UTC", after: "2026-12-31T23:59:00Z", fires: ["2027-01-01T00:00:00Z"]),
        // Days of the week, named and numbered; Sunday as 7.
        Case(expression: "0 9 * * MON-FRI", zone: "UTC", after: "2026-11-27T10:00:00Z",
             fires: ["2026-11-30T09:00:00Z", "2026-12-01T09:00:00Z"]),
        Case(expression: "0 0 * * 7", zone: "UTC", after: "2026-11-25T12:00:00Z", fires: ["2026-11-29T00:00:00Z"]),
        // Day of month and day of week both restricted: either matches (the 1st, or a Wednesday).
        Case(expression: "0 0 1 * 3", zone: "UTC", after: "2026-11-25T12:00:00Z",
             fires: ["2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z", "2026-12-09T00:00:00Z"]),
        // Macros.
        Case(expression: "@hourly", zone: "UTC", after: "2026-11-25T10:20:00Z", fires: ["2026-11-25T11:00:00Z"]),
        Case(expression: "@daily", zone: "UTC", after: "2026-11-25T10:20:00Z", fires: ["2026-11-26T00:00:00Z"]),
        Case(expression: "@midnight", zone: "UTC", after: "2026-11-25T10:20:00Z", fires: ["2026-11-26T00:00:00Z"]),
        Case(expression: "@weekly", zone: "UTC", after: "2026-11-25T10:20:00Z", fires: ["2026-11-29T00:00:00Z"]),
        Case(expression: "@monthly", zone: "UTC", after: "2026-11-25T10:20:00Z", fires: ["2026-12-01T00:00:00Z"]),
        Case(expression: "@yearly", zone: "UTC", after: "2026-11-25T10:20:00Z", fires: ["2027-01-01T00:00:00Z"]),
        Case(expression: "@annually", zone: "UTC", after: "2026-11-25T10:20:00Z", fires: ["2027-01-01T00:00:00Z"]),
        // A time zone: 03:30 in Tokyo (UTC+9, no DST) is 18:30 UTC the day before.
        Case(expression: "30 3 * * *", zone: "Asia/Tokyo", after: "2026-11-25T12:00:00Z",
             fires: ["2026-11-25T18:30:00Z", "2026-11-26T18:30:00Z"]),
        // Berlin, clocks forward on 2026-03-29 (02:00 CET → 03:00 CEST, at 01:00 UTC): a fixed-time job in the skipped
        // hour runs once at the change, then at its time again.
        Case(expression: "30 2 * * *", zone: "Europe/Berlin", after: "2026-03-28T12:00:00Z",
             fires: ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]),
        // Two fixed times in the skipped hour: one run at the change.
        Case(expression: "0,30 2 * * *", zone: "Europe/Berlin", after: "2026-03-28T12:00:00Z",
             fires: ["2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:30:00Z"]),
        // A job with a wildcard hour skips the times that do not exist.
        Case(expression: "*/30 * * * *", zone: "Europe/Berlin", after: "2026-03-29T00:45:00Z",
             fires: ["2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"]),
        // Berlin, clocks back on 2026-10-25 (03:00 CEST → 02:00 CET, at 01:00 UTC): 02:30 happens twice; a fixed-time
        // job runs at the first only.
        Case(expression: "30 2 * * *", zone: "Europe/Berlin", after: "2026-10-24T12:00:00Z",
             fires: ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]),
        // A wildcard job runs at each real time, the repeated hour included.
        Case(expression: "*/30 * * * *", zone: "Europe/Berlin", after: "2026-10-25T00:00:00Z",
             fires: ["2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"]),
        // New York, clocks forward on 2026-03-08 (02:00 EST → 03:00 EDT, at 07:00 UTC).
        Case(expression: "30 2 * * *", zone: "America/New_York", after: "2026-03-07T12:00:00Z",
             fires: ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]),
        // New York, clocks back on 2026-11-01 (02:00 EDT → 01:00 EST, at 06:00 UTC): 01:15 happens twice.
        Case(expression: "15 1 * * *", zone: "America/New_York", after: "2026-10-31T12:00:00Z",
             fires: ["2026-11-01T05:15:00Z", "2026-11-02T06:15:00Z"]),
        Case(expression: "15 * * * *", zone: "America/New_York", after: "2026-11-01T04:30:00Z",
             fires: ["2026-11-01T05:15:00Z", "2026-11-01T06:15:00Z", "2026-11-01T07:15:00Z"]),
        // Lists, ranges with steps, `a/n`, names in any case.
        Case(expression: "5,10-20/5,50/5 0 * jan,Feb *", zone: "UTC", after: "2026-01-01T00:00:00Z",
             fires: ["2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z", "2026-01-01T00:15:00Z", "2026-01-01T00:20:00Z",
                     "2026-01-01T00:50:00Z", "2026-01-01T00:55:00Z", "2026-01-02T00:05:00Z"]),
    ]

    @Test(arguments: cases)
    func nextFireTimes(_ testCase: Case) throws {
        let expression = try CronExpression(testCase.expression)
        let zone = try #require(TimeZone(identifier: testCase.zone))
        var after = try Self.date(testCase.after)
        var fires: [String] = []
        for _ in testCase.fires {
            let next = try #require(expression.nextFire(after: after, in: zone))
            fires.append(Self.format(next))
            after = next
        }
        #expect(fires == testCase.fires)
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        var expression: String
        var field: CronExpression.Field?
        var says: String
        var testDescription: String { "'\(expression)'" }
    }

    static let refusals: [Refusal] = [
        Refusal(expression: "61 * * * *", field: .minute, says: "61 is out of range 0-59"),
        Refusal(expression: "* 24 * * *", field: .hour, says: "24 is out of range 0-23"),
        Refusal(expression: "* * 0 * *", field: .dayOfMonth, says: "0 is out of range 1-31"),
        Refusal(expression: "* * * 13 *", field: .month, says: "13 is out of range 1-12"),
        Refusal(expression: "* * * * 8", field: .dayOfWeek, says: "8 is out of range 0-7"),
        Refusal(expression: "* * * FOO *", field: .month, says: "'FOO' is not a number or a name such as JAN"),
        Refusal(expression: "* * * * MONDAY", field: .dayOfWeek, says: "'MONDAY' is not a number"),
        Refusal(expression: "*/0 * * * *", field: .minute, says: "must be a positive number"),
        Refusal(expression: "*/61 * * * *", field: .minute, says: "larger than the field's range"),
        Refusal(expression: "5-1 * * * *", field: .minute, says: "goes backwards"),
        Refusal(expression: "1,,2 * * * *", field: .minute, says: "an empty item"),
        Refusal(expression: "1-/2 * * * *", field: .minute, says: "a value is missing"),
        Refusal(expression: "0 0 30 2 *", field: .dayOfMonth, says: "never fires"),
        Refusal(expression: "0 0 31 4,6 *", field: .dayOfMonth, says: "never fires"),
        Refusal(expression: "* * *", field: nil, says: "it has 3 fields"),
        Refusal(expression: "* * * * * *", field: nil, says: "it has 6 fields"),
        Refusal(expression: "", field: nil, says: "it has 0 fields"),
        Refusal(expression: "@reboot", field: nil, says: "unknown macro '@reboot'"),
        Refusal(expression: "１ * * * *", field: .minute, says: "is not a number"),
    ]

    @Test(arguments: refusals)
    func badExpressionsAreRefusedWithTheFieldNamed(_ refusal: Refusal) {
        #expect {
            _ = try CronExpression(refusal.expression)
        } throws: { error in
            guard let error = error as? CronExpressionError else { return false }
            return error.field == refusal.field && error.reason.contains(refusal.says)
                && error.description.hasPrefix("invalid cron expression '\(refusal.expression)'")
                && (refusal.field.map { error.description.contains("\($0.rawValue): ") } ?? true)
        }
    }

    @Test func anExpressionReadsBackAsWritten() throws {
        #expect(try CronExpression("  */5 * * * *  ").description == "*/5 * * * *")
        #expect(try CronExpression("@daily") == CronExpression("@daily"))
    }

    static func date(_ text: String) throws -> Date {
        try #require(ISO8601DateFormatter().date(from: text))
    }

    static func format(_ date: Date) -> String {
        ISO8601DateFormatter().string(from: date)
    }
}
