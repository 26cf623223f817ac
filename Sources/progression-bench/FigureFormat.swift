/// How numbers are shown in the table.
enum FigureFormat {
    /// Thousands separated, three significant decimals for small numbers.
    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "\(value)" }
        if abs(value) >= 1000 {
            let rounded = Int64(value.rounded())
            var digits = String(abs(rounded))
            var groups: [Substring] = []
            while digits.count > 3 {
                groups.insert(Substring(digits.suffix(3)), at: 0)
                digits = String(digits.dropLast(3))
            }
            groups.insert(Substring(digits), at: 0)
            return (rounded < 0 ? "-" : "") + groups.joined(separator: ",")
        }
        if value == value.rounded(), abs(value) < 1000 { return String(Int64(value)) }
        if abs(value) >= 10 { return String(format1: value, decimals: 1) }
        return String(format1: value, decimals: 3)
    }
}

extension String {
    /// `value` with a fixed number of decimals, without Foundation's format strings.
    init(format1 value: Double, decimals: Int) {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        let whole = Int64(scaled / scale)
        var fraction = String(Int64(scaled) - whole * Int64(scale))
        while fraction.count < decimals { fraction = "0" + fraction }
        self = (value < 0 ? "-" : "") + String(whole) + (decimals > 0 ? "." + fraction : "")
    }
}
