import Foundation
import Progression

/// Draws a checksum job's snapshot as a tree of progress bars: the job, the folders being read, the files being read
/// in them, then a line of counts.
///
/// ```
/// checksum sample-200mb      ██████████░░░░░░░░░░░░░░  42%  84.1 / 200.0 MB  61.2 MB/s
/// ├─ logs/                   ███████░░░░░░░░░░░░░░░░░  29%
/// │  ├─ logs/log-0007.txt    ████████████░░░░░░░░░░░░  50%
/// │  └─ logs/log-0008.txt    ██░░░░░░░░░░░░░░░░░░░░░░   9%
/// files: 41 read, 12 skipped (done before), 0 failed, of 128 · folders: 2 of 6 done
/// ```
struct ProgressTreeRenderer {
    var columns: Int
    var barWidth = 24

    /// The job's fraction: its progress, which counts bytes (the job declared them as its total).
    static func fraction(root: TaskSnapshot, counts: JobStats.Counts?) -> Double? {
        root.progress
    }

    func lines(
        root: TaskSnapshot, counts: JobStats.Counts?, elapsed: Double, storage: StorageHealth = .healthy
    ) -> [String] {
        let nameWidth = max(16, min(44, columns - barWidth - 40))
        var lines: [String] = []
        let fraction = Self.fraction(root: root, counts: counts)
        var header = Format.fit(root.name, nameWidth + 3) + " " + Format.bar(fraction, width: barWidth) + " "
            + Format.percent(fraction)
        if let total = root.total, total > 1 {
            header += "  \(Format.megabytes(Int64(root.completedUnits ?? 0))) / \(Format.megabytes(Int64(total)))"
            if let rate = root.rate, rate > 0 {
                header += String(format: "  %.1f MB/s", rate * total / 1_000_000)
            } else if let counts, elapsed > 0.5 {
                header += String(format: "  %.1f MB/s", Double(counts.bytesRead) / 1_000_000 / elapsed)
            }
            if let left = root.estimatedTimeRemaining { header += "  \(Format.timeLeft(left))" }
        }
        if root.status != .running { header += "  \(root.status)" }
        lines.append(header)

        // Folders still at work (at most 8), and below each the files being read (a file waiting for its turn has no
        // progress yet).
        let unfinished = root.children.filter { $0.status == .running || $0.status == .paused }
        let active = Array(unfinished.prefix(8))
        for (index, folder) in active.enumerated() {
            let lastFolder = index == active.count - 1
            lines.append(row(folder, prefix: lastFolder ? "└─ " : "├─ ", nameWidth: nameWidth))
            let files = folder.children.filter { ($0.status == .running || $0.status == .paused) && $0.progress != nil }
            for (fileIndex, file) in files.enumerated() {
                let branch = fileIndex == files.count - 1 ? "└─ " : "├─ "
                lines.append(row(file, prefix: (lastFolder ? "   " : "│  ") + branch, nameWidth: nameWidth - 3))
            }
        }

        if unfinished.count > active.count { lines.append("   … \(unfinished.count - active.count) more folders") }
        let foldersDone = root.children.filter(\.isCompleted).count
        var footer = ""
        if let counts {
            footer = "files: \(counts.read) read, \(counts.skipped) skipped (done before), \(counts.failed) failed, of \(counts.files)"
        }
        if !root.children.isEmpty {
            footer += (footer.isEmpty ? "" : " · ") + "folders: \(foldersDone) done"
        }
        if !footer.isEmpty { lines.append(footer) }
        if case .failing(let since, let error) = storage {
            lines.append("storage failing since \(Format.clock(since)): \(error) — waiting; writes are retried")
        }
        return lines.map { String($0.prefix(columns - 1)) }
    }

    private func row(_ task: TaskSnapshot, prefix: String, nameWidth: Int) -> String {
        var text = prefix + Format.fit(task.name, nameWidth) + " " + Format.bar(task.progress, width: barWidth) + " "
            + Format.percent(task.progress)
        if task.status == .paused { text += "  paused" }
        return text
    }

    /// One plain line, for a stdout that is not a terminal.
    func plainLine(root: TaskSnapshot, counts: JobStats.Counts?) -> String {
        var text = "progress \(Format.percent(Self.fraction(root: root, counts: counts)).trimmingCharacters(in: .whitespaces))"
        if let counts {
            text += ": \(counts.read) files read, \(counts.skipped) skipped, \(counts.failed) failed, of \(counts.files)"
        }
        if root.status != .running { text += " (\(root.status))" }
        return text
    }
}
