#if Console
import Foundation

/// The console's files, compiled into the binary (no CDN, no npm, nothing read from disk): its stylesheet, its
/// script and its icon. Their URLs carry ``version`` (a hash of their contents), so a browser may keep them.
package enum ConsoleAssets {
    /// A file served under `/assets/`.
    package struct Asset: Sendable {
        package var contentType: String
        package var body: String
    }

    package static let files: [String: Asset] = [
        "console.css": Asset(contentType: "text/css; charset=utf-8", body: ConsoleStyle.source),
        "console.js": Asset(contentType: "text/javascript; charset=utf-8", body: ConsoleScript.source),
        "icon.svg": Asset(contentType: "image/svg+xml", body: icon),
    ]

    /// FNV-1a of the stylesheet and the script, in hex.
    package static let version: String = {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (ConsoleStyle.source + ConsoleScript.source).utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return String(hash, radix: 16)
    }()

    static let icon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1d2430"/>\
        <rect x="3" y="4" width="10" height="2" fill="#2f855a"/><rect x="3" y="7.5" width="7" height="2" fill="#1479b8"/>\
        <rect x="3" y="11" width="4" height="2" fill="#b7791f"/></svg>
        """
}
#endif
