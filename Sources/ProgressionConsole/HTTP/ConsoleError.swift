#if Console
import Foundation
import HTTPTypes
import Hummingbird
import Progression
import ProgressionOperator

/// A request the console does not serve, as a status and one sentence: the error page shows it, the JSON API
/// returns it as `{"error": …, "status": …}`. Whatever else goes wrong becomes a 500 with a generic sentence (the
/// details go to the log, never to the page).
package struct ConsoleError: Error, Sendable, CustomStringConvertible {
    package var status: HTTPResponse.Status
    package var message: String

    package init(_ status: HTTPResponse.Status, _ message: String) {
        self.status = status
        self.message = message
    }

    package var description: String { "\(status.code) \(message)" }

    static func badRequest(_ message: String) -> ConsoleError { ConsoleError(.badRequest, message) }
    static func forbidden(_ message: String) -> ConsoleError { ConsoleError(.forbidden, message) }
    static func notFound(_ message: String) -> ConsoleError { ConsoleError(.notFound, message) }

    /// The console's reading of any error: its own as they are, progressctl's (``CLIError``: bad input 400, else
    /// 404 for a missing task and 409 for a refusal), a refused change 409, the store's 503 (busy, unreachable) or
    /// 500; anything else a 500 that says only that.
    static func from(_ error: any Error) -> (error: ConsoleError, unexpected: Bool) {
        switch error {
        case let error as ConsoleError:
            return (error, false)
        case let error as CLIError:
            if error.exitCode == 64 { return (.badRequest(error.message), false) }
            if error.message.hasPrefix("no task with id") || error.message.contains("has no subtask") {
                return (.notFound(error.message), false)
            }
            return (ConsoleError(.conflict, error.message), false)
        case let refusal as TaskControl.Refusal:
            return (ConsoleError(.conflict, refusal.message), false)
        case let error as TaskStoreError:
            let message = CLIError(store: error).message
            switch error.reason {
            case .busy, .cannotOpen, .cancelled, .unavailable, .storageFailure, .readOnly:
                return (ConsoleError(.serviceUnavailable, message), false)
            default: return (ConsoleError(.internalServerError, message), false)
            }
        default:
            return (ConsoleError(.internalServerError, "the console failed to answer this request (its log says why)"), true)
        }
    }
}
#endif
