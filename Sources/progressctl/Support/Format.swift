import Foundation
import Progression

/// Text for people: progress bars, times, sizes, tables.
enum Format {
    /// A bar of `width` cells and the percent, e.g. `█████░░░░░  50%`; dashes when progress is unknown.
    static func bar(_ progress: Double?, width: Int = 20) -> String {
        guard let progress, progress.isFinite else {
            return String(repeating: "·", count: width) + "    -"
        }
        let clamped = min(1, max(0, progress))
        let filled = Int((clamped * Double(width)).rounded(.down))
        return String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled) + " "
            + percent(clamped).leftPadded(to: 4)
    }

    /// `45%`, or `-` when unknown.
    static func percent(_ progress: Double?) -> String {
        guard let progress, progress.isFinite else { return "-" }
        return "\(Int((progress * 100).rounded(.down)))%"
    }

    /// A status, coloured on a terminal.
    static func status(_ status: TaskStatus) -> String {
        Terminal.paint(status.rawValue, color(of: status))
    }

    /// The colour a status is shown in (tables and the watch dashboard alike).
    static func color(of status: TaskStatus) -> Terminal.Color? {
        switch status {
        case .pending: nil
        case .running: .cyan
        case .paused: .yellow
        case .completed: .green
        case .failed: .red
        case .cancelled: .dim
        }
    }

    private static let timeFormatter: DateFormatter = {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter
    }()

    /// Local time to the second, `-` for none.
    static func time(_ date: Date?) -> String {
        guard let date else { return "-" }
        return timeFormatter.string(from: date)
    }

    /// `5 s`, `0.5 s`.
    static func seconds(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : String(format: "%.1f s", seconds)
    }

    /// `512 B`, `3.2 KiB`, `1.5 MiB`.
    static func bytes(_ count: Int64) -> String {
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

    /// Rows as left-aligned columns separated by two spaces, without trailing spaces; `header` is printed first.
    ///
    /// Widths are counted in terminal cells (``TerminalWidth``: East Asian wide characters and emoji take two, combining
    /// marks none), so columns line up after names in any script; the colours of ``Terminal/paint(_:_:)`` take no
    /// room. A control character left in a cell is written escaped (``printableCell(_:)``).
    static func table(header: [String], rows: [[String]]) -> [String] {
        let all = ([header] + rows).map { $0.map(printableCell) }
        let columns = all.map(\.count).max() ?? 0
        var widths = Array(repeating: 0, count: columns)
        for row in all {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.visibleWidth) }
        }
        return all.enumerated().map { number, row in
            var line = row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.rightPadded(to: widths[index])
            }.joined(separator: "  ")
            while line.last == " " { line.removeLast() }
            return number == 0 ? Terminal.paint(line, .bold) : line
        }
    }

    /// `cell` with its control characters escaped (``String/escapedForTerminal``), except the colour sequences
    /// (`ESC [ … m`) that ``Terminal/paint(_:_:)`` puts around text.
    static func printableCell(_ cell: String) -> String {
        guard cell.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
            return cell
        }
        var result = ""
        var plain = ""
        var scalars = cell.unicodeScalars[...]
        while let scalar = scalars.first {
            if scalar == "\u{1B}", let length = colourSequenceLength(scalars) {
                result += plain.escapedForTerminal
                plain = ""
                result.unicodeScalars.append(contentsOf: scalars.prefix(length))
                scalars = scalars.dropFirst(length)
            } else {
                plain.unicodeScalars.append(scalar)
                scalars = scalars.dropFirst()
            }
        }
        return result + plain.escapedForTerminal
    }

    /// The length of the colour sequence `ESC [ digits and semicolons m` at the start of `scalars`, if there is one.
    private static func colourSequenceLength(_ scalars: Substring.UnicodeScalarView) -> Int? {
        var index = scalars.index(after: scalars.startIndex)
        guard index < scalars.endIndex, scalars[index] == "[" else { return nil }
        var length = 2
        index = scalars.index(after: index)
        while index < scalars.endIndex {
            let scalar = scalars[index]
            length += 1
            if scalar == "m" { return length }
            guard ("0"..."9").contains(scalar) || scalar == ";" else { return nil }
            index = scalars.index(after: index)
        }
        return nil
    }

    /// `12,345`: a count with a comma between groups of three digits, whatever the locale.
    static func count(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { grouped += "," }
            grouped.append(digit)
        }
        return (value < 0 ? "-" : "") + grouped
    }

    /// `1 task`, `12 tasks`, `5,004 tasks`.
    static func tasks(_ value: Int) -> String {
        "\(count(value)) task\(value == 1 ? "" : "s")"
    }
}

extension String {
    /// The width on screen in terminal cells (``TerminalWidth``), not counting colour sequences (`ESC [ … m`).
    var visibleWidth: Int {
        var cells = 0
        var inEscape = false
        for scalar in unicodeScalars {
            if inEscape {
                if scalar == "m" { inEscape = false }
            } else if scalar == "\u{1B}" {
                inEscape = true
            } else {
                cells += TerminalWidth.width(of: scalar)
            }
        }
        return cells
    }

    func rightPadded(to width: Int) -> String {
        self + String(repeating: " ", count: max(0, width - visibleWidth))
    }

    func leftPadded(to width: Int) -> String {
        String(repeating: " ", count: max(0, width - visibleWidth)) + self
    }
}

extension Format {
    /// A rate of progress given as a fraction of the whole per second, in percent per minute below 1 %/s
    /// (`0.5%/min`, `12%/min`) and per second above (`2.5%/s`); `-` when unknown. At most 8 characters up to 1000 %/s.
    static func rate(_ perSecond: Double?) -> String {
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
    static func timeLeft(_ seconds: Double?) -> String {
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
