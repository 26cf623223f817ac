/// A test's failure with a message: what a helper throws when a wait ends at its deadline, a binary is missing or a
/// child process does not end.
///
/// ```swift
/// guard FileManager.default.fileExists(atPath: path) else { throw TestFailure("no \(path)") }
/// ```
public struct TestFailure: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public var description: String

    /// A failure that says `description`.
    public init(_ description: String) { self.description = description }

    /// The failure of a wait for `what` that reached its deadline: "timed out waiting for `what`".
    public static func timedOut(waitingFor what: String) -> TestFailure {
        TestFailure("timed out waiting for \(what)")
    }
}
