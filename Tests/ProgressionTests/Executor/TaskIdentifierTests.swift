import Foundation
import Progression
import ProgressionTestSupport
import Testing

struct TaskIdentifierTests {
    @Test(arguments: StoreKind.allCases)
    func rootIDsAreShortDistinctAndIncreasingAndSubtaskIDsNameTheirRoot(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(kind, in: directory)
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

    /// Issue 10: ids of roots created together must not share long prefixes. 10,000 jobs submitted in one call (one
    /// transaction, well within a second), each with a step whose id extends its root's: every root is found by its
    /// 8 characters alone, and no 7-character prefix is shared by more than 32 roots (a base-32 digit).
    ///
    /// Only the first 50 jobs (the first to run) are waited for: the ids need the rows, not 10,000 runs, and a wait
    /// for the last ones would measure the machine's throughput (issue 20: 10,000 runs took over 60 s on a loaded
    /// machine against PostgreSQL in a debug build).
    @Test(arguments: StoreKind.allCases)
    func aRootIsFoundByEightCharactersAmongTenThousandCreatedTogether(kind: StoreKind) async throws {
        let directory = try TemporaryDirectory()
        let executor = try await makeExecutor(kind, in: directory)
        try executor.register("noop", input: Int.self) { _, context in try await context.push("step") { _ in } }
        let ids = try await executor.submit("noop", inputs: Array(0..<10_000))
        #expect(Set(ids).count == 10_000)
        for id in ids.prefix(50) { try await executor.runEnded(id) }
        let stored = try await executor.store.roots(TaskQuery(limit: 10_000))
        let created = stored.map(\.createdAt)
        #expect(try #require(created.max()).timeIntervalSince(try #require(created.min())) < 1)
        for id in ids.prefix(50) + [ids[4_999], ids[9_999]] {
            let prefix = String(id.prefix(8))
            #expect(try await executor.store.taskIDs(withPrefix: prefix, rootsOnly: true, limit: 2) == [id])
            if id == ids[49] {
                let all = try await executor.store.taskIDs(withPrefix: prefix, rootsOnly: false, limit: 3)
                #expect(all == [id, id + ".1"], "a step's id names its root, but a root's prefix finds the root")
            }
        }
        let sharing = Dictionary(grouping: ids, by: { $0.prefix(7) }).values.map(\.count).max() ?? 0
        #expect(sharing <= 32)
        await executor.shutdown()
    }
}
