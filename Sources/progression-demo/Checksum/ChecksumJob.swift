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
    /// Files whose step ran in the last run of their folder's job (from the start, or from a checkpoint inside the
    /// file).
    var read: Int
    /// Files whose step had completed in an earlier run of their folder's job: their stored result was returned
    /// without reading.
    var skipped: Int
    /// Files read in the last run of their folder's job that continued from a checkpoint inside the file.
    var continuedFromCheckpoint: Int
    var failures: [FileResult]
    /// Seconds from the job's start to its end (its waits for its folders included).
    var seconds: Double
    /// Each folder's job: when it finished and what it read, for a report that counts the folders an earlier run
    /// finished as skipped.
    var folders: [FolderSummary]?
}

/// One folder's job, as its parent's summary keeps it.
struct FolderSummary: Codable, Sendable, Hashable {
    var folder: String
    var job: String
    var files: Int
    var read: Int
    var skipped: Int
    var continued: Int
    var finishedAt: Date?
}

/// The input of a `checksum-folder` job: the files of one folder of a `checksum` job's directory.
struct FolderInput: Codable, Sendable, Hashable {
    /// The directory the paths are relative to (absolute).
    var directory: String
    /// The folder, relative to the directory (`.` for its top).
    var folder: String
    /// The folder's files, as the parent walked them: relative paths and sizes (the steps' names and weights).
    var files: [FolderFile]
    var parallelFiles: Int?
    var fileDelayMilliseconds: Int?

    var bytes: Int64 { files.reduce(0) { $0 + $1.bytes } }

    /// The folder's name in its parent's tree and as a job's name: `logs/`, `./`.
    var stepName: String { folder == "." ? "./" : folder + "/" }
}

/// A file of a folder job.
struct FolderFile: Codable, Sendable, Hashable {
    var path: String
    var bytes: Int64
}

/// What a folder's job returns: a result per file, and how many it read or found done in this run.
struct FolderOutput: Codable, Sendable, Hashable {
    var results: [FileResult]
    var read: Int
    var skipped: Int
    var continued: Int
}

/// The `checksum-folder` job: one folder of a `checksum` job, which any worker of the database runs. One step per file
/// (named by its relative path, weighted by its size, returning a ``FileResult``), read in 1 MiB chunks with a
/// checkpoint every 8 MiB; a file that cannot be read fails its own step, and the folder records the failure.
struct ChecksumFolder: JobKind {
    typealias Input = FolderInput
    typealias Output = FolderOutput
    static let name = "checksum-folder"
    static let options = TaskOptions.interactive.retryable()

    func run(_ input: FolderInput, context: any TaskContext) async throws -> FolderOutput {
        let entries = input.files.map { file in
            FileEntry(
                path: file.path, absolutePath: input.directory + "/" + file.path, bytes: file.bytes)
        }
        let stats = JobStats.start(jobID: context.taskID, files: entries.count, bytes: input.bytes)
        try await context.report(.named("\(entries.count) files").total(Double(max(input.bytes, 1))))
        // A file's step is pushed when the file gets one of the `parallelFiles` read slots (in path order), so that
        // only the files being read show as running.
        let slots = ReadSlots(width: input.parallelFiles ?? 2)
        let order = Dictionary(uniqueKeysWithValues: entries.enumerated().map { ($1.path, $0) })
        let results = try await ChecksumJob.readFolder(
            entries, input: input, context: context, stats: stats, slots: slots, order: order)
        return FolderOutput(results: results, read: stats.read, skipped: stats.skipped, continued: stats.continued)
    }
}

/// The `checksum` job: walks a directory and checksums each folder as a child job (`checksum-folder`) that any worker
/// of the database may run, weighted by its bytes of the job's total; waits for them (holding no slot), then writes a
/// manifest sorted by path.
///
/// A file that cannot be read fails its own step (the error names it); the folder records the failure in the manifest
/// and the summary, and the job goes on and completes.
enum ChecksumJob {
    static let kind = "checksum"
    static let chunkSize = 1 << 20
    static let checkpointInterval: Int64 = 8 << 20

    /// Registers the kinds on `executor` (the job and its folders): pausable, cancellable and retryable by default.
    /// With `logger`, each job logs its own completion with its summary, as its code ends: a line per job, in time (a
    /// log fed by the progress stream, which coalesces, missed jobs that came and went between two graphs, and ran
    /// behind).
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
        try executor.register(ChecksumFolder())
    }

    @discardableResult
    static func run(_ input: ChecksumInput, context: any TaskContext) async throws -> JobSummary {
        let first = (try? context.lastCheckpoint(as: Started.self)) ?? nil
        let started = first?.at ?? Date()
        let directory = input.directoryPath
        let manifest = input.manifestPath
        // Checked before anything is read: the manifest is written by a rename that would replace a device or a pipe.
        try Manifest.checkWritable(manifest)
        let entries = try DirectoryWalker.files(in: directory, excluding: manifest)
        let folders = Dictionary(grouping: entries, by: \.folder).sorted { $0.key < $1.key }
        let totalBytes = entries.reduce(0) { $0 + $1.bytes }
        // The job's work is its bytes: each folder's job weighs its bytes of that total (and each file its bytes of its
        // folder's), so that the job reads proportionally from the first byte, wherever its folders run.
        try await context.report(
            .named("\(entries.count) files in \(folders.count) folders").total(Double(max(totalBytes, 1))))
        if first == nil { try await context.checkpoint(Started(at: started)) }
        let inputs = folders.map { folder, files in
            FolderInput(
                directory: directory, folder: folder,
                files: files.map { FolderFile(path: $0.path, bytes: $0.bytes) }, parallelFiles: input.parallelFiles,
                fileDelayMilliseconds: input.fileDelayMilliseconds)
        }
        let children = try await context.startChildren(ChecksumFolder.self, inputs: inputs) { folder in
            ChildJobOptions(name: folder.stepName, weight: Double(max(folder.bytes, 1)))
        }
        let outcomes = try await context.wait(for: children)
        let decoder = JSONDecoder()
        var results: [FileResult] = []
        var folderSummaries: [FolderSummary] = []
        for (folder, outcome) in zip(inputs, outcomes) {
            let output = try decoder.decode(FolderOutput.self, from: outcome.result ?? Data("null".utf8))
            results += output.results
            folderSummaries.append(
                FolderSummary(
                    folder: folder.folder, job: outcome.id, files: output.results.count, read: output.read,
                    skipped: output.skipped, continued: output.continued, finishedAt: outcome.finishedAt))
        }
        results.sort { $0.path < $1.path }

        try Manifest(results: results).write(to: manifest)
        let summary = JobSummary(
            directory: directory, manifest: manifest, files: results.count, bytes: totalBytes,
            read: folderSummaries.reduce(0) { $0 + $1.read }, skipped: folderSummaries.reduce(0) { $0 + $1.skipped },
            continuedFromCheckpoint: folderSummaries.reduce(0) { $0 + $1.continued }, failures: results.filter { $0.error != nil },
            seconds: Date().timeIntervalSince(started), folders: folderSummaries)
        try await context.checkpoint(summary)
        try await context.report(.named("done").progress(1))
        return summary
    }

    /// When the job first started: its summary's time counts its waits for its folders.
    struct Started: Codable, Sendable {
        var at: Date
    }

    /// Pushes a folder's file steps at once; each reads its file when it gets a slot. A failed file step becomes a
    /// ``FileResult`` with its error.
    static func readFolder(
        _ files: [FileEntry], input: FolderInput, context: any TaskContext, stats: JobStats, slots: ReadSlots,
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
        _ file: FileEntry, input: FolderInput, context: any TaskContext, stats: JobStats, slots: ReadSlots, order: Int
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
        _ file: FileEntry, input: FolderInput, context: any TaskContext, stats: JobStats
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
