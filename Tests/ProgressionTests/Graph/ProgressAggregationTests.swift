import Foundation
import Testing

@testable import Progression

/// The progress rule's values alone (`ProgressAggregation.swift`): what a task's own reports and its subtasks make of
/// its progress, the floor a new run keeps, and the smoothed rate. The README's worked examples run through the
/// executor in `ProgressRuleTests`.
struct ProgressAggregationTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var state: ProgressState
        var computed: Double?
        var testDescription: String { name }
    }

    static func state(_ change: (inout ProgressState) -> Void) -> ProgressState {
        var state = ProgressState()
        change(&state)
        return state
    }

    static let rows: [Row] = [
        Row(name: "nothing said: indeterminate", state: ProgressState(), computed: nil),
        Row(
            name: "a declared total: units done and in flight over the total",
            state: state {
                $0.mode = .units
                $0.total = 200
                $0.own = 50
                $0.unitsInFlight = 30
            }, computed: 0.4),
        Row(name: "a total of zero: indeterminate", state: state { $0.mode = .units; $0.total = 0 }, computed: nil),
        Row(
            name: "a fraction, its subtasks sharing the rest by weight",
            state: state {
                $0.mode = .fraction
                $0.own = 0.5
                $0.span = 0.5
                $0.segmentWeight = 4
                $0.segmentDone = 1
            }, computed: 0.625),
        Row(
            name: "step 1 of 4, the step's subtasks half done",
            state: state {
                $0.mode = .steps
                $0.own = 0.25
                $0.span = 0.25
                $0.segmentWeight = 2
                $0.segmentDone = 1
            }, computed: 0.375),
    ]

    @Test(arguments: rows)
    func theValueComesFromTheModeTheTaskReportedIn(_ row: Row) {
        switch (row.state.computed, row.computed) {
        case (nil, nil): break
        case (let value?, let expected?): #expect(abs(value - expected) < 1e-12)
        default: Issue.record("\(String(describing: row.state.computed)) is not \(String(describing: row.computed))")
        }
    }

    /// The value held never moves back below what was shown, nor below the floor of a run before; it stays in 0…1.
    @Test func theHeldValueNeverMovesBack() {
        var state = ProgressState()
        state.mode = .fraction
        state.own = 0.2
        #expect(state.held(current: 0.3) == 0.3)
        #expect(state.held(current: nil) == 0.2)
        state.floor = 0.6
        #expect(state.held(current: 0.3) == 0.6)
        state.own = 1.4
        #expect(state.held(current: nil) == 1)
    }

    /// A new run forgets what the task said and what its subtasks did, keeps how it counts in its parent, and holds
    /// what it showed (at most the cap of an unfinished task) as its floor.
    @Test func aNewRunKeepsItsLinkAndWhatItShowedAsItsFloor() {
        var state = ProgressState()
        state.mode = .units
        state.total = 10
        state.own = 7
        state.link = .units
        state.contribution = 0.7
        state.reset(floor: 1)
        #expect(state.mode == .unknown && state.total == nil && state.own == 0)
        #expect(state.link == .units && state.contribution == 0.7)
        #expect(state.floor == ProgressState.unfinishedCap)
    }

    /// The rate: a first sample only sets the start; samples closer than the interval do not count; then an
    /// exponential moving average of what moved per second; a restart forgets it.
    @Test func theRateIsASmoothedAverageOfSamplesFarEnoughApart() throws {
        var rate = RateState()
        let start = Date(timeIntervalSince1970: 1_000)
        let started = rate.sample(0, at: start)
        #expect(!started)
        #expect(rate.rate == nil)
        let tooClose = rate.sample(0.1, at: start.addingTimeInterval(0.1))
        #expect(!tooClose, "too close to count")
        let counted = rate.sample(0.2, at: start.addingTimeInterval(1))
        #expect(counted)
        let first = try #require(rate.rate)
        #expect(abs(first - 0.2) < 1e-12, "the first rate is the first instant rate")
        let stopped = rate.sample(0.2, at: start.addingTimeInterval(11))
        #expect(stopped)
        let weight = 1 - exp(-10.0 / RateState.timeConstant)
        #expect(abs(try #require(rate.rate) - (0.2 + weight * (0 - 0.2))) < 1e-12, "a stop pulls the rate down, smoothly")
        rate.restart()
        #expect(rate.rate == nil && rate.isDue(at: start))
    }
}
