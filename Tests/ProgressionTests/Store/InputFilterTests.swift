import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// `TaskQuery.inputContains`: the roots whose stored input holds a text's bytes, the same in every store (the
/// console's and progressctl's `--input` filter).
struct InputFilterTests {
    @Test(arguments: StoreKind.allCases)
    func rootsAreChosenByTheBytesOfTheirInput(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let store = try await kind.make(in: directory)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let inputs: [(String, String?)] = [
            ("csv", #"{"file":"a.csv","rows":3}"#), ("CSV", #"{"file":"B.CSV"}"#), ("none", nil),
            ("utf8", #"{"city":"Zürich"}"#), ("binary", nil),
        ]
        var records = inputs.enumerated().map { index, pair in
            var record = makeRecord(id: pair.0, createdAt: t0.addingTimeInterval(Double(index)), kind: "import")
            record.input = pair.1.map { Data($0.utf8) }
            return record
        }
        // Bytes that are not UTF-8 (another writer's) are searched like the rest.
        records[4].input = Data([0xFF, 0xFE, 0x61, 0x2E, 0x63, 0x73, 0x76])
        // A child's input does not make its root match.
        var child = makeRecord(id: "csv.1", parent: records[2], name: "step")
        child.input = Data(#""a.csv""#.utf8)
        records.append(child)
        try await store.insert(records, events: [])

        #expect(try await store.roots(TaskQuery(inputContains: "a.csv")).map(\.id) == ["binary", "csv"])
        #expect(try await store.roots(TaskQuery(inputContains: #""file":"a.csv""#)).map(\.id) == ["csv"])
        #expect(try await store.roots(TaskQuery(inputContains: "b.csv")).isEmpty, "exact: case counts")
        #expect(try await store.roots(TaskQuery(inputContains: "Zürich")).map(\.id) == ["utf8"])
        #expect(try await store.roots(TaskQuery(inputContains: "")).count == 5, "an empty text filters nothing")
        #expect(try await store.countRoots(TaskQuery(statuses: [.pending], inputContains: "file")) == 2)
        #expect(TaskQuery(inputContains: "a.csv").matches(records[0]))
        #expect(!TaskQuery(inputContains: "a.csv").matches(records[2]))
    }
}
