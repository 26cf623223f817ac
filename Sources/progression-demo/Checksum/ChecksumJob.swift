import Foundation
import Logging
import Progression
import Synchronization

/// The input of a `checksum` job, as JSON:
///
/// ```sh
/// progressctl submit checksum --input '{"directory": "/srv/data"}'
/// progressctl submit checksum --input '{"directory": "/srv/data", "manifest": "/tmp/data.tsv"}' --retryable --pausable
/// ```
struct ChecksumInput: Codable, Sendable, Hashable {
    /// The directory to walk (absolute, or relative to the service's working directory).
    var directory: String
    /// Where to write the manifest; by default next to the directory, as `<directory>.manifest.tsv`.
    var manifest: String?
    /// Files read at once inside a folder (default 2).
    var parallelFiles: Int?
    /// Waits this long before reading each file: slows the demo down for tests and for watching (default 0).
    var fileDelayMilliseconds: Int?

    /// `path` absolute (from the working directory), standardized and with its symbolic links resolved: what a
    /// submitter stores, so that a worker in another directory (or a run resumed from one) reads the same files.
    static func canonical(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
    }

    /// The directory, absolute and without a trailing slash.
    var directoryPath: String {
        URL(fileURLWithPath: directory).standardizedFileURL.path
    }

    var manifestPath: String {
        manifest.map { URL(fileURLWithPath: $0).standardizedFileURL.path } ?? directoryPath + ".manifest.tsv"
    }
}

/// What the job stores for one file: the step's result, returned without running again after a crash.
struct FileResult: Codable, Sendable, Hashable {
    var path: String
    var bytes: Int64
    var lines: Int64
    var words: Int64
    var checksum: String
    /// Why the file could not be read; the counts are 0 then.
    var error: String?
}

/// What a finished job did, stored as its last checkpoint so that any process (the one that ran it, or
/// `progression-demo run` waiting for a `serve` that ran it) can report it.
struct JobSummary: Codable, Sendable, Hashable {
    var directory: String
    var manifest: String
    var files: Int
    var bytes: Int64
    /// Files whose step ran in this run of the job (from the start, or from a checkpoint inside the file).
    var read: Int
    /// Files whose step had completed in an earlier run: their stored result was returned without reading.
    var skipped: Int
    /// Files read in this run that continued from a checkpoint inside the file.
    var continuedFromCheckpoint: Int
    var failures: [FileResult]
    /// Seconds this run of the job took.
    var seconds: Double
}

/// The `checksum` job: walks a directory; one step per folder, and below it one step per file (named by its relative
/// path, weighted by its size, returning a ``FileResult``), read in 1 MiB chunks with a checkpoint every 8 MiB; then
/// writes a manifest sorted by path.
///
/// A file that cannot be read fails its own step (the error names it); the folder step catches that, records the
/// failure in the manifest and the summary, and the job goes on and completes.
enum ChecksumJob {
    static let kind = "checksum"
    static let chunkSize = 1 << 20
    static let checkpointInterval: Int64 = 8 << 20

    /// Registers the kind on `executor`: pausable, cancellable and retryable by default. With `logger`, each job
    /// logs its own completion with its summary, as its code ends: a line per job, in time (a log fed by the progress
    /// stream, which coalesces, missed jobs that came and went between two graphs, and ran behind).
    static func register(on executor: TaskExecutor, logger: Logger? = nil) throws {
        try executor.register(kind, input: ChecksumInput.self, options: .interactive.retryable()) { input, context in
            let summary = try await run(input, context: context)
            logger?.info(
                "job completed",
                metadata: [
                    "job": "\(context.taskID)", "files": "\(summary.files)", "skipped": "\(summary.skipped)",
                    "failed": "\(summary.failures.count)", "manifest": "\(summary.manifest)",
                ])
        }
    }

    @discardableResult
    static func run(_ input: ChecksumInput, context: any TaskContext) async throws -> JobSummary {
        let started = ContinuousClock.now
        let directory = input.directoryPath
        let manifest = input.manifestPath
        let entries = try DirectoryWalker.files(in: directory, excluding: manifest)
        let folders = Dictionary(grouping: entries, by: \.folder).sorted { $0.key < $1.key }
        let totalBytes = entries.reduce(0) { $0 + $1.bytes }
        let stats = JobStats.start(jobID: context.taskID, files: entries.count, bytes: totalBytes)
        // The job's work is its bytes: each folder step weighs its bytes of that total, and each file step its bytes
        // of its folder's, so that the job reads proportionally from the first byte.
        try await context.report(
            .named("\(entries.count) files in \(folders.count) folders").total(Double(max(totalBytes, 1))))

        // Every folder step is pushed at once; in each, a file's step is pushed when the file gets one of the
        // `parallelFiles` read slots (in path order), so that only the files being read show as running.
        let slots = ReadSlots(width: input.parallelFiles ?? 2)
        let order = Dictionary(uniqueKeysWithValues: entries.enumerated().map { ($1.path, $0) })
        var results: [FileResult] = []
        try await withThrowingTaskGroup(of: [FileResult].self) { group in
            for (folder, files) in folders {
                group.addTask {
                    let folderBytes = files.reduce(0) { $0 + $1.bytes }
                    let ran = RanFlag()
                    let folderResults: [FileResult] = try await context.push(
                        folder == "." ? "./" : folder + "/", weight: Double(max(folderBytes, 1))
                    ) { folderContext in
                        ran.set()
                        try await folderContext.report(.total(Double(max(folderBytes, 1))))
                        return try await readFolder(
                            files, input: input, context: folderContext, stats: stats, slots: slots, order: order)
                    }
                    if !ran.isSet { stats.skip(folderResults) }
                    return folderResults
                }
            }
            for try await folderResults in group { results += folderResults }
        }
        results.sort { $0.path < $1.path }

        try Manifest(results: results).write(to: manifest)
        let summary = JobSummary(
            directory: directory, manifest: manifest, files: results.count, bytes: totalBytes,
            read: stats.read, skipped: stats.skipped, continuedFromCheckpoint: stats.continued,
            failures: results.filter { $0.error != nil },
            seconds: (ContinuousClock.now - started) / .seconds(1))
        try await context.checkpoint(summary)
        try await context.report(.named("done").progress(1))
        return summary
    }

    /// Pushes a folder's file steps at once; each reads its file when it gets a slot. A failed file step becomes a
    /// ``FileResult`` with its error.
    static func readFolder(
        _ files: [FileEntry], input: ChecksumInput, context: any TaskContext, stats: JobStats, slots: ReadSlots,
        order: [String: Int]
    ) async throws -> [FileResult] {
        try await withThrowingTaskGroup(of: FileResult.self) { group in
            for file in files {
                group.addTask {
                    try await readFileStep(
                        file, input: input, context: context, stats: stats, slots: slots, order: order[file.path] ?? 0)
                }
            }
            var results: [FileResult] = []
            for try await result in group { results.append(result) }
            return results.sorted { $0.path < $1.path }
        }
    }

    static func readFileStep(
        _ file: FileEntry, input: ChecksumInput, context: any TaskContext, stats: JobStats, slots: ReadSlots, order: Int
    ) async throws -> FileResult {
        let ran = RanFlag()
        do {
            let result: FileResult = try await slots.withSlot(order: order) {
                try await context.push(file.path, weight: Double(max(file.bytes, 1))) { fileContext in
                    ran.set()
                    return try await readFile(file, input: input, context: fileContext, stats: stats)
                }
            }
            if ran.isSet { stats.finishRead(result) } else { stats.skip([result]) }
            return result
        } catch ProgressionError.subtaskFailed(_, let underlying) where !(underlying is CancellationError) {
            let result = FileResult(
                path: file.path, bytes: 0, lines: 0, words: 0, checksum: "",
                error: ProgressionError.describe(underlying))
            stats.finishRead(result)
            return result
        }
    }

    /// One file's step: continues from its last checkpoint, if any, reports progress per chunk and checkpoints every
    /// ``checkpointInterval`` bytes.
    static func readFile(
        _ file: FileEntry, input: ChecksumInput, context: any TaskContext, stats: JobStats
    ) async throws -> FileResult {
        if let delay = input.fileDelayMilliseconds, delay > 0 {
            try await Task.sleep(for: .milliseconds(delay))
        }
        var digest = try context.lastCheckpoint(as: FileDigest.self) ?? FileDigest()
        if digest.bytes > 0 { stats.continueFromCheckpoint() }
        let reader = try ChunkedFileReader(
            path: file.absolutePath, displayName: file.path, chunkSize: chunkSize, offset: digest.bytes)
        var sinceCheckpoint: Int64 = 0
        let expected = Double(max(file.bytes, 1))
        while true {
            let count = try reader.read { digest.update($0) }
            if count == 0 { break }
            sinceCheckpoint += Int64(count)
            stats.addBytes(Int64(count))
            try await context.report(.completed(min(expected, Double(digest.bytes)), of: expected))
            if sinceCheckpoint >= checkpointInterval, digest.bytes < file.bytes {
                try await context.checkpoint(digest)
                sinceCheckpoint = 0
            }
        }
        return FileResult(
            path: file.path, bytes: digest.bytes, lines: digest.lines, words: digest.words, checksum: digest.checksum)
    }
}

/// Set by a step's closure when it runs: a `push` that returns with the flag unset returned a stored result.
final class RanFlag: Sendable {
    private let value = Atomic<Bool>(false)

    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}
