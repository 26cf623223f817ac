import Foundation
import Testing

@testable import progressctl

@Suite struct TerminalWidthTests {
    @Test(arguments: [
        ("abc", 3), ("", 0), ("日本語", 6), ("日本語のファイル名.txt", 22), ("📦 package", 10), ("Ａ", 2), ("　", 2),
        ("가", 2), ("ｱ", 1), ("e\u{301}", 1), ("\u{200D}", 0), ("a\u{FE0F}", 1), ("👨\u{200D}👩\u{200D}👧", 6),
        ("🇩🇪", 2), ("…", 1), ("█░·", 3), ("\n", 2), ("\t", 2), ("\u{1B}", 2), ("\u{7F}", 4), ("\u{85}", 4),
        ("\u{2028}", 8), ("\u{202E}", 8),
    ])
    func widthInCells(text: String, cells: Int) {
        #expect(TerminalWidth.width(of: text) == cells, "\(text.unicodeScalars.map { String($0.value, radix: 16) })")
    }

    @Test func controlCharactersAreEscapedNeverKept() {
        let text = "a\nb\tc\u{1B}[31md\re\u{0}\u{7F}\u{9B}\u{2028}\u{202E}"
        let printable = TerminalWidth.printable(text)
        #expect(printable == "a\\nb\\tc\\e[31md\\re\\x00\\x7f\\x9b\\u{2028}\\u{202e}")
        #expect(!printable.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        #expect(TerminalWidth.width(of: text) == TerminalWidth.width(of: printable))
    }

    @Test(arguments: [
        ("abcdef", 6, "abcdef"), ("abcdef", 5, "abcd…"), ("abcdef", 1, "…"), ("abcdef", 0, ""),
        ("日本語", 6, "日本語"), ("日本語", 5, "日本…"), ("日本語", 4, "日…"), ("日本語", 2, "…"),
        ("e\u{301}e\u{301}e\u{301}", 2, "e\u{301}…"), ("📦 package", 4, "📦 …"), ("a\nb", 3, "a\\…"),
    ])
    func truncationNeverSplitsACharacter(text: String, limit: Int, expected: String) {
        let cut = TerminalWidth.truncate(text, to: limit)
        #expect(cut == expected)
        #expect(TerminalWidth.width(of: cut) <= limit)
    }

    @Test func paddingGivesExactlyTheWidthAskedFor() {
        for text in ["", "a", "日本語のファイル名.txt", "📦 package", String(repeating: "x", count: 200), "tab\there"] {
            for cells in [0, 1, 2, 3, 5, 8, 13, 21, 40] {
                #expect(TerminalWidth.width(of: TerminalWidth.pad(text, to: cells)) == cells, "\(text) \(cells)")
                let right = TerminalWidth.pad(text, to: cells, alignRight: true)
                #expect(TerminalWidth.width(of: right) == cells)
            }
        }
        #expect(TerminalWidth.pad("日本", to: 5) == "日本 ")
        #expect(TerminalWidth.pad("日本", to: 5, alignRight: true) == " 日本")
        #expect(TerminalWidth.pad("日本語", to: 5) == "日本…")
        #expect(TerminalWidth.pad("日本語", to: 4) == "日… ")
    }

    @Test func theWideRangesAreSortedAndDisjoint() {
        let ranges = TerminalWidth.wideRanges
        #expect(!ranges.isEmpty)
        for (earlier, later) in zip(ranges, ranges.dropFirst()) {
            #expect(earlier.upperBound + 1 < later.lowerBound, "\(earlier) and \(later) overlap or touch")
        }
    }

    /// The table was made from Unicode 15.0; the standard library knows Emoji_Presentation too.
    @Test func everyEmojiShownAsOneByDefaultIsWide() {
        var narrow: [String] = []
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value), scalar.properties.isEmojiPresentation,
                let age = scalar.properties.age, (age.major, age.minor) <= (15, 0),
                !(0x1F1E6...0x1F1FF).contains(value)
            else { continue }
            if !TerminalWidth.isWide(scalar) { narrow.append(String(value, radix: 16)) }
        }
        #expect(narrow.isEmpty, "\(narrow)")
    }
}
