#if Console
import Foundation
import Hummingbird
import HummingbirdTesting
import Progression
import ProgressionConsole
import ProgressionOperator
import ProgressionTestSupport
import Testing

/// Names, inputs, steps and errors are user data: the one place that escapes them (`HTML`), and the pages that show
/// them.
@Suite struct EscapingTests {
    @Test(arguments: [
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("\"'><img src=x onerror=alert(1)>", "&quot;&#39;&gt;&lt;img src=x onerror=alert(1)&gt;"),
        ("a & b", "a &amp; b"),
        ("bell\u{07} esc\u{1B}[2J nul\u{00} del\u{7F}", "bell\\x07 esc\\e[2J nul\\x00 del\\x7F"),
        ("line\nbreak\ttab\rreturn", "line\\nbreak\\ttab\\rreturn"),
        ("rtl \u{202E}gnp.exe \u{2028}", "rtl \\u{202E}gnp.exe \\u{2028}"),
        ("naïve 日本 🚀", "naïve 日本 🚀"),
    ])
    func textIsEscapedForElementsAndAttributes(text: String, escaped: String) {
        #expect(HTML.escape(text) == escaped)
        let html: HTML = "<td title=\"\(text)\">\(text)</td>"
        #expect(html.markup == "<td title=\"\(escaped)\">\(escaped)</td>")
        #expect(!html.markup.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
    }

    @Test func linesKeepTheirBreaksAndNothingElse() {
        let html: HTML = "<pre>\(lines: "{\n  \"a\": \"<b>\u{1B}\"\n}")</pre>"
        #expect(html.markup == "<pre>{\n  &quot;a&quot;: &quot;&lt;b&gt;\\e&quot;\n}</pre>")
        let nested: HTML = "<p>\(HTML("<b>\("<i>")</b>"))</p>"
        #expect(nested.markup == "<p><b>&lt;i&gt;</b></p>", "markup stays markup, text inside it text")
    }

    @Test(arguments: ConsoleStore.allCases)
    func hostileNamesInputsAndErrorsAreTextOnEveryPage(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        try await fixture.store.insert(
            [TaskRecord(
                id: "x\"><script>alert(2)</script>", name: "\u{1B}]0;title\u{07}<svg onload=alert(3)>",
                kind: "<b>kind</b>", input: Data(#"{"k":"</pre><script>alert(4)</script>"}"#.utf8),
                createdAt: ConsoleFixture.start.addingTimeInterval(100))],
            events: [])
        try await fixture.test { client in
            let encodedID = "x%22%3E%3Cscript%3Ealert(2)%3C%2Fscript%3E"
            for uri in ["/", "/tasks", "/tasks/r-run", "/tasks/r-fail", "/tasks/\(encodedID)", "/tasks?name=%3Cscript%3E"] {
                let response = try await client.get(uri)
                #expect(response.status == .ok, "\(uri)")
                let html = text(response)
                #expect(!html.contains("<script>alert"), "\(uri)")
                #expect(!html.contains("<svg onload"), "\(uri)")
                #expect(!html.contains("<img src=x"), "\(uri)")
                #expect(!html.contains("<b>kind"), "\(uri)")
                #expect(!html.contains("</pre><script>"), "\(uri)")
                #expect(!html.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) }, "\(uri): no raw control characters")
            }
            let list = text(try await client.get("/tasks"))
            #expect(list.contains("\\e]0;title\\x07&lt;svg onload=alert(3)&gt;"))
            #expect(list.contains("href=\"/tasks/x%22%3E%3Cscript%3Ealert%282%29%3C%2Fscript%3E\""), "the id percent-encoded in links")
            let job = text(try await client.get("/tasks/\(encodedID)"))
            #expect(job.contains("&quot;&lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;&quot;"))
            #expect(text(try await client.get("/tasks/r-run")).contains("<span class=\"name\">nightly &lt;script&gt;alert(1)&lt;/script&gt;</span>"))
            // JSON keeps the text as it is: the browser's script puts it into the page with textContent.
            let (_, document) = try await client.json("/tasks?name=nightly")
            #expect((document["tasks"] as? [[String: Any]])?.first?["name"] as? String == ConsoleFixture.scriptName)
        }
    }
}
#endif
