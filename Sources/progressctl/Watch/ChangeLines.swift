import Foundation
import Progression
import ProgressionOperator

/// What `watch` prints when stdout is not a terminal: one line for each watched root whose status, percent or
/// step changed since it was last printed (every node's with `all`), as text or as one JSON object per line.
///
/// A text line is `id status percent step` (for a waiting job, what it waits for: `for 3 child jobs`), followed by
/// `rate R eta T` when the rate is known, e.g.
/// `01a20337 running 42% parse rate 12%/min eta 4m50s`. Control characters in the step are escaped, so a line is
/// always one line.
struct ChangeLines {
    /// One JSON object per line instead of text.
    let json: Bool
    /// Lines for every node of the trees, not only for the roots.
    let all: Bool
    /// What was last printed for each task: status, percent and step.
    private var printed: [String: String] = [:]

    init(json: Bool, all: Bool) {
        self.json = json
        self.all = all
    }

    /// The lines for what changed in `trees` (each a tree, root first) since the last call, roots oldest first.
    mutating func lines(for trees: [[TaskRecord]], rates: ProgressRates) -> [String] {
        let ordered = trees.sorted { ($0[0].createdAt, $0[0].id) < ($1[0].createdAt, $1[0].id) }
        var lines: [String] = []
        for tree in ordered {
            for (index, node) in tree.enumerated() where all || index == 0 {
                let state = "\(node.displayStatus)|\(Format.percent(node.progress))|\(Self.step(of: node) ?? "")"
                guard printed[node.id] != state else { continue }
                printed[node.id] = state
                let rate = index == 0 ? rates.rate(of: node) : nil
                let timeLeft = index == 0 ? rates.timeLeft(of: node) : nil
                lines.append(json ? Self.jsonLine(node, rate: rate, timeLeft: timeLeft)
                    : Self.textLine(node, rate: rate, timeLeft: timeLeft))
            }
        }
        return lines
    }

    /// The step a line shows: what a waiting job waits for (`for 3 child jobs`), else its step.
    static func step(of node: TaskRecord) -> String? {
        node.waitReason == .waiting ? Format.wait(node) : node.step
    }

    /// `id status percent step`, and `rate R eta T` when the rate is known.
    static func textLine(_ node: TaskRecord, rate: Double?, timeLeft: TimeInterval?) -> String {
        var fields = [node.id, node.displayStatus, Format.percent(node.progress), step(of: node) ?? "-"]
        if rate != nil { fields += ["rate", Format.rate(rate), "eta", Format.timeLeft(timeLeft)] }
        return TerminalWidth.printable(fields.joined(separator: " "))
    }

    /// The task as `--json` shows it, with `rate` (progress per second, a fraction of the whole) and `eta`
    /// (seconds left), `null` when unknown, on one line.
    static func jsonLine(_ node: TaskRecord, rate: Double?, timeLeft: TimeInterval?) -> String {
        let encoder = JSONOutput.encoder(pretty: false)
        let document = Document(task: TaskJSON(node), rate: rate, eta: timeLeft)
        let data = (try? encoder.encode(document)) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// A task's fields and the rate and time left, in one object.
    struct Document: Encodable {
        var task: TaskJSON
        var rate: Double?
        var eta: TimeInterval?

        private enum CodingKeys: String, CodingKey { case rate, eta }

        func encode(to encoder: any Encoder) throws {
            try task.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(rate, forKey: .rate)
            try container.encode(eta, forKey: .eta)
        }
    }
}
