import Foundation
import Progression
import ProgressionTestSupport
import Testing

struct TaskIdentifierTests {
    @Test(arguments: StoreKind.allCases)
    func rootIDsAreShortDistinctAndIncreasingAndSubtaskIDsNameTheirRoot(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let executor = try makeExecutor(kind, in: directory)
        var ids: [String] = []
        for _ in 0..<50 {
            ids.append(
                try await executor.addTask(name: "t") { context in try await context.push("step") { _ in } })
        }
        let alphabet = Set("0123456789abcdefghjkmnpqrstvwxyz")
        for id in ids {
            #expect(id.count == 8 && id.allSatisfy(alphabet.contains), "\(id)")
        }
        #expect(Set(ids).count == ids.count)
        #expect(ids == ids.sorted(), "ids sort by creation")
        try await executor.runEnded(ids[0])
        let tree = try await executor.store.tree(of: ids[0])
        #expect(tree.map(\.id) == [ids[0], ids[0] + ".1"])
        await executor.shutdown()
    }

    @Test func aRootIDDecodesToItsSequenceValue() {
        for value: Int64 in [0, 1, 31, 32, 1_234_567, (1 << 40) - 1] {
            let id = TaskIdentifier.root(value)
            #expect(id.count == 8)
            #expect(TaskIdentifier.sequenceValue(ofRoot: id) == value)
        }
        #expect(TaskIdentifier.root(1 << 40).count == 9)
        #expect(TaskIdentifier.sequenceValue(ofRoot: "not-an-id") == nil)
        #expect(TaskIdentifier.childNumber("abc.12", root: "abc") == 12)
        #expect(TaskIdentifier.childNumber("abcd.12", root: "abc") == nil)
    }
}
