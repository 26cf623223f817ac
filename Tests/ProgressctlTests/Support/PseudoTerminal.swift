import Foundation
import ProgressionTestSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A pseudo-terminal of a given size on which a child process runs as on a person's terminal: its stdin, stdout and
/// stderr are the terminal (the slave side); the test reads what it writes from the master side.
final class PseudoTerminal: Sendable {
    /// The master side's descriptor; closed by ``close()``.
    let master: Int32
    /// The slave side's device path, e.g. `/dev/pts/3`.
    let slavePath: String
    private let state = Mutex(State())

    private struct State {
        var output: [UInt8] = []
        var readerEnded = false
        var closing = false
    }

    /// Opens a pseudo-terminal of `rows` × `columns` and starts reading its output.
    init(rows: Int, columns: Int) throws {
        // Neither end is inherited by children that other tests spawn meanwhile (`O_CLOEXEC`): a copy of the child's
        // end held elsewhere would keep the terminal open after the child ends (see `ChildProcess.pipe()`).
        let master = PTY.openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw PseudoTerminalError("posix_openpt", errno) }
        var name = [CChar](repeating: 0, count: 128)
        guard PTY.grantpt(master) == 0, PTY.unlockpt(master) == 0, PTY.ptsname_r(master, &name, name.count) == 0
        else {
            let error = errno
            Glibc.close(master)
            throw PseudoTerminalError("grantpt, unlockpt or ptsname_r", error)
        }
        self.master = master
        slavePath = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        try resize(rows: rows, columns: columns)
        startReading()
    }

    deinit {
        close()
    }

    /// Sets the terminal's size (`TIOCSWINSZ`), as a terminal window does when it is resized.
    func resize(rows: Int, columns: Int) throws {
        var size = winsize(ws_row: UInt16(rows), ws_col: UInt16(columns), ws_xpixel: 0, ws_ypixel: 0)
        guard ioctl(master, UInt(TIOCSWINSZ), &size) == 0 else { throw PseudoTerminalError("TIOCSWINSZ", errno) }
    }

    /// Everything the child wrote so far, as bytes.
    var outputBytes: [UInt8] { state.withLock { $0.output } }

    /// Everything the child wrote so far, as text (invalid UTF-8 repaired).
    var output: String { String(decoding: outputBytes, as: UTF8.self) }

    /// Starts `arguments` of the built `progressctl` on this terminal, with `environment` added to this process's.
    func start(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
        let slave = open(slavePath, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard slave >= 0 else { throw PseudoTerminalError("open \(slavePath)", errno) }
        let handle = FileHandle(fileDescriptor: slave, closeOnDealloc: true)
        defer { try? handle.close() }
        let terminal: [String: String?] = ["PROGRESSION_DB": nil, "NO_COLOR": nil, "TERM": "xterm-256color"]
        return try ChildProcess(
            try CLI.requireBinary(), arguments, output: .handles(stdout: handle, stderr: handle),
            environment: terminal.merging(environment.mapValues { $0 }) { _, new in new }, input: .handle(handle))
    }

    /// Types `text` on the terminal, as a person at its keyboard would: the child reads it from its stdin.
    func type(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(master, $0.baseAddress, $0.count) }
    }

    /// Waits until the output so far satisfies `condition`, at most `timeout`; returns whether it did.
    func waitForOutput(timeout: Duration = .seconds(120), _ condition: (String) async -> Bool) async -> Bool {
        await eventually(timeout: timeout) { await condition(output) }
    }

    /// Stops reading and closes the master side.
    func close() {
        let wasOpen = state.withLock { state -> Bool in
            guard !state.closing else { return false }
            state.closing = true
            return true
        }
        guard wasOpen else { return }
        // The reader polls with a short timeout and stops once `closing` is set; close after it stopped.
        let deadline = ContinuousClock.now + .seconds(2)
        while !state.withLock({ $0.readerEnded }), ContinuousClock.now < deadline {
            usleep(5_000)
        }
        Glibc.close(master)
    }

    private func startReading() {
        let master = master
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while !state.withLock({ $0.closing }) {
                var descriptor = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, 50)
                if ready < 0, errno == EINTR { continue }
                if ready <= 0 { continue }
                let count = read(master, &buffer, buffer.count)
                if count > 0 {
                    state.withLock { $0.output += buffer[0..<count] }
                } else if count < 0, errno == EINTR || errno == EAGAIN {
                    continue
                } else {
                    // EIO: no process has the slave side open any more. Wait for close().
                    usleep(20_000)
                }
            }
            state.withLock { $0.readerEnded = true }
        }
        thread.start()
    }
}

/// A failed pseudo-terminal call with its errno.
struct PseudoTerminalError: Error, CustomStringConvertible {
    var call: String
    var code: Int32

    init(_ call: String, _ code: Int32) {
        self.call = call
        self.code = code
    }

    var description: String { "\(call) failed: \(String(cString: strerror(code)))" }
}

/// The C library's pseudo-terminal calls. Glibc's Swift module leaves them out (they are declared only for
/// `_XOPEN_SOURCE`), so they are looked up by name in the C library this process has loaded.
private enum PTY {
    static let openpt = function("posix_openpt", as: (@convention(c) (Int32) -> Int32).self)
    static let grantpt = function("grantpt", as: (@convention(c) (Int32) -> Int32).self)
    static let unlockpt = function("unlockpt", as: (@convention(c) (Int32) -> Int32).self)
    static let ptsname_r = function(
        "ptsname_r", as: (@convention(c) (Int32, UnsafeMutablePointer<CChar>, Int) -> Int32).self)

    private static func function<T>(_ name: String, as type: T.Type) -> T {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), name) else {
            fatalError("\(name) is not in the C library")
        }
        return unsafeBitCast(symbol, to: type)
    }
}
