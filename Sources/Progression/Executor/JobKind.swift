import Foundation

/// A job kind as a type: its name, its input, its result and its code, so that registering, submitting and reading a
/// result are checked by the compiler — in the worker that runs it and in the producer that only enqueues it (the
/// string-based ``TaskExecutor/register(_:input:options:maxConcurrent:version:_:)`` and
/// ``TaskExecutor/submit(_:input:options:)-(String,_,_)`` remain for kinds known by name only).
///
/// ```swift
/// struct Resize: JobKind {
///     struct Input: Codable, Sendable {
///         var path: String
///         var width: Int
///     }
///     struct Output: Codable, Sendable { var bytes: Int }
///     static let name = "resize"
///     static let options = TaskOptions.interactive.retryable()
///
///     let images: ImageStore  // the job's dependencies, given when it is registered
///
///     func run(_ input: Input, context: any TaskContext) async throws -> Output {
///         try await context.report(.named("resizing \(input.path)"))
///         return Output(bytes: try await images.resize(input.path, to: input.width))
///     }
/// }
///
/// // The worker:
/// try executor.register(Resize(images: store))
/// // A producer (another process, no handler):
/// let jobs = JobClient(store: try SQLiteTaskStore(path: path))
/// let id = try await jobs.submit(Resize.self, input: .init(path: "a.png", width: 200))
/// let output = try await jobs.result(of: id, as: Resize.self)
/// ```
public protocol JobKind: Sendable {
    /// What a job of this kind is given; stored (as JSON) with the job, so that any process that registered the kind
    /// can run it again.
    associatedtype Input: Codable & Sendable

    /// What a job returns. When it is `Encodable` it is stored with the job as it completes (JSON) and a producer
    /// reads it back; `Void` (the default) stores nothing.
    associatedtype Output: Sendable = Void

    /// The kind's name in the store (what `progressctl submit` and `list --kind` use). Keep it stable: jobs in the
    /// database refer to it.
    static var name: String { get }

    /// The options jobs of this kind get unless their submit gives others; `.default` unless the kind says.
    static var options: TaskOptions { get }

    /// At most this many jobs of the kind run at once across every worker on the database; `nil` (the default): only
    /// each executor's own limit applies.
    static var maxConcurrent: Int? { get }

    /// The version of this code, and which jobs begun by other versions it continues (see ``JobVersion``): a worker
    /// runs a job that a version it cannot continue began only as ``JobVersion/otherwise`` says. `nil` (the
    /// default): it continues any job.
    static var version: JobVersion? { get }

    /// Runs one job: reports progress, pushes steps, stores checkpoints through `context`; returns its result.
    func run(_ input: Input, context: any TaskContext) async throws -> Output
}

extension JobKind {
    /// Cancellable, not pausable, not retryable.
    public static var options: TaskOptions { .default }

    /// No limit of its own.
    public static var maxConcurrent: Int? { nil }

    /// No version: it continues any job.
    public static var version: JobVersion? { nil }
}

extension TaskExecutor {
    /// Registers a job kind given as a type (its instance carries the job's dependencies). An `Encodable` output is
    /// stored with each job as it completes.
    ///
    /// - Throws: ``ProgressionError/kindAlreadyRegistered(_:)`` when a kind of that name is registered already;
    ///   ``ProgressionError/invalidArgument(_:)`` for a limit below 1, a stall limit that is not positive, or a bad
    ///   version name.
    public nonisolated func register<Kind: JobKind>(_ job: Kind) throws {
        try registerKind(
            Kind.name, input: Kind.Input.self, options: Kind.options, maxConcurrent: Kind.maxConcurrent,
            version: Kind.version
        ) { input, context in
            let output = try await job.run(input, context: context)
            guard let encodable = output as? any Encodable else { return nil }
            return try JobCoding.encoder.encode(encodable)
        }
    }

    /// Submits a job of a kind given as a type with ``JobOptions``; as ``submit(_:input:options:)-(String,_,_)``.
    @discardableResult
    public nonisolated func submit<Kind: JobKind>(
        _ kind: Kind.Type, input: Kind.Input, options: JobOptions = JobOptions()
    ) async throws -> String {
        try await submit(Kind.name, input: input, options: options)
    }

    /// Submits many jobs of a kind given as a type in one commit; as ``submit(_:inputs:options:)-(String,_,_)``.
    @discardableResult
    public nonisolated func submit<Kind: JobKind>(
        _ kind: Kind.Type, inputs: [Kind.Input], options: (Kind.Input) -> JobOptions = { _ in JobOptions() }
    ) async throws -> [String] {
        try await submit(Kind.name, inputs: inputs, options: options)
    }
}

