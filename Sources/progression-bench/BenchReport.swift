import Foundation

/// Every figure of one run, the scenarios that failed, and how they are printed: a table for people, or one JSON
/// object whose keys are the figure keys (numbers, or `null` for a figure that cannot be measured yet).
struct BenchReport: Sendable {
    /// Facts about the run: date, machine, mode, library versions.
    var meta: [String: String] = [:]
    private(set) var figures: [Figure] = []
    /// Scenarios that threw, with the error.
    private(set) var failures: [String] = []
    /// How long each scenario took, in seconds.
    private(set) var scenarioSeconds: [(String, Double)] = []

    mutating func add(_ new: [Figure]) {
        for figure in new {
            figures.removeAll { $0.key == figure.key }
            figures.append(figure)
        }
    }

    mutating func fail(_ scenario: String, _ error: any Error) {
        failures.append("\(scenario): \(error)")
    }

    mutating func timed(_ scenario: String, seconds: Double) {
        scenarioSeconds.append((scenario, seconds))
    }

    func value(_ key: String) -> Double? {
        figures.first { $0.key == key }?.value
    }

    /// Figures that are neither finite and positive nor pending.
    var insaneFigures: [Figure] {
        figures.filter { !$0.isSane }
    }

    /// Whether the run may exit 0: no scenario failed and every figure is sane. Targets do not count.
    var isSound: Bool { failures.isEmpty && insaneFigures.isEmpty }

    // MARK: Output

    /// The table for people.
    func table() -> String {
        var rows: [[String]] = [["key", "value", "unit", "target", "met", "what"]]
        for figure in figures {
            let value =
                figure.value.map(FigureFormat.number)
                ?? (figure.pending ? "pending" : figure.notReachedWithin.map { "> " + FigureFormat.number($0) } ?? "—")
            let met = figure.meetsTarget.map { $0 ? "yes" : "NO" } ?? (figure.target == nil ? "" : "—")
            rows.append([figure.key, value, figure.unit, figure.target?.text ?? "", met, figure.note])
        }
        var widths = [Int](repeating: 0, count: rows[0].count)
        for row in rows {
            for (column, cell) in row.enumerated() where column < row.count - 1 {
                widths[column] = max(widths[column], cell.count)
            }
        }
        var lines: [String] = []
        for (index, row) in rows.enumerated() {
            var line = ""
            for (column, cell) in row.enumerated() {
                let isNumber = column == 1
                let width = widths[column]
                let padding = String(repeating: " ", count: max(0, width - cell.count))
                line += column == row.count - 1 ? cell : (isNumber ? padding + cell : cell + padding) + "  "
            }
            lines.append(line)
            if index == 0 { lines.append(String(repeating: "-", count: line.count)) }
        }
        var text = meta.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "\n")
        text += "\n\n" + lines.joined(separator: "\n") + "\n"
        if !scenarioSeconds.isEmpty {
            text += "\nscenario times: "
            text += scenarioSeconds.map { "\($0.0) \(String(format1: $0.1, decimals: 1)) s" }.joined(separator: ", ")
            text += "\n"
        }
        for figure in insaneFigures {
            text += "INSANE: \(figure.key) = \(figure.value.map { "\($0)" } ?? "missing")\n"
        }
        for failure in failures { text += "FAILED: \(failure)\n" }
        return text
    }

    /// One JSON object: every figure key with its number (or `null` when pending), then `meta`, `targets`,
    /// `pending`, `failures` and `scenario_seconds`.
    func json() throws -> String {
        var object: [String: Any] = [:]
        var targets: [String: Any] = [:]
        for figure in figures {
            if let value = figure.value, value.isFinite {
                object[figure.key] = value
            } else {
                object[figure.key] = NSNull()
            }
            if let target = figure.target {
                targets[figure.key] = [
                    "comparison": target.comparison.rawValue, "bound": target.bound,
                    "met": figure.meetsTarget.map { $0 as Any } ?? NSNull(),
                ]
            }
        }
        object["meta"] = meta
        object["targets"] = targets
        object["pending"] = figures.filter(\.pending).map(\.key)
        object["not_reached_within"] = Dictionary(
            uniqueKeysWithValues: figures.compactMap { figure in figure.notReachedWithin.map { (figure.key, $0) } })
        object["failures"] = failures + insaneFigures.map { "not finite and positive: \($0.key)" }
        object["units"] = Dictionary(uniqueKeysWithValues: figures.map { ($0.key, $0.unit) })
        object["scenario_seconds"] = Dictionary(scenarioSeconds, uniquingKeysWith: { $1 })
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
        return String(decoding: data, as: UTF8.self)
    }
}
