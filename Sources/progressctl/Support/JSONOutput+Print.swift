import Foundation
import ProgressionOperator

extension JSONOutput {
    /// Prints `value` as one pretty-printed document on stdout; empty arrays and objects as `[]` and `{}`.
    static func print<T: Encodable>(_ value: T) throws {
        Terminal.output(try text(value))
    }
}
