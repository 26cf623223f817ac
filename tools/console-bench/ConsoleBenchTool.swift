import ArgumentParser

/// The console's benchmark, run as `progression-bench console-bench …`: the test and bench tools are targets of the
/// package, not products, so that a package depending on Progression sees only `progressctl`, `progression-demo` and
/// `progression-bench` (issue 36); `progression-bench` hands its arguments after `console-bench` to this tool.
package enum ConsoleBenchTool {
    /// The word after `progression-bench` that runs this tool; a process the tool starts of itself names it too.
    package static let command = "console-bench"

    /// Runs the tool with its arguments (those after `console-bench`); exits the process on a usage error or a failure.
    package static func main(_ arguments: [String]) async {
        await ConsoleBench.main(arguments)
    }
}
