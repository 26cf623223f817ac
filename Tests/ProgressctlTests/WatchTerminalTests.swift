import Foundation
import Progression
import ProgressionTestSupport
import Testing

@testable import progressctl

#if canImport(Glibc)
import Glibc
#endif

/// Enough of a terminal (ECMA-48 cursor moves and erases, xterm's private modes) to replay what `watch` writes,
/// and to notice what it must never do: write past the right edge (the line would wrap), move below the last row
/// (the screen would scroll), or send a sequence this screen does not know.
struct TerminalScreen {
    let rows: Int
    let columns: Int
    /// Each row's cells; the second cell of a wide character is "".
    private(set) var cells: [[String]]
    private var row = 0
    private var column = 0
    private(set) var problems: [String] = []
    /// The highest row (1-based) the cursor was moved to.
    private(set) var lowestRowUsed = 0

    init(rows: Int, columns: Int) {
        self.rows = rows
        self.columns = columns
        cells = Array(repeating: Array(repeating: " ", count: columns), count: rows)
    }

    /// The screen's rows as text, trailing spaces removed, empty rows at the bottom left out.
    var lines: [String] {
        var lines = cells.map { $0.joined().trimmingTrailingSpaces() }
        while lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }

    mutating func feed(_ text: String) {
        var scalars = Array(text.unicodeScalars)[...]
        while let scalar = scalars.popFirst() {
            switch scalar {
            case "\u{1B}":
                guard scalars.popFirst() == "[" else {
                    problems.append("an escape that is not a CSI sequence")
                    continue
                }
                var parameters = ""
                while let next = scalars.first, !(0x40...0x7E).contains(next.value) {
                    parameters.unicodeScalars.append(next)
                    scalars.removeFirst()
                }
                guard let final = scalars.popFirst() else { problems.append("a cut sequence"); return }
                control(parameters, final)
            case "\r":
                column = 0
            case "\n":
                row += 1
                if row >= rows {
                    problems.append("a line feed on the last row scrolls the screen")
                    row = rows - 1
                }
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    problems.append("a raw control character \(scalar.value)")
                    continue
                }
                put(scalar)
            }
        }
    }

    private mutating func put(_ scalar: Unicode.Scalar) {
        let width = TerminalWidth.width(of: scalar)
        if width == 0 {
            let previous = max(0, column - 1)
            cells[row][previous].unicodeScalars.append(scalar)
            return
        }
        guard column + width <= columns else {
            problems.append("row \(row + 1) is wider than \(columns) cells")
            return
        }
        cells[row][column] = String(scalar)
        if width == 2 { cells[row][column + 1] = "" }
        column += width
    }

    private mutating func control(_ parameters: String, _ final: Unicode.Scalar) {
        let numbers = parameters.split(separator: ";", omittingEmptySubsequences: false).map { Int($0) }
        switch (parameters.first, final) {
        case ("?", "h"), ("?", "l"):
            guard ["?1049", "?25", "?2026"].contains(parameters) else {
                problems.append("unknown mode \(parameters)")
                return
            }
        case (_, "m"):
            break
        case (_, "H"):
            let target = (numbers.first ?? nil) ?? 1
            guard target <= rows else {
                problems.append("the cursor moved to row \(target) of \(rows)")
                return
            }
            row = target - 1
            column = ((numbers.count > 1 ? numbers[1] : nil) ?? 1) - 1
            lowestRowUsed = max(lowestRowUsed, target)
        case (_, "K"):
            for index in column..<columns { cells[row][index] = " " }
        case (_, "J"):
            if parameters == "2" {
                cells = Array(repeating: Array(repeating: " ", count: columns), count: rows)
            } else {
                for index in column..<columns { cells[row][index] = " " }
                for below in (row + 1)..<max(row + 1, rows) {
                    cells[below] = Array(repeating: " ", count: columns)
                }
            }
        default:
            problems.append("unknown sequence \(parameters)\(final)")
        }
    }
}

/// What `watch` wrote on a terminal, split into its frames.
struct WatchRecording {
    static let beginFrame = "\u{1B}[?2026h"
    static let endFrame = "\u{1B}[?2026l"

    let output: String

    /// The complete frames, each the bytes between the start and the end of one synchronized update.
    var frames: [String] {
        output.components(separatedBy: Self.beginFrame).dropFirst().compactMap { chunk in
            chunk.range(of: Self.endFrame).map { String(chunk[..<$0.lowerBound]) }
        }
    }

    /// `frame` replayed on a blank screen of `rows` × `columns`.
    static func replay(_ frame: String, rows: Int, columns: Int) -> TerminalScreen {
        var screen = TerminalScreen(rows: rows, columns: columns)
        screen.feed(frame)
        return screen
    }
}

/// A job of 600 file steps written to the fixture's database: 2 running, 590 completed, 3 failed, 5 pending.
func insertSixHundredStepJob(into fixture: Fixture, id: String = "01a20337-07aa-7c1e-9f00-000000000001") async throws {
    var records = DashboardFixture.sixHundredFiles(id: id)
    for index in records.indices {
        records[index].createdAt = Date().addingTimeInterval(Double(index) / 1000 - 1)
        records[index].updatedAt = records[index].createdAt
        if records[index].status != .pending { records[index].startedAt = records[index].createdAt }
        if records[index].status.isFinished { records[index].finishedAt = records[index].createdAt }
    }
    try await fixture.store.insert(records, events: [])
}

@Suite struct WatchTerminalTests {
    @Test func framesAreDrawnFromTheTopWithoutScrollingAndRowsCleared() {
        let lines = ["full" + String(repeating: "x", count: 6), "short     ", "日本語    "]
        let frame = WatchTerminal.frame(lines, rows: 5)
        #expect(frame == "\u{1B}[?2026h" + "\u{1B}[1;1Hfullxxxxxx" + "\u{1B}[2;1Hshort\u{1B}[K"
            + "\u{1B}[3;1H日本語\u{1B}[K" + "\u{1B}[4;1H\u{1B}[J" + "\u{1B}[?2026l")
        let screen = WatchRecording.replay(frame, rows: 5, columns: 10)
        #expect(screen.problems.isEmpty, "\(screen.problems)")
        #expect(screen.lines == ["fullxxxxxx", "short", "日本語"])
        let exact = WatchTerminal.frame(["a", "b"], rows: 2)
        #expect(!exact.contains("\u{1B}[J"), "a frame as high as the screen clears nothing below it")
    }

    @Test func theSizeComesFromTheTerminalElseFromTheEnvironment() throws {
        let terminal = try PseudoTerminal(rows: 33, columns: 101)
        let slave = open(terminal.slavePath, O_RDWR | O_NOCTTY)
        try #require(slave >= 0)
        defer { close(slave) }
        let environment = ["LINES": "50", "COLUMNS": "120"]
        #expect(WatchTerminal.size(of: slave, environment: environment) == TerminalSize(rows: 33, columns: 101))
        let file = open("/dev/null", O_WRONLY)
        defer { close(file) }
        #expect(WatchTerminal.size(of: file, environment: environment) == TerminalSize(rows: 50, columns: 120))
        #expect(WatchTerminal.size(of: file, environment: ["COLUMNS": "132"]) == TerminalSize(rows: 24, columns: 132))
        #expect(WatchTerminal.size(of: file, environment: ["LINES": "0", "COLUMNS": "x"]) == .fallback)
    }

    @Test func aJobOfSixHundredStepsFitsA40By80TerminalInItsAlternateScreen() async throws {
        let fixture = try Fixture()
        try await insertSixHundredStepJob(into: fixture)
        let terminal = try PseudoTerminal(rows: 40, columns: 80)
        let watch = try terminal.start(["--db", fixture.path, "watch"])
        #expect(await terminal.waitForOutput { WatchRecording(output: $0).frames.count >= 1 }, "\(terminal.output)")
        #expect(terminal.output.hasPrefix("\u{1B}[?1049h\u{1B}[?25l"), "enters the alternate screen first")

        // The root moves on at each check until its row shows a rate and a time left.
        var progress = 0.49
        let rated = await terminal.waitForOutput { output in
            progress = min(0.95, progress + 0.002)
            try? await fixture.report(
                "01a20337-07aa-7c1e-9f00-000000000001", progress, step: "hashing file-591.bin", rate: 0.093)
            guard let frame = WatchRecording(output: output).frames.last else { return false }
            let lines = WatchRecording.replay(frame, rows: 40, columns: 80).lines
            return lines.count > 1 && lines[1].contains(/\d%\/(s|min) +\d+(s|m\d\ds)  hashing/)
        }
        #expect(rated, "\(terminal.output.suffix(3000))")

        let frames = WatchRecording(output: terminal.output).frames
        for frame in frames {
            let screen = WatchRecording.replay(frame, rows: 40, columns: 80)
            #expect(screen.problems.isEmpty, "\(screen.problems)")
            #expect(screen.lowestRowUsed <= 40)
            let lines = screen.lines
            #expect(lines.count <= 40 && lines.count >= 3, "\(lines)")
            #expect(lines[0].hasPrefix("3 running · 5 pending · 590 completed · 3 failed"), "\(lines)")
            #expect(lines[1].hasPrefix("checksum /data") && lines[1].contains("running  01a20337"), "\(lines)")
            #expect(lines.contains("  590 completed · 3 failed · 5 pending"), "\(lines)")
        }
        let last = WatchRecording.replay(try #require(frames.last), rows: 40, columns: 80).lines
        if let path = ProcessInfo.processInfo.environment["PROGRESSCTL_WATCH_FRAME"] {
            // For the README: the last frame as a person sees it.
            try last.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        }

        // A smaller window: the next frames fit it.
        let before = terminal.outputBytes.count
        try terminal.resize(rows: 6, columns: 50)
        watch.signal(SIGWINCH)
        let resized = await terminal.waitForOutput { output in
            let fresh = String(decoding: Array(output.utf8).dropFirst(before), as: UTF8.self)
            return WatchRecording(output: fresh).frames.contains { frame in
                let screen = WatchRecording.replay(frame, rows: 6, columns: 50)
                return screen.problems.isEmpty && screen.lines.count == 6
            }
        }
        #expect(resized, "\(terminal.output.suffix(2000))")
        let small = WatchRecording(output: String(decoding: terminal.outputBytes.dropFirst(before), as: UTF8.self))
        let smallScreen = WatchRecording.replay(try #require(small.frames.last), rows: 6, columns: 50)
        #expect(smallScreen.lines.first?.hasPrefix("3 running") == true, "\(smallScreen.lines)")
        #expect(smallScreen.lines.last?.hasPrefix("… ") == true, "\(smallScreen.lines)")

        // Ctrl-C: the terminal is given back as it was.
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit(timeout: .seconds(120)) == 130)
        #expect(await terminal.waitForOutput { $0.hasSuffix("\u{1B}[?25h\u{1B}[?1049l") }, "\(terminal.output.suffix(200))")
        #expect(!terminal.output.contains("\n"), "nothing is written outside the frames")
    }

    @Test func colourUnlessNoColorIsSet() async throws {
        let fixture = try Fixture()
        try await fixture.root("c1", status: .running, progress: 0.5)
        for noColor in [nil, "1"] {
            let terminal = try PseudoTerminal(rows: 10, columns: 60)
            let environment = noColor.map { ["NO_COLOR": $0] } ?? [:]
            let watch = try terminal.start(["--db", fixture.path, "watch"], environment: environment)
            #expect(await terminal.waitForOutput { WatchRecording(output: $0).frames.count >= 1 })
            let frame = try #require(WatchRecording(output: terminal.output).frames.first)
            #expect(frame.contains("\u{1B}[36mrunning\u{1B}[0m") == (noColor == nil), "\(frame)")
            #expect(
                (frame.range(of: "\u{1B}\\[[0-9;]*m", options: .regularExpression) != nil) == (noColor == nil),
                "\(frame)")
            watch.signal(SIGTERM)
            #expect(try await watch.waitForExit(timeout: .seconds(120)) == 143)
            terminal.close()
        }
    }

    @Test func untilDoneLeavesTheLastFrameOnTheNormalScreen() async throws {
        let fixture = try Fixture()
        try await fixture.root("last", name: "nightly import", status: .running, progress: 0.5)
        let terminal = try PseudoTerminal(rows: 10, columns: 60)
        let watch = try terminal.start(["--db", fixture.path, "watch", "--until-done"])
        #expect(await terminal.waitForOutput { WatchRecording(output: $0).frames.count >= 1 })
        var record = try #require(try await fixture.store.task(id: "last"))
        record.status = .completed
        record.progress = 1
        record.finishedAt = Date()
        record.updatedAt = Date()
        try await fixture.store.apply(TaskBatch(records: [record])).checkApplied()
        #expect(try await watch.waitForExit(timeout: .seconds(120)) == 0)
        let output = terminal.output
        let after = try #require(output.range(of: "\u{1B}[?1049l")).upperBound
        let summary = output[after...].split(separator: "\r\n").map {
            $0.replacingOccurrences(of: "\u{1B}\\[[0-9;]*m", with: "", options: .regularExpression)
        }
        #expect(summary.count == 2, "\(summary)")
        #expect(summary.last?.hasPrefix("nightly import") == true && summary.last?.contains("completed") == true, "\(summary)")
    }

    @Test func aDeletedDatabaseEndsItAfterItGaveTheTerminalBack() async throws {
        let fixture = try Fixture()
        try await fixture.root("d1", status: .running, progress: 0.4)
        let terminal = try PseudoTerminal(rows: 10, columns: 60)
        let watch = try terminal.start(["--db", fixture.path, "watch"])
        #expect(await terminal.waitForOutput { WatchRecording(output: $0).frames.count >= 1 })
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: fixture.path + suffix) }
        #expect(try await watch.waitForExit(timeout: .seconds(120)) == 1)
        let output = terminal.output
        let after = try #require(output.range(of: "\u{1B}[?1049l")).upperBound
        #expect(
            output[after...] == "progressctl: error: the database '\(fixture.path)' was deleted while watching\r\n",
            "\(output[after...])")
    }
}

extension TaskBatchResult {
    /// Fails when the batch was not applied whole.
    func checkApplied() {
        #expect(rejectedTaskIDs.isEmpty && conflictingTaskIDs.isEmpty, "\(self)")
    }
}
