#if Console
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Progression
import ProgressionConsole
import ProgressionOperator
import ProgressionTestSupport
import Testing

/// Changes through the console: refused (403) without the token, applied with it — as a bearer header, or signed in
/// with a session and its CSRF token —, one task or every task a filter chooses, through progressctl's control path.
@Suite struct ActionTests {
    @Test(arguments: ConsoleStore.allCases)
    func changesAreRefusedWithoutTheToken(store: ConsoleStore) async throws {
        let readOnly = try await ConsoleFixture(store, token: nil)
        try await readOnly.test { client in
            let response = try await client.post("/tasks/p-1", form: [("action", "pause")], accept: "application/json", headers: bearer)
            #expect(response.status == .forbidden)
            #expect(try object(response)["error"] as? String == "this console is read-only: it was started without a token (--token or $PROGRESSION_CONSOLE_TOKEN)")
            let page = text(try await readOnly.test { try await $0.get("/tasks/p-1") })
            #expect(!page.contains("name=\"action\""), "no buttons on a read-only console")
            #expect(page.contains("read-only"))
        }
        let fixture = try await ConsoleFixture(store)
        try await fixture.test { client in
            let attempts: [(String, HTTPFields, [(String, String)])] = [
                ("no token", [:], [("action", "pause")]),
                ("a wrong bearer token", [.authorization: "Bearer not-the-token-0000000"], [("action", "pause")]),
                ("a made-up session", [.cookie: "progression_console_session=0123456789abcdef0123456789abcdef"],
                 [("action", "pause"), ("csrf", "0123456789abcdef0123456789abcdef")]),
            ]
            for (what, headers, form) in attempts {
                let response = try await client.post("/tasks/p-1", form: form, accept: "application/json", headers: headers)
                #expect(response.status == .forbidden, "\(what)")
                let bulk = try await client.post(
                    "/tasks?kind=import", form: form + [("yes", "1")], accept: "application/json", headers: headers)
                #expect(bulk.status == .forbidden, "\(what): by filter")
            }
            let page = text(try await client.get("/tasks/p-1"))
            #expect(page.contains("<a href=\"/login\">Sign in</a> to pause, cancel it."), "\(page)")
        }
        for id in ["p-1", "p-2", "p-3"] { #expect(try await fixture.store.task(id: id)?.status == .pending, "nothing changed") }
    }

    @Test(arguments: ConsoleStore.allCases)
    func aBearerTokenChangesOneTaskAsProgressctlWould(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        try await fixture.test { client in
            let paused = try await client.post("/tasks/p-1", form: [("action", "pause")], accept: "application/json", headers: bearer)
            #expect(paused.status == .ok, "\(text(paused))")
            let change = try object(paused)
            #expect(change["via"] as? String == "direct" && change["status"] as? String == "paused")
            #expect(change["outcome"] as? String == "applied: pending → paused")

            let dry = try await client.post(
                "/tasks/r-fail", form: [("action", "retry"), ("dryRun", "1")], accept: "application/json", headers: bearer)
            #expect(try object(dry)["outcome"] as? String == "failed → pending, attempt 2")
            let refused = try await client.post("/tasks/r-done", form: [("action", "pause")], accept: "application/json", headers: bearer)
            #expect(refused.status == .conflict, "the lifecycle refuses it: \(text(refused))")
            let unfinished = try await client.post("/tasks/p-2", form: [("action", "remove")], accept: "application/json", headers: bearer)
            #expect(unfinished.status == .conflict)
            #expect((try object(unfinished)["error"] as? String)?.contains("only a finished task is removed") == true)
            let bad = try await client.post("/tasks/p-2", form: [("action", "explode")], accept: "application/json", headers: bearer)
            #expect(bad.status == .badRequest)
            let removed = try await client.post("/tasks/r-done", form: [("action", "remove")], accept: "application/json", headers: bearer)
            #expect(try object(removed)["outcome"] as? String == "deleted 1 task with its history")
        }
        #expect(try await fixture.store.task(id: "p-1")?.status == .paused)
        #expect(try await fixture.store.task(id: "r-fail")?.status == .failed, "a dry run changes nothing")
        #expect(try await fixture.store.task(id: "r-done") == nil)
    }

    @Test(arguments: ConsoleStore.allCases)
    func signingInOpensASessionWhoseFormsCarryItsCSRFToken(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        try await fixture.test { client in
            let login = try await client.get("/login?next=/tasks/p-2")
            let csrf = try #require(cookie("progression_console_csrf", in: login))
            #expect(text(login).contains("name=\"csrf\" value=\"\(csrf)\""))
            let anonymous: HTTPFields = [.cookie: "progression_console_csrf=\(csrf)"]

            let forged = try await client.post("/login", form: [("token", ConsoleFixture.token), ("csrf", "x")], headers: anonymous)
            #expect(forged.status == .forbidden, "a sign-in form from elsewhere")
            let wrong = try await client.post("/login", form: [("token", "guess-guess-guess-guess"), ("csrf", csrf)], headers: anonymous)
            #expect(wrong.status == .forbidden && text(wrong).contains("That is not the console's token."))
            let signedIn = try await client.post(
                "/login", form: [("token", ConsoleFixture.token), ("csrf", csrf), ("next", "/tasks/p-2")], headers: anonymous)
            #expect(signedIn.status == .seeOther && signedIn.headers[.location] == "/tasks/p-2")
            let session = try #require(cookie("progression_console_session", in: signedIn))
            let setCookie = signedIn.headers[values: .setCookie].first { $0.hasPrefix("progression_console_session=") } ?? ""
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"))
            let sessionCookie: HTTPFields = [.cookie: "progression_console_session=\(session)"]

            let page = text(try await client.get("/tasks/p-2", headers: sessionCookie))
            let formToken = try #require(page.firstMatch(of: /name="csrf" value="([0-9a-f]{32})"/)?.1)
            #expect(page.contains("id=\"action-pause\""))

            let withoutToken = try await client.post("/tasks/p-2", form: [("action", "cancel")], headers: sessionCookie)
            #expect(withoutToken.status == .forbidden, "a session without its CSRF token")
            let otherSite = try await client.post(
                "/tasks/p-2", form: [("action", "cancel"), ("csrf", String(formToken))],
                headers: [.cookie: "progression_console_session=\(session)", .origin: "http://evil.example"])
            #expect(otherSite.status == .forbidden, "a form posted from another origin")

            let cancelled = try await client.post(
                "/tasks/p-2", form: [("action", "cancel"), ("csrf", String(formToken))], headers: sessionCookie)
            #expect(cancelled.status == .seeOther)
            let location = try #require(cancelled.headers[.location])
            #expect(location.hasPrefix("/tasks/p-2?notice="))
            let after = text(try await client.get(location, headers: sessionCookie))
            #expect(after.contains("cancel &#39;queued 2&#39;: applied: pending → cancelled"))

            let out = try await client.post("/logout", form: [("csrf", String(formToken))], headers: sessionCookie)
            #expect(out.status == .seeOther)
            let again = try await client.post(
                "/tasks/p-3", form: [("action", "pause"), ("csrf", String(formToken))], headers: sessionCookie)
            #expect(again.status == .forbidden, "the session ended")
        }
        #expect(try await fixture.store.task(id: "p-2")?.status == .cancelled)
        #expect(try await fixture.store.task(id: "p-3")?.status == .pending)
    }

    @Test(arguments: ConsoleStore.allCases)
    func aChangeByFilterShowsItsDryRunThenChangesEveryTaskItChose(store: ConsoleStore) async throws {
        let fixture = try await ConsoleFixture(store)
        try await fixture.test { client in
            let unconfirmed = try await client.post(
                "/tasks?kind=import&status=pending", form: [("action", "pause")], accept: "application/json", headers: bearer)
            #expect(unconfirmed.status == .badRequest)
            #expect(try object(unconfirmed)["error"] as? String == "pause by filter needs yes=1 to go ahead, or dryRun=1 to see what it would do")
            let unfiltered = try await client.post("/tasks", form: [("action", "pause"), ("yes", "1")], accept: "application/json", headers: bearer)
            #expect(unfiltered.status == .badRequest)

            let dry = try object(try await client.post(
                "/tasks?kind=import", form: [("action", "pause"), ("dryRun", "1")], accept: "application/json", headers: bearer))
            #expect(dry["dryRun"] as? Bool == true)
            #expect(dry["matched"] as? Int == 4 && dry["changed"] as? Int == 3, "the pending ones and the running one: \(dry)")
            let refusal = try #require((dry["refused"] as? [[String: Any]])?.first)
            #expect(refusal["id"] as? String == "r-run", "no executor holds the running one to pause it")
            let preview = text(try await client.post(
                "/tasks?kind=import&status=pending", form: [("action", "pause"), ("dryRun", "1")], headers: bearer))
            #expect(preview.contains("would pause 3 of 3 tasks"))
            #expect(preview.contains("id=\"confirm\""), "a button to go ahead")
            #expect(preview.contains("action=\"/tasks?status=pending&amp;kind=import\""), "posting to the same filters")
            for id in ["p-1", "p-2", "p-3"] { #expect(try await fixture.store.task(id: id)?.status == .pending) }

            let done = try object(try await client.post(
                "/tasks?kind=import&status=pending", form: [("action", "pause"), ("yes", "1")], accept: "application/json", headers: bearer))
            #expect(done["changed"] as? Int == 3 && (done["refused"] as? [Any])?.isEmpty == true, "\(done)")

            let removeAll = try object(try await client.post(
                "/tasks?name=queued", form: [("action", "remove"), ("yes", "1")], accept: "application/json", headers: bearer))
            #expect(removeAll["matched"] as? Int == 0, "remove chooses finished tasks unless forced")
            let forced = try object(try await client.post(
                "/tasks?name=queued", form: [("action", "remove"), ("force", "1"), ("yes", "1")], accept: "application/json",
                headers: bearer))
            #expect(forced["changed"] as? Int == 3, "\(forced)")
        }
        for id in ["p-1", "p-2", "p-3"] { #expect(try await fixture.store.task(id: id) == nil) }
        #expect(try await fixture.store.task(id: "r-run")?.status == .running, "outside the filter")
    }

    /// The console in the process of a running executor, mounted as the README shows (both run as the application's
    /// services): a pause goes to the executor as a control request (as progressctl's does) and the job pauses.
    @Test func aConsoleMountedBesideItsExecutorPausesAJobThroughTheExecutor() async throws {
        let directory = try TemporaryDirectory()
        var configuration = TaskExecutor.Configuration()
        configuration.controlPollInterval = .milliseconds(20)
        let executor = try TaskExecutor(path: directory.file("tasks.sqlite"), configuration: configuration)
        try await executor.start()
        let started = Gate()
        let finish = Gate()
        _ = try await executor.addTask(name: "long job", id: "long", options: .interactive) { context in
            try await context.report(.progress(0.1))
            started.open()
            await finish.wait()
            try await context.report(.progress(0.5))
        }
        await started.wait()
        try await executor.flush()
        let console = try ProgressionConsole(
            executor: executor, configuration: ConsoleFixture.configuration(path: "/console", token: ConsoleFixture.token))
        let router = Router()
        console.addRoutes(to: router)
        let app = Application(router: router, services: [executor, console])
        try await app.test(.router) { client in
            let page = try await client.get("/console/tasks/long")
            #expect(page.status == .ok && text(page).contains("<span class=\"name\">long job</span>"))
            let response = try await client.post(
                "/console/tasks/long", form: [("action", "pause")], accept: "application/json", headers: bearer)
            #expect(response.status == .ok, "\(text(response))")
            let change = try object(response)
            #expect(change["via"] as? String == "owner" && change["ownerID"] as? String == executor.ownerID)
            #expect(change["outcome"] as? String == "applied")
            finish.open()
            try await poll("the job to pause at its next report") {
                try await executor.store.task(id: "long")?.status == .paused
            }
        }
    }
}
#endif
