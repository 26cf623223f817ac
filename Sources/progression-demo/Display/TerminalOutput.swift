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
    /// Stdout is gone (a closed pipe): nothing more is written.
    private var closed = false

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

    /// Writes `text` whole with `write(2)`, retried when interrupted. Once stdout is gone (a closed pipe: `EPIPE`, with
    /// SIGPIPE ignored) nothing more is written and the run goes on.
    func write(_ text: String) {
        guard !closed else { return }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                closed = true
                return
            }
            bytes = bytes.dropFirst(written)
        }
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

    /// "1m05s left", "12s left".
    static func timeLeft(_ duration: Duration) -> String {
        let seconds = Int(duration.components.seconds)
        return seconds >= 60 ? String(format: "%dm%02ds left", seconds / 60, seconds % 60) : "\(seconds)s left"
    }

    /// "14:02:07".
    static func clock(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        return formatter.string(from: date)
    }

    static func duration(_ seconds: Double) -> String {
        seconds < 60 ? String(format: "%.1f s", seconds) : String(format: "%d min %02d s", Int(seconds) / 60, Int(seconds) % 60)
    }
}
