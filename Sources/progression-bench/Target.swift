/// A goal for a figure: at least, at most, or below a bound.
struct Target: Sendable {
    enum Comparison: String, Sendable {
        case atLeast = ">="
        case atMost = "<="
        case below = "<"
    }

    let comparison: Comparison
    let bound: Double

    static func atLeast(_ bound: Double) -> Target { Target(comparison: .atLeast, bound: bound) }
    static func atMost(_ bound: Double) -> Target { Target(comparison: .atMost, bound: bound) }
    static func below(_ bound: Double) -> Target { Target(comparison: .below, bound: bound) }

    func isMet(by value: Double) -> Bool {
        switch comparison {
        case .atLeast: value >= bound
        case .atMost: value <= bound
        case .below: value < bound
        }
    }

    /// `>= 1,000,000`, for the table.
    var text: String { "\(comparison.rawValue) \(FigureFormat.number(bound))" }
}
