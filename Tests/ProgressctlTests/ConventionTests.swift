import Foundation
import Progression
import ProgressionTestSupport
import Testing

@testable import progressctl
import ProgressionOperator

/// The conventions of issue 14: `--version`, `NO_COLOR` and `--color`, JSON times with milliseconds and `null` for
/// every absent field, tables aligned in terminal cells, and usage errors for bad values.
@Suite struct ConventionTests {
    @Test func versionPrintsThePackageVersion() async throws {
        let directory = try TemporaryDirectory()
        let result = try await CLI.run(["--version"], in: directory)
        #expect(result.status == 0)
        #expect(result.stdout == ProgressionVersion.current + "\n")
        #expect(result.stdout.wholeMatch(of: /\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?\n/) != nil)
    }

    // MARK: Colour

    /// A failed task's status is red when colour is on.
    static let red = "\u{1B}[31mfailed\u{1B}[0m"

    @Test(arguments: [
        ([String: String](), [String](), true),
        (["NO_COLOR": "1"], [], false),
        (["NO_COLOR": ""], [], true),
        (["NO_COLOR": "1"], ["--color", "always"], true),
        ([:], ["--color", "never"], false),
        ([:], ["--color=auto"], true),
    ])
    func colourOnATerminal(environment: [String: String], flags: [String], coloured: Bool) async throws {
        let fixture = try Fixture()
        try await fixture.root("f-1", status: .failed)
        let commands: [([String], String)] = [
            (["list"], "1 of 1 task"), (["show", "f-1"], "finished"), (["history", "f-1"], "failed"),
            (["stats"], "database size:"),
        ]
        for (command, marker) in commands {
            let terminal = try PseudoTerminal(rows: 24, columns: 120)
            defer { terminal.close() }
            let process = try terminal.start(["--db", fixture.path] + flags + command, environment: environment)
            #expect(try await process.waitForExit(timeout: .seconds(120)) == 0)
            #expect(await terminal.waitForOutput { $0.contains(marker) }, "\(command): \(terminal.output)")
            let output = terminal.output
            #expect(output.contains(Self.red) == coloured, "\(command) \(flags) \(environment): \(output)")
            #expect(output.contains("\u{1B}[") == coloured, "\(command) \(flags) \(environment)")
        }
    }

    @Test func colourOffATerminalOnlyWhenAskedFor() async throws {
        let fixture = try Fixture()
        try await fixture.root("f-1", status: .failed)
        #expect(!(try await fixture.run(["list"]).stdout.contains("\u{1B}[")))
        #expect(try await fixture.run(["list", "--color", "always"]).stdout.contains(Self.red))
        #expect(try await fixture.run(["--color", "always", "show", "f-1"]).stdout.contains(Self.red))
        #expect(!(try await fixture.run(["list", "--color", "always", "--json"]).stdout.contains("\u{1B}[")))
        let bad = try await fixture.run(["list", "--color", "sometimes"])
        #expect(bad.status == 64 && bad.stderr.contains("sometimes"))
    }

    // MARK: JSON

    /// `2026-05-28T20:26:40.123Z`.
    static var millisecondTime: Regex<Substring> { /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/ }

    @Test func jsonTimesHaveMilliseconds() async throws {
        let fixture = try Fixture()
        let created = fixture.start.addingTimeInterval(0.25)
        try await fixture.root("t-1", status: .failed, createdAt: created, finishedAt: created.addingTimeInterval(1.5))
        try await fixture.owner("service", alive: true)
        for command in [["list"], ["show", "t-1"], ["history", "t-1"], ["doctor"]] {
            let result = try await fixture.run(command + ["--json"])
            #expect(result.status == 0, "\(command): \(result.stderr)")
            let times = result.stdout.matches(of: Self.millisecondTime).map { String($0.output) }
            #expect(!times.isEmpty, "\(command): \(result.stdout)")
            #expect(!result.stdout.contains(/:\d{2}Z"/), "\(command): a time without milliseconds")
        }
        let list = try decodeJSON([TaskDocument].self, from: try await fixture.run(["list", "--json"]).stdout)
        let first = try #require(list.first)
        #expect(abs(first.createdAt.timeIntervalSince(created)) < 0.0005)
        #expect(abs(try #require(first.finishedAt).timeIntervalSince(created.addingTimeInterval(1.5))) < 0.0005)
        #expect(try await fixture.run(["list", "--json"]).stdout.contains("\"createdAt\" : \"2026-05-28T20:26:40.250Z\""))
    }

    @Test func absentFieldsAreNullNeverMissing() async throws {
        let fixture = try Fixture()
        try await fixture.root("c-1", kind: nil, status: .running)
        try await fixture.owner("service", alive: true)

        let stats = try #require(try jsonObjects(try await fixture.run(["stats", "--json"]).stdout).first)
        #expect(stats.isNull("oldestPendingCreatedAt"), "nothing pending: null, not a missing key")
        #expect(stats.isNull("failureRate"), "nothing finished")

        let doctor = try #require(try jsonObjects(try await fixture.run(["doctor", "--json"]).stdout).first)
        let owner = try #require((doctor["owners"] as? [[String: Any]])?.first)
        #expect(owner.isNull("stoppedAt"))

        let list = try #require(try jsonObjects(try await fixture.run(["list", "--json"]).stdout).first)
        for key in ["parentID", "kind", "progress", "total", "rate", "secondsRemaining", "step", "errorType", "errorDescription", "ownerID", "input", "result",
                    "idempotencyKey", "depth", "finishedAt", "nextAttemptAt"] {
            #expect(list.isNull(key), "list: \(key)")
        }

        let history = try #require(try jsonObjects(try await fixture.run(["history", "c-1", "--json"]).stdout).first)
        for key in ["progress", "message", "errorType"] { #expect(history.isNull(key), "history: \(key)") }
        #expect(history["taskName"] as? String == "task c-1")

        let cancelled = try #require(try jsonObjects(try await fixture.run(["cancel", "c-1", "--json"]).stdout).first)
        #expect(cancelled.isNull("ownerID"))
        let submitted = try #require(
            try jsonObjects(try await fixture.run(["submit", "--allow-unregistered", "import", "--input", "{}", "--json"]).stdout).first)
        #expect(submitted.isNull("line"))
    }

    // MARK: Tables in terminal cells

    /// The terminal cell at which `word` starts in each line of `output` that has it, and the cell at which the
    /// header `column` starts.
    func cells(of word: String, in output: String, column: String) throws -> (header: Int, rows: [Int]) {
        let lines = output.split(separator: "\n").map(String.init)
        let header = try #require(lines.first)
        func cell(_ text: String, in line: String) -> Int? {
            line.range(of: text).map { TerminalWidth.width(of: line[..<$0.lowerBound]) }
        }
        return (try #require(cell(column, in: header)), lines.dropFirst().compactMap { cell(word, in: $0) })
    }

    @Test func tablesAlignWideCharactersAndEscapeControls() async throws {
        let fixture = try Fixture()
        let names = ["日本語のファイル", "📦 package", "plain", "e\u{301}te\u{301}", "tab\tname"]
        for (index, name) in names.enumerated() {
            let root = try await fixture.root("r\(index)", name: name, createdAt: fixture.start.addingTimeInterval(Double(index)))
            try await fixture.child("r\(index)-c", of: root, name: "子 \(name)")
        }
        let list = try await fixture.run(["list"])
        #expect(list.status == 0)
        let kind = try cells(of: "import", in: list.stdout, column: "KIND")
        #expect(kind.rows == Array(repeating: kind.header, count: names.count), "\(list.stdout)")
        #expect(list.stdout.contains("tab\\tname"))

        let history = try await fixture.run(["history", "r0"])
        let created = try cells(of: "created", in: history.stdout, column: "EVENT")
        let started = try cells(of: "started", in: history.stdout, column: "EVENT")
        #expect(created.rows == [created.header] && started.rows == [started.header], "\(history.stdout)")

        let show = try await fixture.run(["show", "r0"])
        #expect(show.stdout.contains("  子 日本語のファイル  "), "\(show.stdout)")
    }

    @Test func aCellSkipsColourButEscapesOtherControls() {
        let cell = Terminal.paint("ok", .green) + "\u{1B}[2J\u{7}"
        #expect(Format.printableCell("\u{1B}[32mok\u{1B}[0m\u{1B}[2J\u{7}") == "\u{1B}[32mok\u{1B}[0m\\e[2J\\x07")
        #expect(Format.printableCell(cell).visibleWidth == "ok\\e[2J\\x07".count)
        #expect("日本\u{1B}[1m語\u{1B}[0m".visibleWidth == 6)
        #expect(Format.count(5004) == "5,004" && Format.count(0) == "0" && Format.count(1_234_567) == "1,234,567")
    }

    // MARK: Usage errors

    @Test(arguments: [
        (["--busy-timeout", "-1", "list"], "--busy-timeout must be 0 or more"),
        (["--busy-timeout", "soon", "list"], "soon"),
        (["list", "--limit", "many"], "many"),
        (["list", "--limit=-1"], "--limit must be 0 or more"),
        (["list", "--offset=-5"], "--offset must be 0 or more"),
        (["list", "--until", "tomorrow"], "invalid value 'tomorrow' for --until"),
        (["cancel", "x", "--wait", "-1"], "--wait must be between 0 and 86400 seconds"),
        (["cancel", "x", "--wait", "nan"], "--wait must be between"),
        (["cancel", "x", "--wait", "soon"], "soon"),
        (["pause", "--since", "5x", "--yes"], "invalid value '5x' for --since"),
        (["prune", "--older-than", "36501d"], "too long"),
        (["history", "x", "--tail", "-1"], "--tail must be 0 or more"),
        (["history", "x", "--tail", "all"], "all"),
        (["history", "x", "--since", "later"], "invalid value 'later' for --since"),
    ])
    func badValuesAreUsageErrors(arguments: [String], message: String) async throws {
        let fixture = try Fixture()
        try await fixture.root("x")
        await fixture.store.close()
        let before = fixture.bytes()
        let result = try await fixture.run(arguments)
        #expect(result.status == 64, "\(arguments): \(result.stderr)")
        #expect(result.errorLines.count == 1 && result.errorLines[0].hasPrefix("progressctl: error: "), "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(fixture.bytes() == before)
    }
}
