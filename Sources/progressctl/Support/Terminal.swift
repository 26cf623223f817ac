import ArgumentParser
import Foundation
import Progression
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writing to the terminal: stdout for people and JSON, stderr for diagnostics, colour only when asked for.
///
/// Every write goes straight to the descriptor with `write(2)`, whole, retried when interrupted. SIGPIPE is ignored
/// (``ignoreBrokenPipes()``), so a reader that went away (`progressctl watch | head -3`) shows up as `EPIPE`: stdout's
/// is a reason to stop quietly (status 0, nothing on stderr), stderr's is ignored.
enum Terminal {
    /// Whether stdout is a terminal (colour and redraws are used only then).
    static let isInteractive: Bool = isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"

    /// Whether stdin is a terminal too, so that a question can be asked and answered (``confirm(_:)``).
    static var canAsk: Bool { isInteractive && isatty(STDIN_FILENO) == 1 }

    /// When to colour output: `--color`.
    enum ColorMode: String, CaseIterable, ExpressibleByArgument, Sendable {
        /// When stdout is a terminal (not `TERM=dumb`) and `NO_COLOR` is unset or empty.
        case auto
        case always
        case never
    }

    /// The mode in force: `--color`, which `main` sets once the command line is parsed.
    private static let colorMode = Mutex(ColorMode.auto)

    /// Sets when to colour (``Progressctl/main()`` calls it with `--color` before the command runs).
    static func setColor(_ mode: ColorMode) {
        colorMode.withLock { $0 = mode }
    }

    /// Whether output is coloured: `--color always`; never with `--color never`; with `auto`, when stdout is a
    /// terminal and `NO_COLOR` is not set to a non-empty value (https://no-color.org).
    static var usesColor: Bool {
        switch colorMode.withLock({ $0 }) {
        case .always: return true
        case .never: return false
        case .auto:
            let noColor = ProcessInfo.processInfo.environment["NO_COLOR"].map { !$0.isEmpty } ?? false
            return isInteractive && !noColor
        }
    }

    /// Ignores SIGPIPE for the whole process: a closed pipe then fails the write with `EPIPE`, which ``write(_:)``
    /// turns into a quiet exit, instead of killing the process (status 141) half-way through a change.
    static func ignoreBrokenPipes() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// Writes a line to stdout at once, so that a reader on a pipe sees it.
    static func output(_ line: String) {
        write(line + "\n")
    }

    /// Writes text to stdout as it is. A reader that went away ends the process quietly with status 0; another
    /// failure (a full disk) ends it with one line on stderr and status 1.
    static func write(_ text: String) {
        let error = writeAll(text, to: STDOUT_FILENO)
        guard error != 0 else { return }
        if error == EPIPE { Foundation.exit(0) }
        standardError("progressctl: error: cannot write to stdout: \(String(cString: strerror(error)))")
        Foundation.exit(1)
    }

    /// Writes a line to stderr, its control characters escaped (diagnostics quote names and paths). A failure to
    /// write there is ignored: there is nowhere left to report it.
    static func standardError(_ line: String) {
        _ = writeAll(line.escapedForTerminal + "\n", to: STDERR_FILENO)
    }

    /// Writes the whole of `text` to `descriptor`, retrying interrupted and partial writes; returns 0, or the errno
    /// of the write that failed.
    private static func writeAll(_ text: String, to descriptor: Int32) -> Int32 {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBytes { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return 0 }
            var offset = 0
            while offset < buffer.count {
                let written = systemWrite(descriptor, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += written
            }
            return 0
        }
    }

    /// Asks `question` on the terminal and reads the answer from stdin: `true` for `y` or `yes` (any case), `false`
    /// for anything else or the end of input.
    static func confirm(_ question: String) -> Bool {
        write(question + " [y/N] ")
        guard let answer = readLine(strippingNewline: true) else {
            output("")
            return false
        }
        return ["y", "yes"].contains(answer.trimmingCharacters(in: .whitespaces).lowercased())
    }

    enum Color: String {
        case red = "31", green = "32", yellow = "33", blue = "34", cyan = "36", dim = "2", bold = "1"
    }

    /// `text` in `color` when output is coloured (``usesColor``), else as it is.
    static func paint(_ text: String, _ color: Color?) -> String {
        guard let color, usesColor else { return text }
        return "\u{1B}[\(color.rawValue)m\(text)\u{1B}[0m"
    }
}

/// The C library's `write(2)` (the name `write` is taken by ``Terminal/write(_:)`` inside `Terminal`).
private func systemWrite(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    write(descriptor, buffer, count)
}
