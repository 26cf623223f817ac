import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// `--input TEXT`: the filters choose jobs by their input's JSON text, in listings and changes by filter alike.
struct InputFilterTests {
    @Test func listAndChangesByFilterChooseJobsByTheirInput() async throws {
        let fixture = try Fixture()
        let inputs = [("a", #"{"file":"a.csv"}"#), ("b", #"{"file":"b.csv"}"#), ("c", #"{"file":"A.CSV"}"#)]
        for (index, pair) in inputs.enumerated() {
            try await fixture.store.insert(
                [TaskRecord(id: pair.0, name: "import \(pair.0)", kind: "import", input: Data(pair.1.utf8),
                            options: .interactive.retryable(), createdAt: fixture.start.addingTimeInterval(Double(index)))],
                events: [])
        }
        let listed = try await fixture.run(["list", "--input", #""file":"a.csv""#, "--json"])
        #expect(listed.status == 0, "\(listed.stderr)")
        let ids = try jsonObjects(listed.stdout).compactMap { $0["id"] as? String }
        #expect(ids == ["a"], "exact text, case and all")

        let cancelled = try await fixture.run(["cancel", "--input", ".csv", "--kind", "import", "--yes"])
        #expect(cancelled.status == 0, "\(cancelled.stderr)")
        #expect(cancelled.stdout.contains("cancelled 2 of 2 tasks"), "\(cancelled.stdout)")  // not A.CSV
        let retried = try await fixture.run(["retry", "--input", "b.csv", "--dry-run"])
        #expect(retried.stdout.contains("would retry 1 of 1 task"), "\(retried.stdout)")
    }
}
