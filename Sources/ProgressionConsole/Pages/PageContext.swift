#if Console
import Foundation

/// What every page of one request needs besides its data: where the console is mounted, who is asking (read-only,
/// signed out, signed in), the CSRF token its forms carry, and a message left by the request before (a redirect
/// after a change).
package struct PageContext: Sendable {
    /// Who may do what on the page.
    package enum Access: Sendable, Equatable {
        /// The console was started without a token: nobody changes tasks.
        case readOnly
        /// A token opens changes; this visitor has not signed in.
        case signedOut
        /// Signed in (a session, or the token as a bearer header).
        case signedIn
    }

    /// The path the console is mounted at: `""` at the root, else `/console`-like (no trailing slash).
    package var base: String
    package var access: Access
    /// The token the forms carry (the session's, or before signing in the CSRF cookie's).
    package var csrf: String
    /// A message to show once at the top of the page.
    package var notice: Notice?

    /// A message, good or bad.
    package struct Notice: Sendable {
        package var text: String
        package var isError: Bool
        package init(_ text: String, isError: Bool = false) {
            self.text = text
            self.isError = isError
        }
    }

    /// Whether forms that change tasks are shown.
    package var canChange: Bool { access == .signedIn }

    /// The console's path for `path` (which starts with `/`).
    package func link(_ path: String) -> String {
        base + path
    }

    /// The job page of a task.
    package func taskLink(_ id: String, query: String = "") -> String {
        base + "/tasks/" + FormFields.encode(id) + (query.isEmpty ? "" : "?" + query)
    }
}
#endif
