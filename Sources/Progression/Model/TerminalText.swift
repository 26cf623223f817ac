/// Text from untrusted sources (task names, steps, kinds, ids, error messages, file names) made safe to print for
/// people, with one rule shared by `progressctl` and the demo.
extension String {
    /// This text with its control characters written as escapes, as `ls` shows odd file names: tab, newline and
    /// carriage return as `\t`, `\n`, `\r`, ESC as `\e`, other C0 controls and DEL as `\x07`-style escapes, C1 controls,
    /// the Unicode line and paragraph separators and the bidirectional overrides as `\u{202E}`-style escapes.
    /// Everything else, backslashes included, is left as it is.
    ///
    /// A name cannot then move the cursor, change colours, retitle the terminal or break a table's lines:
    ///
    /// ```swift
    /// "report\u{1B}[2J\n".escapedForTerminal   // "report\e[2J\n" (a backslash, then 'e', …)
    /// ```
    ///
    /// Not for JSON: its encoder escapes what it must.
    package var escapedForTerminal: String {
        escaped(backslash: false)
    }

    /// This text as one field of a tab-separated line: ``escapedForTerminal`` and a backslash as `\\`, so that a tab or
    /// a newline in the text cannot split the field or the line, and the escapes can be read back unambiguously.
    ///
    /// ```swift
    /// "a\tb\\c".escapedForTSVField   // "a\tb\\c" written out: a, backslash, t, b, backslash, backslash, c
    /// ```
    package var escapedForTSVField: String {
        escaped(backslash: true)
    }

    private func escaped(backslash: Bool) -> String {
        guard unicodeScalars.contains(where: { $0.needsEscape || (backslash && $0 == "\\") }) else { return self }
        var result = ""
        result.reserveCapacity(utf8.count + 8)
        for scalar in unicodeScalars {
            switch scalar {
            case "\\" where backslash: result += "\\\\"
            case "\t": result += "\\t"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\u{1B}": result += "\\e"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: result += "\\x" + scalar.hexadecimal(digits: 2)
            case _ where scalar.needsEscape: result += "\\u{" + scalar.hexadecimal(digits: 4) + "}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

extension Unicode.Scalar {
    /// C0 and C1 controls, DEL, the line and paragraph separators, and the bidirectional embeddings, overrides and
    /// isolates (which reorder what follows them on screen).
    fileprivate var needsEscape: Bool {
        switch value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    fileprivate func hexadecimal(digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
