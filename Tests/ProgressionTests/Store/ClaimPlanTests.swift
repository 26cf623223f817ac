import Foundation
import Progression
import Testing

/// What a claim takes, decided once for the three stores (``ClaimPlan``), as a table: the kinds its read keeps and the
/// room of limited kinds from what the store read, and which candidates it takes.
struct ClaimPlanTests {
    struct FilterCase: Sendable, CustomTestStringConvertible {
        var name: String
        var kinds: Set<String>?
        var paused: Set<String> = []
        var limits: [String: Int] = [:]
        var owned: [String: Int] = [:]
        var filter: ClaimPlan.KindFilter
        var room: [String: Int] = [:]
        var testDescription: String { name }
    }

    static let filterCases: [FilterCase] = [
        FilterCase(name: "nothing paused or limited: every kind", kinds: nil, filter: .all),
        FilterCase(name: "a paused kind is left", kinds: nil, paused: ["b"], filter: .allBut(["b"])),
        FilterCase(
            name: "a full kind is left with the paused ones", kinds: nil, paused: ["b"], limits: ["a": 2, "c": 3],
            owned: ["a": 2, "c": 1], filter: .allBut(["a", "b"]), room: ["a": 0, "c": 2]),
        FilterCase(
            name: "more owned than the limit (a limit lowered) is no room, not less", kinds: nil, limits: ["a": 1],
            owned: ["a": 4], filter: .allBut(["a"]), room: ["a": 0]),
        FilterCase(
            name: "a worker's kinds, less the paused and the full", kinds: ["a", "b", "c", "d"], paused: ["b"],
            limits: ["c": 1, "d": 5], owned: ["c": 1, "d": 2], filter: .only(["a", "d"]), room: ["c": 0, "d": 3]),
        FilterCase(
            name: "limits of kinds the worker does not run are not counted", kinds: ["a"], limits: ["x": 1],
            owned: ["x": 1], filter: .only(["a"])),
        FilterCase(
            name: "every kind of the worker paused: closure tasks only", kinds: ["a"], paused: ["a"], filter: .only([])),
    ]

    @Test(arguments: filterCases)
    func theKindsReadAndTheRoomLeftFollowFromWhatTheStoreHolds(_ row: FilterCase) {
        let claim = RootClaim(fromOwners: [nil], kinds: row.kinds, newOwner: "me", limit: 10)
        let plan = ClaimPlan(claim, paused: row.paused, limits: row.limits, owned: row.owned)
        #expect(plan.kinds == row.filter)
        #expect(plan.room == row.room)
    }

    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    static func root(_ id: String, kind: String? = nil, priority: Int = 0, age: Int = 0) -> ClaimedRoot {
        ClaimedRoot(
            id: id, status: .pending, kind: kind, priority: priority, createdAt: t0.addingTimeInterval(Double(-age)),
            nextAttemptAt: nil, previousOwner: nil)
    }

    struct ChoiceCase: Sendable, CustomTestStringConvertible {
        var name: String
        var kinds: Set<String>? = nil
        var limits: [String: Int] = [:]
        var owned: [String: Int] = [:]
        var paused: Set<String> = []
        var limit: Int
        var candidates: [ClaimedRoot]
        var taken: [String]
        var testDescription: String { name }
    }

    static let choiceCases: [ChoiceCase] = [
        ChoiceCase(
            name: "priority, then age, then id", limit: 10,
            candidates: [
                root("c", age: 5), root("a", priority: 1), root("b", age: 5), root("d", age: 9),
            ], taken: ["a", "d", "b", "c"]),
        ChoiceCase(
            name: "at most the limit, the best first", limit: 2,
            candidates: [root("x"), root("y", priority: 2), root("z", priority: 1)], taken: ["y", "z"]),
        ChoiceCase(
            name: "a limited kind takes no more than its room, and the others go on", limits: ["k": 3],
            owned: ["k": 1], limit: 10,
            candidates: [
                root("k1", kind: "k", age: 4), root("k2", kind: "k", age: 3), root("k3", kind: "k", age: 2),
                root("o", kind: "other", age: 1),
            ], taken: ["k1", "k2", "o"]),
        ChoiceCase(
            name: "an id read twice (two branches of the read) is taken once", limit: 10,
            candidates: [root("a"), root("a"), root("b", age: 1)], taken: ["b", "a"]),
        ChoiceCase(
            name: "a kind the filter leaves is not taken even when the read returned it", paused: ["p"], limit: 10,
            candidates: [root("p1", kind: "p"), root("c1")], taken: ["c1"]),
        ChoiceCase(name: "a limit of zero takes nothing", limit: 0, candidates: [root("a")], taken: []),
    ]

    @Test(arguments: choiceCases)
    func theCandidatesTakenFollowTheOrderTheLimitAndTheRoom(_ row: ChoiceCase) {
        let claim = RootClaim(fromOwners: [nil], kinds: row.kinds, newOwner: "me", limit: row.limit)
        let plan = ClaimPlan(claim, paused: row.paused, limits: row.limits, owned: row.owned)
        #expect(plan.choose(row.candidates).map(\.id) == row.taken)
    }
}
