/// How much room text takes on a terminal, counted in cells, and how to cut and pad it to a number of cells.
///
/// A terminal draws most characters one cell wide, East Asian wide and fullwidth characters and emoji two cells
/// (``wideRanges``), and combining marks, zero-width joiners and variation selectors in no cell of their own.
/// Control characters are never written raw: they are shown escaped (`\n`, `\t`, `\e`, `\x7f`, `\u{2028}`), and
/// count as wide as their escapes. Every function here works on whole grapheme clusters, so a cut never separates
/// a combining mark from its base or a wide character from its cells.
///
/// ```swift
/// TerminalWidth.width(of: "日本語.txt")               // 10
/// TerminalWidth.truncate("日本語.txt", to: 6)          // "日本…" (5 cells: 語 would not fit before the …)
/// TerminalWidth.pad("📦 a", to: 6)                     // "📦 a  "
/// ```
enum TerminalWidth {
    /// The character that marks text cut short.
    static let ellipsis = "…"

    /// Cells `scalar` takes: 0, 1 or 2. A control character counts as its escape (see ``escape(_:)``).
    static func width(of scalar: Unicode.Scalar) -> Int {
        if let escaped = escape(scalar) { return escaped.unicodeScalars.count }
        if isZeroWidth(scalar) { return 0 }
        return isWide(scalar) ? 2 : 1
    }

    /// Cells `text` takes once its control characters are escaped.
    static func width(of text: some StringProtocol) -> Int {
        var cells = 0
        for scalar in text.unicodeScalars { cells += width(of: scalar) }
        return cells
    }

    /// Whether `scalar` is drawn two cells wide: East Asian Wide or Fullwidth, or an emoji shown as one by default.
    static func isWide(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        guard value >= 0x1100 else { return false }
        var low = 0
        var high = wideRanges.count - 1
        while low <= high {
            let middle = (low + high) / 2
            let range = wideRanges[middle]
            if value < range.lowerBound {
                high = middle - 1
            } else if value > range.upperBound {
                low = middle + 1
            } else {
                return true
            }
        }
        return false
    }

    /// Whether `scalar` takes no cell of its own: a combining mark, a format character (zero-width joiner and
    /// non-joiner, word joiner, byte order mark, tags), a variation selector, or a Hangul medial vowel or final
    /// consonant (which join the syllable before them).
    static func isZeroWidth(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x1160...0x11FF, 0xD7B0...0xD7FF: return true
        default: break
        }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return true
        default: return false
        }
    }

    /// The escape to show instead of a control character (C0, DEL, C1, line and paragraph separators, and the
    /// bidirectional overrides and isolates that would reorder what follows them), or `nil` for any other scalar.
    static func escape(_ scalar: Unicode.Scalar) -> String? {
        switch scalar.value {
        case 0x0A: return "\\n"
        case 0x09: return "\\t"
        case 0x0D: return "\\r"
        case 0x1B: return "\\e"
        case 0x00...0x1F, 0x7F...0x9F: return "\\x" + hex(scalar.value, digits: 2)
        case 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: return "\\u{" + hex(scalar.value, digits: 4) + "}"
        default: return nil
        }
    }

    /// `text` with every control character replaced by its escape: safe to write to a terminal.
    static func printable(_ text: some StringProtocol) -> String {
        guard text.unicodeScalars.contains(where: { escape($0) != nil }) else { return String(text) }
        var result = ""
        for scalar in text.unicodeScalars {
            if let escaped = escape(scalar) {
                result += escaped
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// `text` made printable and cut to at most `limit` cells; a cut text ends with `…`. A wide character that would
    /// straddle the limit is left out whole, so the result may be one cell narrower than `limit`.
    static func truncate(_ text: some StringProtocol, to limit: Int) -> String {
        let printable = printable(text)
        guard limit > 0 else { return "" }
        guard width(of: printable) > limit else { return printable }
        let room = limit - width(of: ellipsis)
        var kept = ""
        var cells = 0
        for character in printable {
            let cellsOfCharacter = width(of: String(character))
            if cells + cellsOfCharacter > room { break }
            kept.append(character)
            cells += cellsOfCharacter
        }
        return kept + ellipsis
    }

    /// `text` made printable, cut to `cells` and padded with spaces to exactly `cells` cells: on the right, or on
    /// the left when `alignRight`.
    static func pad(_ text: some StringProtocol, to cells: Int, alignRight: Bool = false) -> String {
        let cut = truncate(text, to: cells)
        let fill = String(repeating: " ", count: max(0, cells - width(of: cut)))
        return alignRight ? fill + cut : cut + fill
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
