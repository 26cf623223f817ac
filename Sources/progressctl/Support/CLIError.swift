import Foundation
import Progression

/// A failure to report as one line `progressctl: error: …` with a non-zero exit status.
struct CLIError: Error, CustomStringConvertible {
    var message: String
    /// 1 for a failure, 64 (EX_USAGE) for bad input on the command line.
    var exitCode: Int32

    init(_ message: String, exitCode: Int32 = 1) {
        self.message = message
        self.exitCode = exitCode
    }

    /// Bad input on the command line.
    static func usage(_ message: String) -> CLIError { CLIError(message, exitCode: 64) }

    /// A store error in words, naming the file.
    init(store error: TaskStoreError) {
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

    var description: String { message }
}

extension TaskStore {
    /// Runs a store call, turning its errors into ``CLIError``s.
    func checked<T>(_ body: (Self) async throws -> T) async throws -> T {
        do {
            return try await body(self)
        } catch let error as TaskStoreError {
            throw CLIError(store: error)
        }
    }
}
