import Foundation
import Progression

/// Text for people, shared by progressctl and the console: percents, times, durations, sizes, counts, rates and times
/// left. (progressctl adds bars, colours and tables for the terminal.)
package enum Format {
    /// `45%`, or `-` when unknown.
    package static func percent(_ progress: Double?) -> String {
        guard let progress, progress.isFinite else { return "-" }
        return "\(Int((progress * 100).rounded(.down)))%"
    }

    private static let timeFormatter: DateFormatter = {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter
    }()

    /// Local time to the second, `-` for none.
    /// When a root that waits for a time runs: `runs 2026-11-25 10:00:00`, `wakes …`, `retries …`; what a waiting
    /// job waits for: `for 3 child jobs`, `for signal 'approve' until …`; `nil` otherwise.
    package static func wait(_ record: TaskRecord) -> String? {
        guard let reason = record.waitReason else { return nil }
        if reason == .waiting {
            let what = "for " + (record.waitingFor ?? "something")
            guard let at = record.nextAttemptAt, at < JobOptions.latestRunAt else { return what }
            return what + " until \(time(at))"
        }
        guard let at = record.nextAttemptAt else { return nil }
        switch reason {
        case .runAt: return "runs \(time(at))"
        case .sleep: return "wakes \(time(at))"
        case .retry: return "retries \(time(at))"
        case .waiting: return nil
        }
    }

    package static func time(_ date: Date?) -> String {
        guard let date else { return "-" }
        return timeFormatter.string(from: date)
    }

    /// `5 s`, `0.5 s`.
    package static func seconds(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : String(format: "%.1f s", seconds)
    }

    /// `512 B`, `3.2 KiB`, `1.5 MiB`.
    package static func bytes(_ count: Int64) -> String {
        if count < 1024 { return "\(count) B" }
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var value = Double(count) / 1024
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return String(format: "%.1f %@", value, units[unit])
    }

    /// `12,345`: a count with a comma between groups of three digits, whatever the locale.
    package static func count(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { grouped += "," }
            grouped.append(digit)
        }
        return (value < 0 ? "-" : "") + grouped
    }

    /// `1 task`, `12 tasks`, `5,004 tasks`.
    package static func tasks(_ value: Int) -> String {
        "\(count(value)) task\(value == 1 ? "" : "s")"
    }
}

extension Format {
    /// A rate of progress given as a fraction of the whole per second, in percent per minute below 1 %/s
    /// (`0.5%/min`, `12%/min`) and per second above (`2.5%/s`); `-` when unknown. At most 8 characters up to 1000 %/s.
    package static func rate(_ perSecond: Double?) -> String {
        guard let perSecond, perSecond.isFinite, perSecond >= 0 else { return "-" }
        func number(_ value: Double) -> String {
            let tenths = (value * 10).rounded() / 10
            return tenths >= 10 ? String(format: "%.0f", value) : String(format: "%.1f", tenths)
        }
        let percentPerSecond = perSecond * 100
        if percentPerSecond >= 1 { return number(percentPerSecond) + "%/s" }
        return number(percentPerSecond * 60) + "%/min"
    }

    /// A time left as `1h02m`, `4m10s` or `12s`; `>99h` beyond 99 hours; `-` when unknown.
    package static func timeLeft(_ seconds: Double?) -> String {
        guard let seconds, seconds.isFinite, seconds >= 0 else { return "-" }
        guard seconds < 100 * 3600 else { return ">99h" }
        let whole = Int(seconds.rounded(.up))
        if whole < 60 { return "\(whole)s" }
        if whole < 3600 { return "\(whole / 60)m" + twoDigits(whole % 60) + "s" }
        let minutes = whole / 60
        return "\(minutes / 60)h" + twoDigits(minutes % 60) + "m"
    }

    private static func twoDigits(_ value: Int) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }
}
