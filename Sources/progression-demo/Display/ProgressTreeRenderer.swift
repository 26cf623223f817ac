import Foundation
import Progression

/// What the demo draws of a checksum job: the job (its row in the store, whose progress moves with its folders wherever
/// they run), its folders (the links of its tree, each a `checksum-folder` job), and the files being read in the
/// folders that run in this process.
struct JobDisplay: Sendable {
    struct Row: Sendable {
        var name: String
        var progress: Double?
        var status: TaskStatus
    }

    struct Folder: Sendable {
        var row: Row
        /// Files being read, when the folder's job runs in this process.
        var files: [Row]
    }

    var name: String
    var progress: Double?
    var status: String
    var total: Double?
    var rate: Double?
    var estimatedTimeRemaining: Duration?
    var folders: [Folder]

    /// The job `record` with its links (`tree`, as stored) and what this process runs of its folders (`graph`).
    init(record: TaskRecord, tree: [TaskRecord], graph: TaskGraph) {
        name = record.name
        progress = record.progress
        status = record.displayStatus
        total = record.total
        rate = record.rate
        estimatedTimeRemaining = record.estimatedTimeRemaining
        folders = tree.filter(\.isLink).map { link in
            var row = Row(name: link.name, progress: link.progress, status: link.status)
            var files: [Row] = []
            if let child = link.childJobID.flatMap({ graph.task($0) }) {
                // Running here: the live value, not the one the tree keeper copied last.
                row.progress = child.progress ?? row.progress
                row.status = child.status
                files = child.children.filter { ($0.status == .running || $0.status == .paused) && $0.progress != nil }
                    .map { Row(name: $0.name, progress: $0.progress, status: $0.status) }
            }
            return Folder(row: row, files: files)
        }
    }
}

/// Draws a checksum job as a tree of progress bars: the job, the folders being read, the files being read in them,
/// then a line of counts.
///
/// ```
/// checksum sample-200mb      ██████████░░░░░░░░░░░░░░  42%  84.1 / 200.0 MB  61.2 MB/s
/// ├─ logs/                   ███████░░░░░░░░░░░░░░░░░  29%
/// │  ├─ logs/log-0007.txt    ████████████░░░░░░░░░░░░  50%
/// │  └─ logs/log-0008.txt    ██░░░░░░░░░░░░░░░░░░░░░░   9%
/// files: 41 read, 12 skipped (done before), 0 failed · folders: 2 of 6 done
/// ```
struct ProgressTreeRenderer {
    var columns: Int
    var barWidth = 24

    func lines(
        job: JobDisplay, counts: JobStats.Counts?, elapsed: Double, storage: StorageHealth = .healthy
    ) -> [String] {
        let nameWidth = max(16, min(44, columns - barWidth - 40))
        var lines: [String] = []
        var header = Format.fit(job.name, nameWidth + 3) + " " + Format.bar(job.progress, width: barWidth) + " "
            + Format.percent(job.progress)
        if let total = job.total, total > 1 {
            header += "  \(Format.megabytes(Int64((job.progress ?? 0) * total))) / \(Format.megabytes(Int64(total)))"
            if let rate = job.rate, rate > 0 {
                header += String(format: "  %.1f MB/s", rate * total / 1_000_000)
            } else if let counts, elapsed > 0.5 {
                header += String(format: "  %.1f MB/s", Double(counts.bytesRead) / 1_000_000 / elapsed)
            }
            if let left = job.estimatedTimeRemaining { header += "  \(Format.timeLeft(left))" }
        }
        if job.status != "running" { header += "  \(job.status)" }
        lines.append(header)

        // Folders at work (at most 8), and below each the files being read here (a file waiting for its turn has no
        // progress yet; a folder run by another process shows its bar alone).
        let unfinished = job.folders.filter { $0.row.status == .running || $0.row.status == .paused }
        let active = Array(unfinished.prefix(8))
        for (index, folder) in active.enumerated() {
            let lastFolder = index == active.count - 1
            lines.append(row(folder.row, prefix: lastFolder ? "└─ " : "├─ ", nameWidth: nameWidth))
            for (fileIndex, file) in folder.files.enumerated() {
                let branch = fileIndex == folder.files.count - 1 ? "└─ " : "├─ "
                lines.append(row(file, prefix: (lastFolder ? "   " : "│  ") + branch, nameWidth: nameWidth - 3))
            }
        }

        if unfinished.count > active.count { lines.append("   … \(unfinished.count - active.count) more folders") }
        let foldersDone = job.folders.filter { $0.row.status == .completed }.count
        var footer = ""
        if let counts {
            footer = "files: \(counts.read) read, \(counts.skipped) skipped (done before), \(counts.failed) failed"
        }
        if !job.folders.isEmpty {
            footer += (footer.isEmpty ? "" : " · ") + "folders: \(foldersDone) of \(job.folders.count) done"
        }
        if !footer.isEmpty { lines.append(footer) }
        if case .failing(let since, let error) = storage {
            lines.append("storage failing since \(Format.clock(since)): \(error) — waiting; writes are retried")
        }
        return lines.map { String($0.prefix(columns - 1)) }
    }

    private func row(_ task: JobDisplay.Row, prefix: String, nameWidth: Int) -> String {
        var text = prefix + Format.fit(task.name, nameWidth) + " " + Format.bar(task.progress, width: barWidth) + " "
            + Format.percent(task.progress)
        if task.status == .paused { text += "  paused" }
        return text
    }

    /// One plain line, for a stdout that is not a terminal.
    func plainLine(job: JobDisplay, counts: JobStats.Counts?) -> String {
        var text = "progress \(Format.percent(job.progress).trimmingCharacters(in: .whitespaces))"
        if let counts {
            text += ": \(counts.read) files read, \(counts.skipped) skipped, \(counts.failed) failed"
        }
        if !job.folders.isEmpty {
            text += ", folders \(job.folders.filter { $0.row.status == .completed }.count) of \(job.folders.count) done"
        }
        if job.status != "running" { text += " (\(job.status))" }
        return text
    }
}

extension JobStats {
    /// The counts of the folder jobs of `job` that run (or ran) in this process, added up.
    static func total(of job: JobDisplay, links: [TaskRecord]) -> Counts? {
        var total: Counts?
        for link in links {
            guard let id = link.childJobID, let counts = JobStats.of(jobID: id)?.snapshot else { continue }
            var sum = total ?? Counts()
            sum.files += counts.files
            sum.bytes += counts.bytes
            sum.read += counts.read
            sum.failed += counts.failed
            sum.skipped += counts.skipped
            sum.continued += counts.continued
            sum.bytesRead += counts.bytesRead
            sum.bytesSkipped += counts.bytesSkipped
            total = sum
        }
        return total
    }
}
