import Foundation
import Progression
import ProgressionOperator

/// Text for people on a terminal: progress bars, coloured statuses, tables (times, sizes, counts and rates are in
/// ProgressionOperator's `Format`).
extension Format {
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

    /// A task's status as people read it: why a pending root waits (`scheduled`, `retrying`, `sleeping`), how long a
    /// running job past its stall limit has been still (`stalled 42 s (limit 30 s)`), and a
    /// completed root's failed steps (`completed, 2 failed steps`), in the status's colour.
    static func state(_ record: TaskRecord, failedSteps: Int = 0) -> String {
        var text = status(record.status)
        if record.status == .pending, let reason = record.waitReason {
            text = Terminal.paint(reason.rawValue, .dim)
        }
        if let still = record.stalledFor(), let limit = record.options.stall?.limit {
            text = Terminal.paint("stalled \(Format.seconds(.seconds(Int64(still.seconds)))) (limit \(Format.seconds(limit)))", .yellow)
        }
        if failedSteps > 0 {
            text += Terminal.paint(", \(count(failedSteps)) failed step\(failedSteps == 1 ? "" : "s")", .yellow)
        }
        return text
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

    /// Rows as left-aligned columns separated by two spaces, without trailing spaces; `header` is printed first.
    ///
    /// Widths are counted in terminal cells (``TerminalWidth``: East Asian wide characters and emoji take two, combining
    /// marks none), so columns line up after names in any script; the colours of ``Terminal/paint(_:_:)`` take no
    /// room. A control character left in a cell is written escaped (``printableCell(_:)``).
    /// The widest a table cell is shown, except in the last column (``table(header:rows:)``); `show` and `--json`
    /// give whole values.
    static let maxCellWidth = 60

    static func table(header: [String], rows: [[String]]) -> [String] {
        // A column other than the last is cut at `maxCellWidth` cells (with `…`): every row is padded to its widest
        // cell, so one huge name (a megabyte) made every line that wide. The last column is not padded: it stays whole.
        // Colour sequences are only in short cells (a status), which are never cut.
        let all = ([header] + rows).map { row in
            row.enumerated().map { index, cell in
                let printable = printableCell(cell)
                guard index < row.count - 1, !printable.contains("\u{1B}"), printable.visibleWidth > maxCellWidth else {
                    return printable
                }
                return TerminalWidth.truncate(printable, to: maxCellWidth)
            }
        }
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
