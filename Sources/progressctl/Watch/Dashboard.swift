import Foundation
import Progression
import ProgressionOperator

/// The screen `progressctl watch` draws on a terminal, as text: a pure function of the watched trees, the
/// terminal's size, the time and whether to colour, so that it is tested without a terminal.
///
/// The first line counts the watched tasks by status and shows the time. Then comes each watched root with its
/// bar, percent, rate, time left, step, status and short id, and below it only what needs attention: its running,
/// paused and failed descendants, indented as a tree, and for each parent one line that counts its other children
/// (`412 completed · 3 failed · 5 pending`). Everything fits the terminal: at most `size.rows` lines, each exactly
/// `size.columns` cells wide (see ``TerminalWidth``). When the rows would not fit, what is kept is, in this order:
/// the header, the unfinished roots, their running and paused descendants, the finished roots, the count lines and
/// the failed descendants; a last line `… N more` says how many rows were left out.
///
/// ```swift
/// let lines = Dashboard.render(trees, size: TerminalSize(rows: 40, columns: 80), now: Date(), color: false)
/// ```
extension Dashboard {
    /// The frame for `trees` on a terminal of `size` at `now`: at most `size.rows` lines of exactly `size.columns`
    /// cells each (escape sequences for colour aside), without line breaks.
    static func render(_ trees: [Tree], size: TerminalSize, now: Date, color: Bool) -> [String] {
        guard size.rows > 0, size.columns > 0 else { return [] }
        let style = Style(enabled: color)
        let ordered = order(trees)
        var lines = [header(ordered, now: now, width: size.columns, style: style)]
        if ordered.isEmpty {
            if size.rows > 1 {
                let note = "waiting for pending, running or paused tasks — Ctrl-C to stop"
                lines.append(style.paint(TerminalWidth.pad(note, to: size.columns), .dim))
            }
            return lines
        }
        let selection = select(candidateRows(of: ordered), capacity: size.rows - 1)
        let ids = shortIDs(of: ordered.map(\.root))
        let columns = Columns.fitting(width: size.columns, rows: selection.rows, shortIDs: ids)
        lines += selection.rows.map { columns.line(for: $0, shortIDs: ids, style: style) }
        if selection.omitted > 0, lines.count < size.rows {
            lines.append(style.paint(TerminalWidth.pad("… \(selection.omitted) more", to: size.columns), .dim))
        }
        return lines
    }

    /// The trees in the order shown: unfinished ones first (running and paused, then pending, each oldest first),
    /// then finished ones, most recently finished first.
    static func order(_ trees: [Tree]) -> [Tree] {
        func rank(_ status: TaskStatus) -> Int {
            switch status {
            case .running, .paused: 0
            case .pending: 1
            case .completed, .failed, .cancelled: 2
            }
        }
        return trees.sorted { first, second in
            let a = first.root
            let b = second.root
            if rank(a.status) != rank(b.status) { return rank(a.status) < rank(b.status) }
            if a.status.isFinished {
                let aFinished = a.finishedAt ?? a.updatedAt
                let bFinished = b.finishedAt ?? b.updatedAt
                if aFinished != bFinished { return aFinished > bFinished }
            } else if a.createdAt != b.createdAt {
                return a.createdAt < b.createdAt
            }
            return a.id < b.id
        }
    }

    /// The first line: how many watched tasks (roots and descendants) are in each status, and the time.
    static func header(_ trees: [Tree], now: Date, width: Int, style: Style) -> String {
        var counts: [TaskStatus: Int] = [:]
        for tree in trees {
            for node in tree.nodes { counts[node.status, default: 0] += 1 }
        }
        let shown: [TaskStatus] = [.running, .paused, .pending, .completed, .failed, .cancelled]
        let parts = shown.compactMap { status in counts[status].map { (status, "\($0) \(status)") } }
        let plainCounts = parts.isEmpty ? "no tasks" : parts.map(\.1).joined(separator: " · ")
        let time = clock(now)
        let timeCells = TerminalWidth.width(of: time)
        // The time goes to the right edge when there is room for it and a little of the counts.
        let showTime = width >= timeCells + 12
        let countCells = showTime ? width - timeCells - 2 : width
        let cut = TerminalWidth.truncate(plainCounts, to: countCells)
        var left: String
        if style.enabled, cut == plainCounts, !parts.isEmpty {
            left = parts.map { style.paint($0.1, Format.color(of: $0.0)) }.joined(separator: " · ")
        } else {
            left = cut
        }
        left += String(repeating: " ", count: countCells - TerminalWidth.width(of: cut))
        return showTime ? left + "  " + style.paint(time, .dim) : left
    }

    /// `HH:mm:ss` in the local time zone.
    static func clock(_ date: Date) -> String {
        let parts = Calendar.current.dateComponents([.hour, .minute, .second], from: date)
        return [parts.hour, parts.minute, parts.second].map { value in
            let text = String(value ?? 0)
            return text.count < 2 ? "0" + text : text
        }.joined(separator: ":")
    }

    /// For each root, the shortest prefix of its id of at least 8 characters that no other root shown shares.
    static func shortIDs(of roots: [TaskRecord]) -> [String: String] {
        // In sorted order, the ids sharing the longest prefix with an id are its neighbours.
        let ids = Set(roots.map(\.id)).sorted()
        func commonPrefixLength(_ a: String, _ b: String) -> Int {
            zip(a, b).prefix { $0 == $1 }.count
        }
        var result: [String: String] = [:]
        for (index, id) in ids.enumerated() {
            var length = 8
            if index > 0 { length = max(length, commonPrefixLength(id, ids[index - 1]) + 1) }
            if index + 1 < ids.count { length = max(length, commonPrefixLength(id, ids[index + 1]) + 1) }
            result[id] = String(id.prefix(length))
        }
        return result
    }

    /// Colour for people: ANSI SGR sequences around text, or the text as it is when colour is off.
    struct Style: Sendable {
        var enabled: Bool

        /// `text` in `color`; the sequences take no cells.
        func paint(_ text: String, _ color: Terminal.Color?) -> String {
            guard enabled, let color, !text.isEmpty else { return text }
            return "\u{1B}[\(color.rawValue)m\(text)\u{1B}[0m"
        }
    }
}

extension String {
    /// The string without the spaces at its end (the padding of a dashboard line).
    func trimmingTrailingSpaces() -> String {
        var result = Substring(self)
        while result.last == " " { result.removeLast() }
        return String(result)
    }
}
