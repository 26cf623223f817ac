import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// Untrusted names reach people escaped, and `--json` unchanged (issue 15, item 9).
@Suite struct EscapingTests {
    @Test(arguments: [
        ("plain name/with: punctuation é 中文 🧵", "plain name/with: punctuation é 中文 🧵"),
        ("tab\there", "tab\\there"),
        ("two\nlines\r\n", "two\\nlines\\r\\n"),
        ("\u{1B}[2J\u{1B}]0;title\u{07}", "\\e[2J\\e]0;title\\x07"),
        ("nul\u{00} del\u{7F} unit\u{1F}", "nul\\x00 del\\x7F unit\\x1F"),
        ("c1 csi\u{9B}31m nel\u{85}", "c1 csi\\u{009B}31m nel\\u{0085}"),
        ("bidi \u{202E}txt.exe line\u{2028}sep", "bidi \\u{202E}txt.exe line\\u{2028}sep"),
        ("back\\slash", "back\\slash"),
    ])
    func controlCharactersAreWrittenAsEscapes(text: String, expected: String) {
        #expect(text.escapedForTerminal == expected)
    }

    /// Issue 20: one 1 MB task name made `list` print 107 MB (every row padded to the longest name). A cell is cut
    /// at 60 cells; `--json` keeps the whole name.
    @Test func aHugeNameIsCutInTheListAndWholeInJSON() async throws {
        let fixture = try Fixture()
        let huge = String(repeating: "n", count: 1_000_000)
        try await fixture.root("big", name: huge)
        for index in 0..<20 { try await fixture.root("small-\(index)", name: "small \(index)") }
        let list = try await fixture.run(["list"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.utf8.count < 20_000, "\(list.stdout.utf8.count) bytes")
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("small-") }.count == 20)
        #expect(lines.contains { $0.hasPrefix("big") && $0.contains(String(repeating: "n", count: 59) + "…") })
        let json = try await fixture.run(["list", "--json"])
        #expect(json.status == 0 && json.stdout.contains(huge))
    }

    @Test func aTSVFieldAlsoEscapesBackslashesSoItReadsBack() {
        #expect("a\tb\\c\nd".escapedForTSVField == "a\\tb\\\\c\\nd")
        #expect("plain".escapedForTSVField == "plain")
        #expect(!"x\t\n\r\u{1B}".escapedForTSVField.contains { $0 == "\t" || $0 == "\n" || $0 == "\r" })
    }

    static let evilName = "report\u{1B}]0;owned\u{07}\n\u{1B}[2J"
    static let evilKind = "im\tport"
    static let evilStep = "step\u{9B}31m\r"
    static let evilError = "boom\u{1B}[5m\nsecond line"

    /// A database whose names carry escape sequences, newlines and tabs.
    func fixture() async throws -> Fixture {
        let fixture = try Fixture()
        let root = try await fixture.root(
            "evil\u{1B}[8m", name: Self.evilName, kind: Self.evilKind, status: .failed,
            options: .default.retryable(), progress: 0.5, step: Self.evilStep, error: ("Oops\u{07}", Self.evilError))
        try await fixture.child("evil-child", of: root, name: "file\nname\t.txt", status: .failed)
        await fixture.store.close()
        return fixture
    }

    /// No control character but the newlines that end lines (and none at all in the table's cells).
    func expectSafe(_ output: String, lines: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        let controls = output.unicodeScalars.filter {
            ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value)
        }
        #expect(controls.isEmpty, "raw control characters: \(controls.map { String($0.value, radix: 16) })",
                sourceLocation: sourceLocation)
        #expect(output.split(separator: "\n").count == lines, "\(output)", sourceLocation: sourceLocation)
    }

    @Test func listShowHistoryAndStatsEscapeWhatTheyPrint() async throws {
        let fixture = try await fixture()
        let list = try await fixture.run(["list"])
        #expect(list.status == 0, "\(list.stderr)")
        expectSafe(list.stdout, lines: 3)
        #expect(list.stdout.contains("report\\e]0;owned\\x07\\n\\e[2J"))
        #expect(list.stdout.contains("im\\tport") && list.stdout.contains("step\\u{009B}31m\\r"))
        #expect(list.stdout.contains("evil\\e[8m"))

        let show = try await fixture.run(["show", "evil\u{1B}[8m"])
        #expect(show.status == 0, "\(show.stderr)")
        expectSafe(show.stdout, lines: 9)
        #expect(show.stdout.contains("error: Oops\\x07: boom\\e[5m\\nsecond line"))
        #expect(show.stdout.contains("file\\nname\\t.txt"))

        let history = try await fixture.run(["history", "evil\u{1B}[8m"])
        #expect(history.status == 0, "\(history.stderr)")
        expectSafe(history.stdout, lines: 4)
        #expect(history.stdout.contains("Oops\\x07: boom\\e[5m\\nsecond line"))

        let stats = try await fixture.run(["stats"])
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect(stats.stdout.contains("  im\\tport 1"))
        expectSafe(stats.stdout, lines: stats.stdout.split(separator: "\n").count)
    }

    @Test func diagnosticsAreEscapedToo() async throws {
        let fixture = try await fixture()
        let result = try await fixture.run(["show", "no\u{1B}[2Jsuch"])
        #expect(result.status == 1)
        #expect(result.stderr == "progressctl: error: no task with id 'no\\e[2Jsuch'\n")
    }

    @Test func jsonKeepsTheTextAsItIs() async throws {
        let fixture = try await fixture()
        let list = try await fixture.run(["list", "--json"])
        #expect(list.status == 0, "\(list.stderr)")
        let roots = try decodeJSON([TaskDocument].self, from: list.stdout)
        #expect(roots.first?.name == Self.evilName && roots.first?.kind == Self.evilKind)
        #expect(roots.first?.step == Self.evilStep && roots.first?.errorDescription == Self.evilError)
        let show = try await fixture.run(["show", "evil\u{1B}[8m", "--json"])
        let nodes = try decodeJSON([TaskDocument].self, from: show.stdout)
        #expect(nodes.map(\.name) == [Self.evilName, "file\nname\t.txt"])
        #expect(!list.stdout.contains("\\\\e"), "no terminal escaping inside JSON")
    }
}
