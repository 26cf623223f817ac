import ArgumentParser

/// The crash test, run as `progression-bench crash-test …`: the test and bench tools are targets of the
/// package, not products, so that a package depending on Progression sees only `progressctl`, `progression-demo` and
/// `progression-bench` (issue 36); `progression-bench` hands its arguments after `crash-test` to this tool.
package enum CrashTestTool {
    /// The word after `progression-bench` that runs this tool; a process the tool starts of itself names it too.
    package static let command = "crash-test"

    /// Runs the tool with its arguments (those after `crash-test`); exits the process on a usage error or a failure.
    package static func main(_ arguments: [String]) async {
        await CrashTest.main(arguments)
    }
}
