import ArgumentParser

/// The fleet's test processes, run as `progression-bench fleet-test …`: the test and bench tools are targets of the
/// package, not products, so that a package depending on Progression sees only `progressctl`, `progression-demo` and
/// `progression-bench` (issue 36); `progression-bench` hands its arguments after `fleet-test` to this tool.
package enum FleetTestTool {
    /// The word after `progression-bench` that runs this tool; a process the tool starts of itself names it too.
    package static let command = "fleet-test"

    /// Runs the tool with its arguments (those after `fleet-test`); exits the process on a usage error or a failure.
    package static func main(_ arguments: [String]) async {
        await FleetTest.main(arguments)
    }
}
