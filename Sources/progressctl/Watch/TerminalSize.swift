/// The size of a terminal in character cells.
struct TerminalSize: Sendable, Hashable, CustomStringConvertible {
    var rows: Int
    var columns: Int

    /// What is assumed when nothing tells the size: 24 × 80.
    static let fallback = TerminalSize(rows: 24, columns: 80)

    var description: String { "\(rows)×\(columns)" }
}
