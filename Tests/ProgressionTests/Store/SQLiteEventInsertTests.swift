import Foundation
import Progression
import ProgressionTestSupport
import Testing

/// SQLite inserts a batch's events several rows a statement (16, 4, then 1 at a time): every count keeps every event,
/// every value and their order.
struct SQLiteEventInsertTests {
    @Test(arguments: [1, 3, 4, 5, 15, 16, 17, 21, 23, 40])
    func eventsKeepTheirValuesAndOrderWhateverTheirCount(count: Int) async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteTaskStore(path: directory.file("events.sqlite"))
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let root = TaskRecord(id: "r", name: "root", status: .running, createdAt: t0)
        let events = (0..<count).map { index in
            TaskEvent(
                taskID: "r", rootID: "r", kind: index % 2 == 0 ? .progress : .failed, at: t0.addingTimeInterval(Double(index)),
                attempt: 1 + index % 3, progress: index % 4 == 0 ? nil : Double(index) / 100,
                message: index % 5 == 0 ? nil : "event \(index)", errorType: index % 2 == 0 ? nil : "E\(index)")
        }
        try await store.insert([root], events: events)
        let stored = try await store.events(of: "r", after: nil, limit: 1_000)
        #expect(stored.count == count)
        let sequences = stored.compactMap(\.sequence)
        #expect(sequences.count == count && sequences == sequences.sorted())
        let comparable = stored.map { event -> TaskEvent in
            var event = event
            event.sequence = nil
            return event
        }
        #expect(comparable == events)
    }
}
