import CSQLite

/// A value that SQLite stores: one of its five storage classes.
package enum SQLiteValue: Hashable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

extension SQLiteValue: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByStringLiteral,
    ExpressibleByNilLiteral
{
    package init(integerLiteral value: Int64) { self = .integer(value) }
    package init(floatLiteral value: Double) { self = .real(value) }
    package init(stringLiteral value: String) { self = .text(value) }
    package init(nilLiteral: ()) { self = .null }
}

extension SQLiteValue {
    package init(_ value: Int?) { self = value.map { .integer(Int64($0)) } ?? .null }
    package init(_ value: Int64?) { self = value.map { .integer($0) } ?? .null }
    package init(_ value: Double?) { self = value.map { .real($0) } ?? .null }
    package init(_ value: String?) { self = value.map { .text($0) } ?? .null }
    package init(_ value: [UInt8]?) { self = value.map { .blob($0) } ?? .null }
    package init(_ value: Bool) { self = .integer(value ? 1 : 0) }
}
