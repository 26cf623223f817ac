/// One measured number of the benchmark, under the key it has in the JSON output.
struct Figure: Sendable {
    /// The JSON key, e.g. `reports_per_s_1task`.
    let key: String
    /// The number; `nil` when it is not measured (see ``pending``).
    var value: Double?
    /// The unit shown in the table.
    let unit: String
    /// The goal of issue 7, when the figure has one.
    var target: Target?
    /// What was measured, for the table.
    var note: String
    /// Cannot be measured yet (the code it needs is being written on another branch): `null` in JSON, not a failure.
    var pending = false
    /// The event timed did not happen within this bound (the benchmark stopped waiting): `null` in JSON (with the
    /// bound under `not_reached_within`), `> bound` in the table; sane, since not reaching it is itself the finding.
    var notReachedWithin: Double?
    /// Zero is a sane value (a count of buffered graphs); every other figure must be positive.
    var allowsZero = false

    init(
        _ key: String, _ value: Double?, unit: String, target: Target? = nil, note: String = "", pending: Bool = false,
        allowsZero: Bool = false
    ) {
        self.key = key
        self.value = value
        self.unit = unit
        self.target = target
        self.note = note
        self.pending = pending
        self.allowsZero = allowsZero
    }

    /// A figure that cannot be measured yet, with the reason.
    static func pending(_ key: String, unit: String, target: Target?, reason: String) -> Figure {
        Figure(key, nil, unit: unit, target: target, note: reason, pending: true)
    }

    /// Whether the value is a number the benchmark can stand behind: finite, and positive (or zero where allowed).
    var isSane: Bool {
        guard let value else { return pending || notReachedWithin != nil }
        return value.isFinite && (value > 0 || (allowsZero && value == 0))
    }

    /// Whether the target is met; `nil` without a target or a value.
    var meetsTarget: Bool? {
        if value == nil, let target, let bound = notReachedWithin {
            // More than `bound`: a ceiling the bound already breaks is missed; otherwise it is unknown.
            return target.comparison != .atLeast && !target.isMet(by: bound) ? false : nil
        }
        guard let target, let value, value.isFinite else { return nil }
        return target.isMet(by: value)
    }
}
