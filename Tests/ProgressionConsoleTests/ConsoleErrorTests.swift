#if Console
import HTTPTypes
import Progression
import Testing

@testable import ProgressionConsole

/// What the console answers for each reason a store fails, as a table: a failure that passes (the store busy, out of
/// reach, its disk full) is a 503 that says to try again later; the others are 500s.
struct ConsoleErrorTests {
    static let rows: [(TaskStoreError.Reason, HTTPResponse.Status)] = [
        (.busy, .serviceUnavailable), (.unavailable, .serviceUnavailable), (.storageFailure, .serviceUnavailable),
        (.readOnly, .serviceUnavailable), (.cannotOpen, .serviceUnavailable), (.cancelled, .serviceUnavailable),
        (.corrupt, .internalServerError), (.refused, .internalServerError), (.other, .internalServerError),
        (.schemaTooNew, .internalServerError), (.constraint, .internalServerError),
    ]

    @Test(arguments: rows.indices)
    func aStoreFailureBecomesAStatusByItsReason(_ index: Int) {
        let (reason, status) = Self.rows[index]
        let answer = ConsoleError.from(TaskStoreError(reason, path: "/db", message: "m"))
        #expect(answer.error.status == status, "\(reason)")
        #expect(!answer.unexpected)
    }
}
#endif
