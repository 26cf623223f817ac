import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The terminal the dashboard is drawn on: its size, its alternate screen, the signals that concern it, and raw
/// writes of whole frames to stdout.
///
/// The dashboard lives in the alternate screen, so the scrollback stays as it was: ``enter()`` switches to it,
/// hides the cursor and stops the terminal echoing keys (they would land in the frame); ``leave()`` undoes all
/// three and is safe to call more than once. Each frame is drawn from the top, row by row with absolute cursor
/// positions, each row cleared to its end and the rows below the frame cleared, inside a synchronized update
/// (DEC mode 2026) so terminals that know it show no half-drawn frame.
final class WatchTerminal {
    private var savedInput: termios?
    private(set) var isEntered = false

    init() {}

    deinit {
        leave()
    }

    /// The size of the terminal on `descriptor` (`TIOCGWINSZ`), else `$LINES` × `$COLUMNS`, else 24 × 80 (each
    /// of the two on its own).
    static func size(
        of descriptor: Int32 = STDOUT_FILENO, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> TerminalSize {
        var window = winsize()
        if ioctl(descriptor, UInt(TIOCGWINSZ), &window) == 0, window.ws_row > 0, window.ws_col > 0 {
            return TerminalSize(rows: Int(window.ws_row), columns: Int(window.ws_col))
        }
        func positive(_ name: String) -> Int? {
            environment[name].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.flatMap { $0 > 0 ? $0 : nil }
        }
        return TerminalSize(
            rows: positive("LINES") ?? TerminalSize.fallback.rows,
            columns: positive("COLUMNS") ?? TerminalSize.fallback.columns)
    }

    /// Switches to the alternate screen, clears it, hides the cursor and turns off the echo of typed keys.
    func enter() {
        guard !isEntered else { return }
        isEntered = true
        if isatty(STDIN_FILENO) == 1 {
            var settings = termios()
            if tcgetattr(STDIN_FILENO, &settings) == 0 {
                savedInput = settings
                settings.c_lflag &= ~tcflag_t(ECHO)
                _ = tcsetattr(STDIN_FILENO, TCSANOW, &settings)
            }
        }
        Self.send(Escape.enterAlternateScreen + Escape.hideCursor + Escape.home + Escape.clearScreen)
    }

    /// Shows the cursor, leaves the alternate screen (the terminal shows what it showed before) and restores the
    /// echo. Does nothing when not entered.
    func leave() {
        guard isEntered else { return }
        isEntered = false
        Self.send(Escape.showCursor + Escape.leaveAlternateScreen)
        if var settings = savedInput {
            _ = tcsetattr(STDIN_FILENO, TCSANOW, &settings)
            savedInput = nil
        }
    }

    /// Draws `lines` (each at most `size.columns` cells, see ``Dashboard/render(_:size:now:color:)``) from the top
    /// of the screen and clears what is below them.
    func draw(_ lines: [String], size: TerminalSize) {
        Self.send(Self.frame(lines, rows: size.rows))
    }

    /// The bytes that draw `lines` on a screen of `rows` rows. A row's trailing spaces are not written but cleared;
    /// nothing is written past the last row, so the screen never scrolls.
    static func frame(_ lines: [String], rows: Int) -> String {
        var text = Escape.beginSynchronizedUpdate
        for (index, line) in lines.prefix(rows).enumerated() {
            var row = Substring(line)
            while row.last == " " { row.removeLast() }
            text += Escape.moveTo(row: index + 1) + row
            if row.count < line.count { text += Escape.clearToEndOfLine }
        }
        if lines.count < rows { text += Escape.moveTo(row: lines.count + 1) + Escape.clearBelow }
        return text + Escape.endSynchronizedUpdate
    }

    /// Writes `text` to stdout whole, as it is, retrying interrupted and partial writes.
    static func send(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                write(STDOUT_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written > 0 {
                offset += written
            } else if written < 0, errno == EINTR || errno == EAGAIN {
                continue
            } else {
                return
            }
        }
    }

    /// The escape sequences used (ECMA-48 and xterm's private modes).
    enum Escape {
        static let enterAlternateScreen = "\u{1B}[?1049h"
        static let leaveAlternateScreen = "\u{1B}[?1049l"
        static let hideCursor = "\u{1B}[?25l"
        static let showCursor = "\u{1B}[?25h"
        static let home = "\u{1B}[H"
        static let clearScreen = "\u{1B}[2J"
        static let clearToEndOfLine = "\u{1B}[K"
        static let clearBelow = "\u{1B}[J"
        static let beginSynchronizedUpdate = "\u{1B}[?2026h"
        static let endSynchronizedUpdate = "\u{1B}[?2026l"

        /// To the first column of `row` (1 is the top).
        static func moveTo(row: Int) -> String { "\u{1B}[\(row);1H" }
    }
}

/// Signals turned into events: each one named here is taken from its default action (ending or stopping the
/// process) and delivered to ``events`` instead, until ``cancel()``, which restores the default actions.
final class WatchSignals {
    /// The signals received, in order.
    let events: AsyncStream<Int32>
    private let sources: [any DispatchSourceSignal]
    private let signals: [Int32]
    private let continuation: AsyncStream<Int32>.Continuation

    init(_ signals: [Int32]) {
        let (events, continuation) = AsyncStream.makeStream(of: Int32.self, bufferingPolicy: .unbounded)
        self.events = events
        self.continuation = continuation
        self.signals = signals
        let queue = DispatchQueue(label: "progressctl.watch.signals")
        sources = signals.map { number in
            // Ignored, so that the default action does not run; the source still sees it arrive.
            _ = signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
    }

    /// Stops delivering signals and gives each its default action back.
    func cancel() {
        for source in sources { source.cancel() }
        for number in signals { _ = signal(number, SIG_DFL) }
        continuation.finish()
    }

    deinit {
        cancel()
    }
}
