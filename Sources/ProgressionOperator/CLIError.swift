import Foundation
import Progression

/// A failure to report as one line `progressctl: error: …` with a non-zero exit status.
package struct CLIError: Error, CustomStringConvertible, Sendable {
    package var message: String
    /// 1 for a failure, 64 (EX_USAGE) for bad input on the command line.
    package var exitCode: Int32

    package init(_ message: String, exitCode: Int32 = 1) {
        self.message = message
        self.exitCode = exitCode
    }

    /// Bad input on the command line.
    package static func usage(_ message: String) -> CLIError { CLIError(message, exitCode: 64) }

    /// A store error in words, naming the file.
    package init(store error: TaskStoreError) {
        switch error.reason {
        case .schemaTooNew:
            self.init("\(error.description) (upgrade progressctl)")
        case .notADatabase:
            self.init("'\(error.path ?? "?")' is not a Progression database (\(error.message))")
        case .busy:
            self.init("\(error.description) (waited the busy timeout; try again or raise --busy-timeout)")
        default:
            self.init(error.description)
        }
    }

    package var description: String { message }
}

extension TaskStore {
    /// Runs a store call, turning its errors into ``CLIError``s.
    package func checked<T>(_ body: (Self) async throws -> T) async throws -> T {
        do {
            return try await body(self)
        } catch let error as TaskStoreError {
            throw CLIError(store: error)
        }
    }
}
