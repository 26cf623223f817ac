#if Console
import Foundation
import ProgressionOperator

/// The overview's chart: an SVG of bars drawn with attributes and classes only (the Content-Security-Policy allows
/// no inline style), completed stacked under failed, one bar a minute.
package enum Chart {
    static let width = 600
    static let height = 120

    package static func throughput(_ minutes: [OutcomesPerMinute.Minute]?) -> HTML {
        guard let minutes else { return "<p class=\"none\">this store keeps no history to count from</p>" }
        let peak = max(1, minutes.map { $0.completed + $0.failed }.max() ?? 1)
        let slot = Double(width) / Double(max(1, minutes.count))
        let bars = minutes.enumerated().map { index, minute -> HTML in
            let x = String(format: "%.1f", Double(index) * slot + 1)
            let barWidth = String(format: "%.1f", max(1, slot - 2))
            let completedHeight = Double(minute.completed) / Double(peak) * Double(height - 20)
            let failedHeight = Double(minute.failed) / Double(peak) * Double(height - 20)
            let label = "\(Format.time(minute.start).suffix(8).prefix(5)): \(minute.completed) completed, \(minute.failed) failed"
            return """
                <g><title>\(label)</title>\
                <rect class="completed" x="\(x)" y="\(String(format: "%.1f", Double(height) - completedHeight))" \
                width="\(barWidth)" height="\(String(format: "%.1f", completedHeight))"></rect>\
                <rect class="failed" x="\(x)" y="\(String(format: "%.1f", Double(height) - completedHeight - failedHeight))" \
                width="\(barWidth)" height="\(String(format: "%.1f", failedHeight))"></rect></g>
                """
        }
        let total = minutes.reduce(into: (0, 0)) { $0.0 += $1.completed; $0.1 += $1.failed }
        return """
            <svg class="chart" viewBox="0 0 \(width) \(height)" role="img" aria-label="roots completed and failed per \
            minute over the last hour"><text class="peak" x="2" y="12">\(peak)/min</text>\(bars)</svg>
            <p class="legend"><span class="key completed"></span>completed \(Format.count(total.0)) \
            <span class="key failed"></span>failed \(Format.count(total.1)) in the last hour</p>
            """
    }
}
#endif
