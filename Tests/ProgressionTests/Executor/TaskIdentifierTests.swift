import Foundation
import Progression
import Testing

struct TaskIdentifierTests {
    @Test func generatedIDsAreTimeOrderedUUIDv7() async throws {
        let directory = try TemporaryDirectory()
        let executor = try makeExecutor(.memory, in: directory)
        var ids: [String] = []
        for _ in 0..<50 {
            ids.append(try await executor.addTask(name: "t") { _ in })
            try await Task.sleep(for: .milliseconds(1))
        }
        for id in ids {
            let uuid = try #require(UUID(uuidString: id), "\(id) is not a UUID")
            #expect(uuid.uuidString.lowercased() == id)
            #expect(Array(id)[14] == "7", "version 7")
        }
        #expect(Set(ids).count == ids.count)
        #expect(ids == ids.sorted(), "ids sort by creation time")
        await executor.shutdown()
    }
}
