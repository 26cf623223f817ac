#if Console
import Foundation

/// The fields of a query string or of a form body (`application/x-www-form-urlencoded`): `+` is a space, `%XX` a
/// byte, a name may repeat (`status=failed&status=running`). Text that is not valid UTF-8 once decoded is kept as
/// it was written.
package struct FormFields: Sendable, Hashable {
    package private(set) var pairs: [(name: String, value: String)]

    package init(_ encoded: Substring) {
        pairs = encoded.split(separator: "&", omittingEmptySubsequences: true).map { field in
            let parts = field.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (Self.decode(parts[0]), parts.count > 1 ? Self.decode(parts[1]) : "")
        }
    }

    package init(_ encoded: String?) {
        self.init(Substring(encoded ?? ""))
    }

    /// The first value of `name`, `nil` when absent.
    package subscript(_ name: String) -> String? {
        pairs.first { $0.name == name }?.value
    }

    /// The first value of `name` when it is not empty (form fields left blank are absent).
    package func nonEmpty(_ name: String) -> String? {
        guard let value = self[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    /// Every value of `name`, in order.
    package func all(_ name: String) -> [String] {
        pairs.filter { $0.name == name }.map(\.value)
    }

    /// Whether `name` is given as `1`, `true`, `yes` or `on` (a ticked checkbox).
    package func flag(_ name: String) -> Bool {
        guard let value = self[name]?.lowercased() else { return false }
        return ["1", "true", "yes", "on"].contains(value)
    }

    private static func decode(_ text: Substring) -> String {
        let spaced = text.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }

    /// `text` percent-encoded for a path segment or a query value: everything but ASCII letters, digits and `-._~`.
    package static func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    private static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")

    /// `name=value&…`, each part encoded.
    package static func query(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
    }

    package static func == (lhs: FormFields, rhs: FormFields) -> Bool {
        lhs.pairs.elementsEqual(rhs.pairs) { $0.name == $1.name && $0.value == $1.value }
    }

    package func hash(into hasher: inout Hasher) {
        for pair in pairs {
            hasher.combine(pair.name)
            hasher.combine(pair.value)
        }
    }
}
#endif
