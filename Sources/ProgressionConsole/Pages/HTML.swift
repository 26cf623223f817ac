#if Console
import Foundation
import Progression

/// A piece of HTML. Text interpolated into it is escaped — here, and nowhere else: task names, kinds, steps, inputs,
/// results, errors and ids are user data, so every page is built from `HTML` literals and interpolations, never by
/// concatenating strings.
///
/// ```swift
/// let name = #"<script>alert(1)</script>"#
/// let cell: HTML = "<td class=\"name\">\(name)</td>"   // <td class="name">&lt;script&gt;alert(1)&lt;/script&gt;</td>
/// ```
///
/// A literal part is trusted markup; an interpolated `String` (or number) is text; an interpolated `HTML` is markup
/// built the same way.
package struct HTML: Sendable, Hashable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The markup.
    package private(set) var markup: String

    package init(stringLiteral value: String) {
        markup = value
    }

    package init(stringInterpolation: StringInterpolation) {
        markup = stringInterpolation.markup
    }

    private init(markup: String) {
        self.markup = markup
    }

    package var description: String { markup }

    /// No markup.
    package static let empty = HTML(stringLiteral: "")

    /// The pieces one after the other.
    package static func joined(_ pieces: some Sequence<HTML>, separator: HTML = .empty) -> HTML {
        HTML(markup: pieces.map(\.markup).joined(separator: separator.markup))
    }

    /// `text` made safe in an element's content and in a double- or single-quoted attribute value: its control
    /// characters written as visible escapes (``String/escapedForTerminal``: `\e`, `\x07`, `\u{202E}`, as progressctl
    /// shows them), then `&`, `<`, `>`, `"` and `'` as character references.
    ///
    /// With `keepingLines`, line feeds and tabs stay as they are (text shown as lines: indented JSON, a multi-line
    /// error); every other control character is escaped all the same.
    package static func escape(_ text: String, keepingLines: Bool = false) -> String {
        let visible =
            keepingLines
            ? text.split(separator: "\n", omittingEmptySubsequences: false).map {
                $0.split(separator: "\t", omittingEmptySubsequences: false).map { String($0).escapedForTerminal }
                    .joined(separator: "\t")
            }.joined(separator: "\n")
            : text.escapedForTerminal
        guard visible.utf8.contains(where: { $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || $0 == 0x22 || $0 == 0x27 }) else {
            return visible
        }
        var result = ""
        result.reserveCapacity(visible.utf8.count + 16)
        for character in visible.unicodeScalars {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.unicodeScalars.append(character)
            }
        }
        return result
    }

    package struct StringInterpolation: StringInterpolationProtocol {
        var markup = ""

        package init(literalCapacity: Int, interpolationCount: Int) {
            markup.reserveCapacity(literalCapacity + interpolationCount * 16)
        }

        package mutating func appendLiteral(_ literal: String) {
            markup += literal
        }

        /// Text, escaped.
        package mutating func appendInterpolation(_ text: String) {
            markup += HTML.escape(text)
        }

        /// Text shown as lines (in a `<pre>`, or with `white-space: pre-wrap`): escaped, line feeds and tabs kept.
        package mutating func appendInterpolation(lines text: String) {
            markup += HTML.escape(text, keepingLines: true)
        }

        /// Text, escaped; nothing for `nil`.
        package mutating func appendInterpolation(_ text: String?) {
            if let text { markup += HTML.escape(text) }
        }

        /// A number, as text.
        package mutating func appendInterpolation<Number: Numeric & CustomStringConvertible>(_ number: Number) {
            markup += HTML.escape(number.description)
        }

        /// Markup.
        package mutating func appendInterpolation(_ html: HTML) {
            markup += html.markup
        }

        /// Markup, one piece after the other.
        package mutating func appendInterpolation(_ pieces: [HTML]) {
            for piece in pieces { markup += piece.markup }
        }
    }
}
#endif
