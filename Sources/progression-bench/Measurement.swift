/// Small statistics for repeated measurements: medians and percentiles of samples, and durations as numbers.
enum Measurement {
    /// The median of `values` (the mean of the two middle values for an even count); `nan` for none.
    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// The `fraction` percentile (0...1, nearest rank) of `values`; `nan` for none.
    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        return percentile(sorted: sorted, fraction)
    }

    /// The `fraction` percentile of values sorted already.
    static func percentile(sorted: [Double], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((fraction * Double(sorted.count - 1)).rounded())
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }

    /// Times `body` on the continuous clock.
    static func time<T>(_ body: () async throws -> T) async rethrows -> (T, Duration) {
        let start = ContinuousClock.now
        let value = try await body()
        return (value, ContinuousClock.now - start)
    }
}

extension Duration {
    /// This duration in seconds, as a floating-point number.
    var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }

    /// This duration in milliseconds.
    var inMilliseconds: Double { inSeconds * 1e3 }
    var inMicroseconds: Double { inSeconds * 1e6 }

    /// This duration in nanoseconds.
    var inNanoseconds: Double { inSeconds * 1e9 }
}
