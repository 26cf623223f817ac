import Foundation

/// A job kind as a type: its name, its input and its code, so that registering and submitting are checked by the
/// compiler (the string-based ``TaskExecutor/register(_:input:options:_:)`` and
/// ``TaskExecutor/submit(_:input:id:name:options:idempotencyKey:)-(_,Input,_,_,_,_)`` remain for kinds known by name only).
///
/// ```swift
/// struct Resize: JobKind {
///     struct Input: Codable, Sendable {
///         var path: String
///         var width: Int
///     }
///     static let name = "resize"
///     static let options = TaskOptions.interactive.retryable()
///
///     let images: ImageStore  // the job's dependencies, given when it is registered
///
///     func run(_ input: Input, context: any TaskContext) async throws {
///         try await context.report(.named("resizing \(input.path)"))
///         try await images.resize(input.path, to: input.width)
///     }
/// }
///
/// try executor.register(Resize(images: store))
/// let id = try await executor.submit(Resize.self, input: .init(path: "a.png", width: 200))
/// ```
public protocol JobKind: Sendable {
    /// What a job of this kind is given; stored (as JSON) with the job, so that any process that registered the kind
    /// can run it again.
    associatedtype Input: Codable & Sendable

    /// The kind's name in the store (what `progressctl submit` and `list --kind` use). Keep it stable: jobs in the
    /// database refer to it.
    static var name: String { get }

    /// The options jobs of this kind get unless their submit gives others; `.default` unless the kind says.
    static var options: TaskOptions { get }

    /// Runs one job: reports progress, pushes steps, stores checkpoints through `context`.
    func run(_ input: Input, context: any TaskContext) async throws
}

extension JobKind {
    /// Cancellable, not pausable, not retryable.
    public static var options: TaskOptions { .default }
}

extension TaskExecutor {
    /// Registers a job kind given as a type (its instance carries the job's dependencies).
    ///
    /// - Throws: ``ProgressionError/kindAlreadyRegistered(_:)`` when a kind of that name is registered already.
    public nonisolated func register<Kind: JobKind>(_ job: Kind) throws {
        try register(Kind.name, input: Kind.Input.self, options: Kind.options) { input, context in
            try await job.run(input, context: context)
        }
    }

    /// Submits a job of a kind given as a type; as ``submit(_:input:id:name:options:idempotencyKey:)``.
    @discardableResult
    public func submit<Kind: JobKind>(
        _ kind: Kind.Type, input: Kind.Input, id: String? = nil, name: String? = nil, options: TaskOptions? = nil,
        idempotencyKey: String? = nil
    ) async throws -> String {
        try await submit(Kind.name, input: input, id: id, name: name, options: options, idempotencyKey: idempotencyKey)
    }

    /// Submits many jobs of a kind given as a type in one commit; as ``submit(_:inputs:options:idempotencyKey:)``.
    @discardableResult
    public func submit<Kind: JobKind>(
        _ kind: Kind.Type, inputs: [Kind.Input], options: TaskOptions? = nil,
        idempotencyKey: ((Kind.Input) -> String)? = nil
    ) async throws -> [String] {
        try await submit(Kind.name, inputs: inputs, options: options, idempotencyKey: idempotencyKey)
    }
}
