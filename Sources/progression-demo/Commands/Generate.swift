import ArgumentParser
import Foundation

extension ProgressionDemo {
    /// Writes the deterministic sample data set to a folder.
    struct Generate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the sample data set (deterministic text files) to a folder.",
            discussion: "The same size gives the same files, byte for byte, on every machine.")

        @Option(name: .long, help: ArgumentHelp("The folder to write (created; files in it are overwritten).", valueName: "dir"))
        var output: String

        @Option(name: .customLong("size-mb"), help: ArgumentHelp("Total size in megabytes.", valueName: "mb"))
        var sizeMB: Int = 8

        func validate() throws {
            guard sizeMB >= 1 else { throw ValidationError("--size-mb must be 1 or more") }
        }

        func run() async throws {
            let generator = SampleDataGenerator(megabytes: sizeMB)
            try generator.write(to: URL(fileURLWithPath: output))
            TerminalOutput().line("wrote \(generator.plan().count) files, \(sizeMB) MB, to \(output)")
        }
    }
}
