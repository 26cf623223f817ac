import ArgumentParser
import Foundation
import Logging
import Progression
import ProgressionOperator
#if Console
import ProgressionConsole
#endif

extension Progressctl {
    /// Serves the operator's console in a browser on the database.
    struct Console: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve the operator's console in a browser: live task trees, search, detail, changes.",
            discussion: """
                It shows what the other commands show, live (progress bars update up to four times a second), and \
                changes tasks the way they do. It listens on 127.0.0.1 unless --host says otherwise, and only reads \
                unless it is given a token (--token, or better $PROGRESSION_CONSOLE_TOKEN: a command line is visible \
                to other users); then every change needs the token, as a bearer header or by signing in with it. \
                The first line on stdout is the URL it serves; SIGINT or SIGTERM stops it.

                Built only with the Console trait (swift build --traits Console).

                Examples:
                  progressctl console
                  progressctl console --db /var/lib/myservice/tasks.sqlite --port 8080
                  PROGRESSION_CONSOLE_TOKEN=$(openssl rand -hex 16) progressctl console --db postgres://jobs@db/batch
                """)

        @OptionGroup var options: GlobalOptions

        @Option(name: .long, help: "The address to listen on (an address other hosts reach exposes the console to them).")
        var host = "127.0.0.1"

        @Option(name: .long, parsing: .unconditional, help: "The port to listen on (0: any free port).")
        var port = 8080

        @Option(name: .long, help: ArgumentHelp("The token that allows changes (default: $PROGRESSION_CONSOLE_TOKEN; none: read-only).", valueName: "token"))
        var token: String?

        @Option(name: .long, help: ArgumentHelp("The path the console is served at (default: the root).", valueName: "path"))
        var path = ""

        func validate() throws {
            guard (0...65_535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        }

        func run() async throws {
            #if Console
            let environment = ProcessInfo.processInfo.environment["PROGRESSION_CONSOLE_TOKEN"]
            let token = token ?? (environment?.isEmpty == false ? environment : nil)
            let store = try options.openStore(readOnly: token == nil, connections: 6)
            LoggingSystem.bootstrap(StreamLogHandler.standardError)
            var logger = Logger(label: "progression.console")
            logger.logLevel = .notice
            var configuration = ProgressionConsole.Configuration(path: path, token: token)
            configuration.controlWait = .seconds(5)
            let console: ProgressionConsole
            do {
                console = try ProgressionConsole(operatorStore: store, configuration: configuration, logger: logger)
            } catch let error as ProgressionConsole.ConfigurationError {
                throw CLIError.usage(error.description)
            }
            // Reading the database first: a wrong path or URL fails here, not in the first page.
            _ = try await store.checked { try await $0.changeCounter() }
            let mode = token == nil ? "read-only" : "changes need the token"
            do {
                try await console.serve(host: host, port: port) { url in
                    Terminal.output(url)
                    Terminal.standardError("progressctl: serving the console of \(store.location) on \(url) (\(mode)); Ctrl-C stops it")
                }
            } catch let error as ProgressionConsole.ConfigurationError {
                throw CLIError(error.description)
            }
            #else
            throw CLIError(
                "this progressctl was built without the console (build it with: swift build --traits Console)")
            #endif
        }
    }
}

extension Progressctl.Console: GlobalOptionsCommand {}
