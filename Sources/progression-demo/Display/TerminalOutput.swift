import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writing to stdout: a block of lines redrawn in place when stdout is a terminal, plain lines otherwise.
final class TerminalOutput {
    let isTerminal: Bool
    private var drawnLines = 0

    init() {
        isTerminal = isatty(STDOUT_FILENO) == 1
    }

    /// The terminal's width in columns (100 when unknown).
    var columns: Int {
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 20 { return Int(size.ws_col) }
        return 100
    }

    /// Replaces the block drawn last with `lines` (terminal only).
    func redraw(_ lines: [String]) {
        var text = ""
        if drawnLines > 0 { text += "\u{1B}[\(drawnLines)F" }  // to the start of the block
        for line in lines { text += "\u{1B}[2K" + line + "\n" }
        text += "\u{1B}[J"  // clear what the last block had below
        drawnLines = lines.count
        write(text)
    }

    /// Ends the live block: what follows is printed below it.
    func endBlock() {
        drawnLines = 0
    }

    /// Prints one line.
    func line(_ text: String) {
        write(text + "\n")
    }

    func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}

/// Formatting helpers for the display.
enum Format {
    /// "12.3 MB" (10⁶ bytes, as the sample size).
    static func megabytes(_ bytes: Int64) -> String {
        String(format: "%.1f MB", Double(bytes) / 1_000_000)
    }

    /// A bar of `width` cells.
    static func bar(_ fraction: Double?, width: Int) -> String {
        guard let fraction else { return String(repeating: "·", count: width) }
        let filled = Int((min(max(fraction, 0), 1) * Double(width)).rounded(.down))
        return String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
    }

    static func percent(_ fraction: Double?) -> String {
        guard let fraction else { return "  ?%" }
        let value = Int((fraction * 100).rounded(.down))
        return String(repeating: " ", count: max(0, 3 - String(value).count)) + "\(value)%"
    }

    /// `text` cut or padded to `width` characters (cut in the middle, keeping the file name's end).
    static func fit(_ text: String, _ width: Int) -> String {
        if text.count <= width { return text + String(repeating: " ", count: width - text.count) }
        guard width > 3 else { return String(text.prefix(width)) }
        let tail = (width - 1) / 2
        return String(text.prefix(width - 1 - tail)) + "…" + String(text.suffix(tail))
    }

    static func duration(_ seconds: Double) -> String {
        seconds < 60 ? String(format: "%.1f s", seconds) : String(format: "%d min %02d s", Int(seconds) / 60, Int(seconds) % 60)
    }
}
