import Foundation
import Progression

#if canImport(Glibc)
import Glibc
#endif

/// Writing to the terminal: stdout for people and JSON, stderr for diagnostics, colour only on a terminal.
enum Terminal {
    /// Whether stdout is a terminal (colour and redraws are used only then).
    static let isInteractive: Bool = isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"

    /// Writes a line to stdout and flushes it, so that a reader on a pipe sees it at once.
    static func output(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Writes text to stdout as it is.
    static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Writes a line to stderr, its control characters escaped (diagnostics quote names and paths).
    static func standardError(_ line: String) {
        FileHandle.standardError.write(Data((line.escapedForTerminal + "\n").utf8))
    }

    enum Color: String {
        case red = "31", green = "32", yellow = "33", blue = "34", cyan = "36", dim = "2", bold = "1"
    }

    /// `text` in `color` when stdout is a terminal, else as it is.
    static func paint(_ text: String, _ color: Color?) -> String {
        guard isInteractive, let color else { return text }
        return "\u{1B}[\(color.rawValue)m\(text)\u{1B}[0m"
    }
}
