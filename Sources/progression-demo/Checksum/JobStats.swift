import Foundation
import Synchronization

/// Live counters of a checksum job running in this process, for the progress display and the summary. The job's
/// code updates them; the display reads them by job id.
final class JobStats: Sendable {
    struct Counts: Sendable, Hashable {
        var files = 0
        var bytes: Int64 = 0
        /// Files whose step ran and ended (read, or failed).
        var read = 0
        var failed = 0
        /// Files whose stored result was returned without running.
        var skipped = 0
        var continued = 0
        /// Bytes read in this run.
        var bytesRead: Int64 = 0
        /// Bytes of the skipped files.
        var bytesSkipped: Int64 = 0
    }

    private let counts: Mutex<Counts>
    private static let running = Mutex<[String: JobStats]>([:])

    private init(files: Int, bytes: Int64) {
        counts = Mutex(Counts(files: files, bytes: bytes))
    }

    /// New counters for a run of the job `jobID` (a resumed run starts from zero: it counts what it skips).
    static func start(jobID: String, files: Int, bytes: Int64) -> JobStats {
        let stats = JobStats(files: files, bytes: bytes)
        running.withLock { $0[jobID] = stats }
        return stats
    }

    /// The counters of a job that runs, or ran, in this process.
    static func of(jobID: String) -> JobStats? {
        running.withLock { $0[jobID] }
    }

    var snapshot: Counts { counts.withLock { $0 } }
    var read: Int { snapshot.read }
    var skipped: Int { snapshot.skipped }
    var continued: Int { snapshot.continued }

    func skip(_ results: [FileResult]) {
        counts.withLock { counts in
            counts.skipped += results.count
            counts.failed += results.filter { $0.error != nil }.count
            counts.bytesSkipped += results.reduce(0) { $0 + $1.bytes }
        }
    }

    func finishRead(_ result: FileResult) {
        counts.withLock { counts in
            counts.read += 1
            if result.error != nil { counts.failed += 1 }
        }
    }

    func continueFromCheckpoint() {
        counts.withLock { $0.continued += 1 }
    }

    func addBytes(_ bytes: Int64) {
        counts.withLock { $0.bytesRead += bytes }
    }
}
