import Synchronization

/// Values recorded by task code, in the order they came.
///
/// ```swift
/// let ran = Recorder<String>()
/// await withTaskGroup(of: Void.self) { group in
///     for id in ["a", "b"] { group.addTask { ran.append(id) } }
/// }
/// #expect(Set(ran.all) == ["a", "b"])
/// ```
public final class Recorder<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])

    /// An empty recorder.
    public init() {}

    /// Records `value`.
    public func append(_ value: Value) { values.withLock { $0.append(value) } }

    /// Every value recorded so far.
    public var all: [Value] { values.withLock { $0 } }
}
