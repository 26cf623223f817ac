import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// progressctl for a fleet and for time (issues 22, 23): named and delayed submissions, a kind no worker knows
/// refused, run-now, kinds paused across workers, schedules, input values as filters, partial failure shown.
@Suite struct FleetCommandTests {
    @Test func aDelayedJobIsListedAsScheduledAndRunNowClearsItsTime() async throws {
        let fixture = try Fixture()
        let at = "2031-05-01T03:00:00Z"
        let submitted = try await fixture.run(
            ["submit", "--allow-unregistered", "report", "--input", "{}", "--name", "monthly report", "--at", at, "--pausable"])
        #expect(submitted.status == 0, "\(submitted.stderr)")
        let id = submitted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let stored = try #require(try await fixture.store.task(id: id))
        #expect(stored.name == "monthly report" && stored.ownerID == nil)
        #expect(stored.nextAttemptAt == ISO8601DateFormatter().date(from: at))
        #expect(try await fixture.store.events(of: id).map(\.kind) == [.created, .scheduled])

        let listed = try await fixture.run(["list"])
        let line = try #require(listed.stdout.split(separator: "\n").first { $0.contains(id) })
        #expect(line.contains("scheduled") && line.contains("monthly report") && line.contains("runs 2031-05-01"), "\(line)")
        let json = try jsonObjects(try await fixture.run(["list", "--json"]).stdout)
        #expect(json.first?["state"] as? String == "scheduled" && json.first?["status"] as? String == "pending")

        // Paused before its time and resumed: it keeps its time.
        #expect(try await fixture.run(["pause", id]).status == 0)
        #expect(try await fixture.run(["resume", id]).status == 0)
        #expect(try await fixture.store.task(id: id)?.nextAttemptAt != nil)
        let now = try await fixture.run(["run-now", id])
        #expect(now.status == 0, "\(now.stderr)")
        let cleared = try #require(try await fixture.store.task(id: id))
        #expect(cleared.nextAttemptAt == nil && cleared.status == .pending)
        // Again: it waits for no time any more.
        let again = try await fixture.run(["run-now", id])
        #expect(again.status == 1 && again.stderr.contains("it waits for no time"), "\(again.stderr)")
        // Cancelled before its time.
        let later = try await fixture.run(["submit", "--allow-unregistered", "report", "--input", "{}", "--delay", "2h"])
        let second = later.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let delayed = try #require(try await fixture.store.task(id: second)?.nextAttemptAt)
        #expect(abs(delayed.timeIntervalSinceNow - 7200) < 60)
        #expect(try await fixture.run(["cancel", second]).status == 0)
        #expect(try await fixture.store.task(id: second)?.status == .cancelled)
    }

    @Test(arguments: [
        (["submit", "report", "--input", "{}", "--at", "tomorrow"], "invalid time 'tomorrow' for --at"),
        (["submit", "report", "--input", "{}", "--delay", "10x"], "invalid duration '10x' for --delay"),
        (["submit", "report", "--input", "{}", "--delay", "99999999d"], "is too long"),
        (["submit", "report", "--input", "{}", "--at", "10000-01-01T00:00:00Z"], "is past the year 9999"),
        (["submit", "report", "--input", "{}", "--at", "2030-01-01T00:00:00Z", "--delay", "1m"], "give --at or --delay, not both"),
        (["list", "--input-field", "a b=1"], "invalid input filter 'a b=1'"),
        (["list", "--input-field", "novalue"], "invalid input filter 'novalue'"),
    ])
    func badTimesAndFiltersAreRefusedAndWriteNothing(arguments: [String], message: String) async throws {
        let fixture = try Fixture()
        let result = try await fixture.run(arguments)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.errorLines.count == 1 && result.stderr.contains(message), "\(result.stderr)")
        #expect(try await fixture.store.countRoots(TaskQuery()) == 0)
    }

    @Test func aKindNoWorkerRegisteredIsRefusedWithASuggestion() async throws {
        let fixture = try Fixture()
        try await fixture.store.saveKinds(["checksum": StoredKind(options: .interactive)], at: Date())
        // (Not the file's bytes: reading the file in this process would drop the store's locks, POSIX locks being
        // per process.)
        let typo = try await fixture.run(["submit", "chekcsum", "--input", "{}"])
        #expect(typo.status == 64)
        #expect(typo.stderr.contains("no worker registered the job kind 'chekcsum' (did you mean 'checksum'?)"), "\(typo.stderr)")
        #expect(typo.stderr.contains("--allow-unregistered"))
        #expect(try await fixture.store.countRoots(TaskQuery()) == 0)
        // A known kind whose workers are not running: accepted, with a warning.
        let known = try await fixture.run(["submit", "checksum", "--input", "{}"])
        #expect(known.status == 0 && known.stderr.contains("no running worker runs 'checksum'"), "\(known.stderr)")
        // A live worker that registered the kind: no warning.
        try await fixture.store.saveOwner(
            OwnerRecord(
                id: "w", host: OwnerRecord.currentHost, pid: getpid(), startedAt: Date(), heartbeatAt: Date(),
                kinds: ["checksum"]))
        let quiet = try await fixture.run(["submit", "checksum", "--input", "{}"])
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")
        // --allow-unregistered queues a kind nobody knows yet.
        let allowed = try await fixture.run(["submit", "chekcsum", "--input", "{}", "--allow-unregistered"])
        #expect(allowed.status == 0)
        // doctor names the pending jobs no live worker can run.
        let doctor = try await fixture.run(["doctor"])
        #expect(doctor.stdout.contains("no running worker runs 'chekcsum': 1 pending job wait for one"), "\(doctor.stdout)")
        #expect(!doctor.stdout.contains("runs 'checksum':"))
    }

    @Test func kindsArePausedAndResumedAcrossWorkers() async throws {
        let fixture = try Fixture()
        try await fixture.store.saveKinds(
            ["import": StoredKind(options: .default, maxConcurrent: 3), "export": StoredKind(options: .default)], at: Date())
        try await fixture.root("a")
        #expect(try await fixture.run(["pause-kind", "import"]).stdout.contains("paused kind 'import'"))
        #expect(try await fixture.run(["pause-kind", "import"]).stdout.contains("was paused already"))
        #expect(try await fixture.store.pausedKinds()["import"] != nil)
        let listed = try await fixture.run(["kinds"])
        let line = try #require(listed.stdout.split(separator: "\n").first { $0.hasPrefix("import") })
        #expect(line.contains("paused") && line.contains(" 3 "), "\(listed.stdout)")
        let json = try jsonObjects(try await fixture.run(["kinds", "--json"]).stdout)
        #expect(json.first { $0["name"] as? String == "import" }?["pending"] as? Int == 1)
        #expect(try await fixture.run(["resume-kind", "import"]).stdout.contains("resumed kind 'import'"))
        #expect(try await fixture.store.pausedKinds().isEmpty)
    }

    @Test func schedulesAreListedPausedResumedTriggeredAndRemoved() async throws {
        let fixture = try Fixture()
        let next = Date(timeIntervalSince1970: 1_900_000_000)
        _ = try await fixture.store.saveSchedules(
            [
                ScheduleRecord(
                    name: "nightly", kind: "export", input: Data(#"{"full":true}"#.utf8), cron: "30 3 * * *",
                    timeZone: "Europe/Berlin", missed: .runOnce, nextFireAt: next, updatedAt: Date())
            ], at: Date())
        let listed = try await fixture.run(["schedules"])
        #expect(listed.stdout.contains("nightly") && listed.stdout.contains("30 3 * * *"), "\(listed.stdout)")
        #expect(listed.stdout.contains("Europe/Berlin") && listed.stdout.contains("run once"))
        #expect(try await fixture.run(["schedules", "pause", "nightly"]).status == 0)
        #expect(try await fixture.store.schedules().first?.paused == true)
        let resumed = try await fixture.run(["schedules", "resume", "nightly"])
        #expect(resumed.status == 0 && resumed.stdout.contains("next tick"))
        let schedule = try #require(try await fixture.store.schedules().first)
        #expect(!schedule.paused && schedule.nextFireAt > Date())
        let triggered = try await fixture.run(["schedules", "trigger", "nightly"])
        let id = triggered.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let job = try #require(try await fixture.store.task(id: id))
        #expect(job.kind == "export" && job.input == Data(#"{"full":true}"#.utf8) && job.status == .pending)
        let unknown = try await fixture.run(["schedules", "pause", "weekly"])
        #expect(unknown.status == 1 && unknown.stderr.contains("no schedule named 'weekly' (schedules: nightly)"))
        #expect(try await fixture.run(["schedules", "remove", "nightly"]).status == 0)
        #expect(try await fixture.store.schedules().isEmpty)
        #expect(try await fixture.store.task(id: id) != nil, "its jobs stay")
    }

    @Test func jobsAreChosenByValuesOfTheirInput() async throws {
        let fixture = try Fixture()
        let inputs = [
            ("a", #"{"customer":{"id":42},"region":"eu","urgent":true}"#),
            ("b", #"{"customer":{"id":7},"region":"eu","urgent":false}"#),
            ("c", #"{"customer":{"id":42},"region":"us"}"#),
            ("d", "[1,2]"),
        ]
        for (id, input) in inputs {
            try await fixture.store.insert(
                [TaskRecord(id: id, name: id, kind: "import", input: Data(input.utf8), createdAt: fixture.start)], events: [])
        }
        func ids(_ filters: [String]) async throws -> [String] {
            let result = try await fixture.run(["list", "--json"] + filters.flatMap { ["--input-field", $0] })
            return try jsonObjects(result.stdout).compactMap { $0["id"] as? String }.sorted()
        }
        #expect(try await ids(["customer.id=42"]) == ["a", "c"])
        #expect(try await ids(["customer.id=42", "region=eu"]) == ["a"])
        #expect(try await ids(["urgent=false"]) == ["b"])
        #expect(try await ids(["region=asia"]) == [])
        // The same filter changes what it chooses.
        let cancelled = try await fixture.run(["cancel", "--input-field", "region=us", "--yes"])
        #expect(cancelled.status == 0, "\(cancelled.stderr)")
        #expect(try await fixture.store.task(id: "c")?.status == .cancelled)
        #expect(try await fixture.store.task(id: "a")?.status == .pending)
    }

    @Test func aJobThatCompletedWithFailedStepsSaysSo() async throws {
        let fixture = try Fixture()
        let root = try await fixture.root("job", status: .completed, progress: 1)
        try await fixture.child("job.1", of: root, name: "unreadable.txt", status: .failed)
        try await fixture.child("job.2", of: root, name: "fifo", status: .failed)
        try await fixture.child("job.3", of: root, name: "ok.txt", status: .completed)
        try await fixture.root("clean", status: .completed, progress: 1)
        let listed = try await fixture.run(["list"])
        let line = try #require(listed.stdout.split(separator: "\n").first { $0.hasPrefix("job ") })
        #expect(line.contains("completed, 2 failed steps"), "\(listed.stdout)")
        #expect(!(listed.stdout.split(separator: "\n").first { $0.hasPrefix("clean") }?.contains("failed") ?? true))
        let json = try jsonObjects(try await fixture.run(["list", "--json"]).stdout)
        #expect(json.first { $0["id"] as? String == "job" }?["failedSteps"] as? Int == 2)
        #expect(json.first { $0["id"] as? String == "clean" }?["failedSteps"] as? Int == 0)
        let stats = try await fixture.run(["stats"])
        #expect(stats.stdout.contains("(1 with failed steps)"), "\(stats.stdout)")
        #expect(try jsonObjects(try await fixture.run(["stats", "--json"]).stdout).first?["completedWithFailedSteps"] as? Int == 1)
        let shown = try await fixture.run(["show", "job"])
        #expect(shown.stdout.contains("completed, 2 failed steps"), "\(shown.stdout)")
    }
}
