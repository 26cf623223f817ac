#if Console
import Foundation
import Synchronization

/// Who may change tasks: nobody without a token (the console is read-only), and with one, a request that carries it
/// — `Authorization: Bearer <token>` (scripts), or the session cookie that signing in with it opened, together with
/// that session's CSRF token in the form (`csrf`) or the `X-CSRF-Token` header (pages).
///
/// Sessions live in memory: restarting the console signs everyone out. Every form of the console carries a CSRF
/// token; before signing in, it is the one of a `progression_console_csrf` cookie (double submit), so that the
/// sign-in form cannot be posted from another site either.
package final class ConsoleAccess: Sendable {
    /// The token that opens changes, or `nil`: read-only.
    private let token: [UInt8]?
    private let sessions = Mutex<[String: Session]>([:])
    /// How long a session lasts.
    package let sessionLifetime: Duration
    /// The most sessions kept; the oldest goes first.
    static let sessionLimit = 1_000

    /// The session cookie's name.
    package static let sessionCookie = "progression_console_session"
    /// The cookie that carries the CSRF token of a visitor who has not signed in.
    package static let csrfCookie = "progression_console_csrf"

    struct Session {
        var csrf: String
        var expires: ContinuousClock.Instant
        var created: ContinuousClock.Instant
    }

    package init(token: String?, sessionLifetime: Duration = .seconds(12 * 3600)) {
        self.token = token.map { Array($0.utf8) }
        self.sessionLifetime = sessionLifetime
    }

    /// Whether changes are possible at all.
    package var canChange: Bool { token != nil }

    /// Whether `candidate` is the token, compared in constant time.
    package func isToken(_ candidate: String) -> Bool {
        guard let token else { return false }
        return Self.isSameSecret(Array(candidate.utf8), expected: token)
    }

    /// Whether `given` is `expected`, in a time that depends on `expected`'s length only: it does not tell by how long
    /// it took how much of a guess matched, nor how long the secret is. The one comparison of secrets in the console
    /// (the token, CSRF tokens).
    package static func isSameSecret(_ given: [UInt8], expected: [UInt8]) -> Bool {
        var difference = UInt8(given.count == expected.count ? 0 : 1)
        for index in expected.indices {
            difference |= expected[index] ^ (index < given.count ? given[index] : 0)
        }
        return difference == 0
    }

    /// A new random token of 32 hex digits (session ids and CSRF tokens).
    package static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// Opens a session; returns its id and CSRF token.
    package func openSession() -> (id: String, csrf: String) {
        let id = Self.randomToken()
        let csrf = Self.randomToken()
        let now = ContinuousClock.now
        sessions.withLock { sessions in
            sessions = sessions.filter { $0.value.expires > now }
            if sessions.count >= Self.sessionLimit, let oldest = sessions.min(by: { $0.value.created < $1.value.created }) {
                sessions[oldest.key] = nil
            }
            sessions[id] = Session(csrf: csrf, expires: now + sessionLifetime, created: now)
        }
        return (id, csrf)
    }

    /// The CSRF token of the live session `id`, or `nil` when there is none.
    package func csrf(ofSession id: String?) -> String? {
        guard let id, token != nil else { return nil }
        let now = ContinuousClock.now
        return sessions.withLock { sessions in
            guard let session = sessions[id] else { return nil }
            guard session.expires > now else {
                sessions[id] = nil
                return nil
            }
            return session.csrf
        }
    }

    /// Ends the session `id`.
    package func closeSession(_ id: String?) {
        guard let id else { return }
        _ = sessions.withLock { $0.removeValue(forKey: id) }
    }
}

/// Comparing a secret given with the one expected (``ConsoleAccess/isSameSecret(_:expected:)``).
extension String {
    func isSameSecret(as expected: String) -> Bool {
        ConsoleAccess.isSameSecret(Array(utf8), expected: Array(expected.utf8))
    }
}
#endif
