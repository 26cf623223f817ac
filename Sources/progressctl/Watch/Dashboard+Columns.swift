import Foundation
import Progression
import ProgressionOperator

extension Dashboard {
    /// The widths, in cells, of the columns of the task rows: name, bar, percent, rate, time left, step, status and
    /// short id (on a link's row, the id of its child job). A width of 0 leaves the column out. The columns and the spaces between them add up to `total`.
    /// The status and id columns are as wide as the widest status and short id shown.
    struct Columns: Sendable, Hashable {
        var total: Int
        var name = 0
        var bar = 8
        var percent = 4
        var rate = 8
        var timeLeft = 6
        var step = 0
        var status = 9
        var id = 8

        /// The fewest cells the name column gets before other columns are left out.
        static let minimumName = 16
        /// At most this many cells go to the step while a name is cut.
        static let preferredStep = 24

        /// Cells of the fixed columns (all but name and step), with the space before each.
        var fixedCells: Int {
            var cells = 0
            if bar > 0 { cells += 2 + bar }
            if percent > 0 { cells += (bar > 0 ? 1 : 2) + percent }
            if rate > 0 { cells += 2 + rate }
            if timeLeft > 0 { cells += (rate > 0 ? 1 : 2) + timeLeft }
            for width in [status, id] where width > 0 { cells += 2 + width }
            return cells
        }

        /// Columns for `rows` on a terminal `width` cells wide. The bar has 10 cells from 100 columns on, else 8.
        /// On a narrow terminal the rate, time left, id, bar, status and percent are left out in that order until
        /// the name has ``minimumName`` cells. The name and the step share the rest: when both do not fit, the name
        /// gets what it needs up to 60 % of it and the step what is left (up to ``preferredStep`` cells); a step
        /// with less than 4 cells is left out.
        static func fitting(width: Int, rows: [Row], shortIDs: [String: String]) -> Columns {
            var nameWanted = 0
            var stepWanted = 0
            var statusWanted = 0
            var idWanted = 0
            for row in rows {
                let record: TaskRecord
                switch row.content {
                case .root(let root, _, _):
                    record = root
                    nameWanted = max(nameWanted, TerminalWidth.width(of: root.name))
                    idWanted = max(idWanted, TerminalWidth.width(of: shortIDs[root.id] ?? root.id))
                case .task(let task, let depth):
                    record = task
                    nameWanted = max(nameWanted, 2 * depth + TerminalWidth.width(of: task.name))
                    if let child = task.childJobID { idWanted = max(idWanted, TerminalWidth.width(of: child)) }
                case .summary:
                    continue
                }
                stepWanted = max(stepWanted, TerminalWidth.width(of: Self.step(of: record)))
                statusWanted = max(statusWanted, record.displayStatus.count)
            }
            var columns = Columns(total: width)
            columns.bar = width >= 100 ? 10 : 8
            columns.status = statusWanted
            columns.id = min(idWanted, 16)
            let minimumName = min(minimumName, max(nameWanted, 1))
            let leftOut: [WritableKeyPath<Columns, Int>] = [\.rate, \.timeLeft, \.id, \.bar, \.status, \.percent]
            for column in leftOut where columns.fixedCells + minimumName > width {
                columns[keyPath: column] = 0
            }
            let available = width - columns.fixedCells
            if stepWanted > 0, available >= minimumName + 2 + 4 {
                if nameWanted + 2 + stepWanted <= available {
                    columns.name = nameWanted
                } else {
                    // The name gets what it needs up to 60 % of the room; the step the rest, up to its want.
                    let name = max(minimumName, min(nameWanted, (available - 2) * 3 / 5))
                    let step = min(stepWanted, preferredStep, available - 2 - name)
                    columns.name = available - 2 - step
                }
                columns.step = available - 2 - columns.name
            } else {
                columns.name = max(0, available)
            }
            return columns
        }

        /// `row` laid out in these columns: exactly ``total`` cells, colour aside.
        func line(for row: Row, shortIDs: [String: String], style: Style) -> String {
            switch row.content {
            case .root(let record, let rate, let timeLeft):
                return taskLine(
                    record, depth: 0, rate: Format.rate(rate), timeLeft: Format.timeLeft(timeLeft),
                    id: shortIDs[record.id] ?? record.id, style: style)
            case .task(let record, let depth):
                // A link shows the id of the child job it stands for.
                return taskLine(record, depth: depth, rate: "", timeLeft: "", id: record.childJobID ?? "", style: style)
            case .summary(let counts, let depth):
                let order: [TaskStatus] = [.completed, .failed, .cancelled, .pending, .running, .paused]
                let text = order.compactMap { status in counts[status].map { "\($0) \(status)" } }
                    .joined(separator: " · ")
                let indent = String(repeating: " ", count: min(2 * depth, total))
                return style.paint(TerminalWidth.pad(indent + text, to: total), .dim)
            }
        }

        private func taskLine(
            _ record: TaskRecord, depth: Int, rate: String, timeLeft: String, id: String, style: Style
        ) -> String {
            var line = ""
            var cells = 0
            func add(_ text: String, width: Int, gap: Int, alignRight: Bool = false, color: Terminal.Color? = nil) {
                guard width > 0 else { return }
                let cut = TerminalWidth.truncate(text, to: width)
                let fill = String(repeating: " ", count: width - TerminalWidth.width(of: cut))
                line += String(repeating: " ", count: gap)
                line += alignRight ? fill + style.paint(cut, color) : style.paint(cut, color) + fill
                cells += gap + width
            }
            let indent = min(2 * depth, max(0, name - 2))
            line += String(repeating: " ", count: indent)
            cells += indent
            add(record.name, width: name - indent, gap: 0, color: depth == 0 ? .bold : nil)
            add(Self.bar(record.progress, width: bar), width: bar, gap: 2)
            add(Format.percent(record.progress), width: percent, gap: bar > 0 ? 1 : 2, alignRight: true)
            add(rate, width: self.rate, gap: 2, alignRight: true)
            add(timeLeft, width: self.timeLeft, gap: self.rate > 0 ? 1 : 2, alignRight: true)
            add(Self.step(of: record), width: step, gap: 2)
            let shown = record.displayStatus
            add(shown, width: status, gap: 2, color: shown == "stalled" ? .yellow : Format.color(of: record.status))
            add(id, width: self.id, gap: 2)
            return line + String(repeating: " ", count: max(0, total - cells))
        }

        /// The step column of a row: what a waiting job waits for (`for 3 child jobs`), else its step.
        static func step(of record: TaskRecord) -> String {
            if record.waitReason == .waiting, let wait = Format.wait(record) { return wait }
            return record.step ?? ""
        }

        /// `width` cells: `█` for what is done, `░` for what is not, `·` throughout when progress is unknown.
        static func bar(_ progress: Double?, width: Int) -> String {
            guard let progress, progress.isFinite else { return String(repeating: "·", count: width) }
            let filled = Int((min(1, max(0, progress)) * Double(width)).rounded(.down))
            return String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        }
    }
}
