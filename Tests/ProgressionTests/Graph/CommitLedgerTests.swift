import Testing

@testable import Progression

/// The commit ledger alone, as a table: waiters are numbers, and each step says what it returns.
struct CommitLedgerTests {
    struct Closed: Error, Equatable {}

    enum Step: CustomStringConvertible, Sendable {
        /// Waiter `waiter` waits for `sequence`.
        case wait(Int, for: Int64)
        case commit(upTo: Int64)
        case close

        var description: String {
            switch self {
            case .wait(let waiter, let sequence): "waiter \(waiter) waits for \(sequence)"
            case .commit(let sequence): "commit up to \(sequence)"
            case .close: "close"
            }
        }
    }

    struct Script: CustomTestStringConvertible, Sendable {
        var name: String
        /// Each step and what it returns: for a wait "committed", "closed" or "waiting"; for a commit or a close the
        /// waiters to resume (or fail), in order.
        var steps: [(Step, String)]
        var testDescription: String { name }
    }

    static let scripts: [Script] = [
        Script(
            name: "a commit resumes who waited for it or for less, in the order they came",
            steps: [
                (.wait(1, for: 3), "waiting"), (.wait(2, for: 1), "waiting"), (.wait(3, for: 5), "waiting"),
                (.commit(upTo: 3), "[1, 2]"), (.commit(upTo: 4), "[]"), (.commit(upTo: 9), "[3]"),
            ]),
        Script(
            name: "a wait for what is committed returns at once",
            steps: [(.commit(upTo: 4), "[]"), (.wait(1, for: 4), "committed"), (.wait(2, for: 2), "committed"),
                    (.wait(3, for: 5), "waiting")]),
        Script(
            name: "an older commit reported late changes nothing",
            steps: [(.commit(upTo: 6), "[]"), (.wait(1, for: 6), "committed"), (.commit(upTo: 2), "[]"),
                    (.wait(2, for: 6), "committed")]),
        Script(
            name: "closing fails every waiter once, and later waits fail at once",
            steps: [
                (.wait(1, for: 2), "waiting"), (.wait(2, for: 8), "waiting"), (.close, "[1, 2]"),
                (.wait(3, for: 9), "closed"), (.commit(upTo: 9), "[]"),
            ]),
        Script(
            name: "after closing, what was committed before still counts as committed",
            steps: [(.commit(upTo: 5), "[]"), (.close, "[]"), (.wait(1, for: 5), "committed"), (.wait(2, for: 6), "closed")]),
    ]

    @Test(arguments: scripts)
    func aScriptReturnsWhatItsTableSays(_ script: Script) {
        var ledger = CommitLedger<Int>()
        for (index, (step, expected)) in script.steps.enumerated() {
            let got: String
            switch step {
            case .wait(let waiter, let sequence):
                switch ledger.wait(for: sequence, waiter) {
                case .committed: got = "committed"
                case .closed(let error): got = error is Closed ? "closed" : "closed by \(error)"
                case .waiting: got = "waiting"
                }
            case .commit(let sequence): got = "\(ledger.commit(upTo: sequence))"
            case .close: got = "\(ledger.close(Closed()))"
            }
            #expect(got == expected, "step \(index): \(step)")
        }
    }
}
