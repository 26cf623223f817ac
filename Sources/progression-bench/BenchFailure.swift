/// A scenario that ran but did not do what it should (a task that did not complete, a child that exited non-zero).
struct BenchFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}
