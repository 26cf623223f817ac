import ArgumentParser

/// The fault test, run as `progression-bench fault-test …`: the test and bench tools are targets of the
/// package, not products, so that a package depending on Progression sees only `progressctl`, `progression-demo` and
/// `progression-bench` (issue 36); `progression-bench` hands its arguments after `fault-test` to this tool.
package enum FaultTestTool {
    /// The word after `progression-bench` that runs this tool; a process the tool starts of itself names it too.
    package static let command = "fault-test"

    /// Runs the tool with its arguments (those after `fault-test`); exits the process on a usage error or a failure.
    package static func main(_ arguments: [String]) async {
        await FaultTest.main(arguments)
    }
}
