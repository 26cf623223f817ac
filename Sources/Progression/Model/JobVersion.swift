import Foundation

/// The version of a job kind's code, and which jobs begun by other versions it may continue (issue 37: deploys while
/// jobs run).
///
/// A job keeps its completed steps' results and its checkpoint across a crash or a deploy, matched by step name. Code
/// that renamed, reordered or changed the meaning of its steps would reuse results that no longer fit. A kind that
/// declares a version makes every job of it record the version it began under (``TaskRecord/version``): the version
/// of the worker that first started it, written with that start. A worker then continues a job that began — after a
/// crash, a deploy, a pause handed to the fleet, a retry — only under a compatible version (the same, or one of
/// ``continues``), and otherwise does what ``otherwise`` says: leaves the job in the store for a worker that can (a
/// retry asked of it is made in the store, for such a worker), or fails it with ``IncompatibleJobVersionError``.
///
/// A job begun by a kind without a version, or submitted before its kind had one, continues under any version; a kind
/// without a version continues any job.
///
/// ```swift
/// struct Resize: JobKind {
///     // Version 3 renamed a step; it can continue jobs that version 2 began, not those of version 1.
///     static let version: JobVersion? = JobVersion("3", continues: ["2"])
///     …
/// }
/// ```
public struct JobVersion: Sendable, Hashable, Codable, CustomStringConvertible {
    /// What a worker does with a job that a version it cannot continue began.
    public enum Otherwise: String, Sendable, Hashable, Codable, CaseIterable {
        /// Leaves it in the store: the worker does not claim it, and a worker whose version can continue it does.
        /// Until one runs, `progressctl doctor` lists it as waiting for a version.
        case leave
        /// Claims it and fails it at once with ``IncompatibleJobVersionError`` (no retry: no attempt can mend it).
        case fail

        /// The policy named `name` (`leave`, `fail`).
        ///
        /// - Throws: ``ProgressionError/invalidArgument(_:)`` for any other name.
        public init(parsing name: String) throws(ProgressionError) {
            guard let policy = Otherwise(rawValue: name) else {
                throw ProgressionError.invalidArgument(
                    "unknown version policy '\(name)': use \(Otherwise.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            self = policy
        }
    }

    /// This code's version, as jobs record it (at most 100 characters, not empty).
    public var name: String
    /// Versions whose jobs this code can continue, besides its own.
    public var continues: Set<String>
    /// What a worker of this version does with a job it cannot continue.
    public var otherwise: Otherwise

    /// A version `name` that continues its own jobs and those of `continues`, and does `otherwise` with any other.
    public init(_ name: String, continues: Set<String> = [], otherwise: Otherwise = .leave) {
        self.name = name
        self.continues = continues
        self.otherwise = otherwise
    }

    /// Whether this code may continue a job that `version` began (`nil`: a job that recorded none).
    public func canContinue(_ version: String?) -> Bool {
        guard let version else { return true }
        return version == name || continues.contains(version)
    }

    /// "2 (continues 1)".
    public var description: String {
        continues.isEmpty ? name : "\(name) (continues \(continues.sorted().joined(separator: ", ")))"
    }

    /// Refuses an empty or overlong version name, in ``name`` or ``continues``.
    package func check(kind: String) throws(ProgressionError) {
        for version in [name] + continues.sorted() {
            guard !version.isEmpty, version.count <= 100, !version.contains(where: \.isNewline) else {
                throw ProgressionError.invalidArgument(
                    "a version of kind '\(kind)' must be 1 to 100 characters on one line, not '\(version)'")
            }
        }
    }
}

/// A job that a version of its kind's code began, which the version of this worker cannot continue
/// (``JobVersion/otherwise`` is ``JobVersion/Otherwise/fail``). No retry can mend it: the job fails.
public struct IncompatibleJobVersionError: NonRetryableError, LocalizedError, CustomStringConvertible {
    /// The job's kind.
    public var kind: String
    /// The version that began the job.
    public var jobVersion: String
    /// The version of the worker that met it.
    public var workerVersion: JobVersion

    /// The description for people.
    public var errorDescription: String? { description }
    /// "Version 1 of 'resize' began this job; this worker runs version 3 (continues 2), which cannot continue it".
    public var description: String {
        "Version \(jobVersion) of '\(kind)' began this job; this worker runs version \(workerVersion), "
            + "which cannot continue it"
    }
}
