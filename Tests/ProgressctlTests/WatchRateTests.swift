import Foundation
import Progression
import Testing

@testable import progressctl

@Suite struct WatchRateTests {
    let start = Date(timeIntervalSince1970: 1_780_000_000)

    /// Observes `perSecond` progress every `step` seconds for `seconds`, from `from`.
    func feed(
        _ rate: inout SmoothedRate, from: Double = 0, perSecond: Double, for seconds: Double, step: Double = 0.1,
        after offset: Double = 0
    ) -> Double {
        var progress = from
        var time = 0.0
        while time <= seconds + 1e-9 {
            rate.observe(progress: progress, running: true, at: start.addingTimeInterval(offset + time))
            progress += perSecond * step
            time += step
        }
        return progress - perSecond * step
    }

    @Test func aSteadyRateIsMeasuredAfterTheWarmUp() throws {
        var rate = SmoothedRate()
        rate.observe(progress: 0.1, running: true, at: start)
        rate.observe(progress: 0.1, running: true, at: start.addingTimeInterval(0.5))
        #expect(rate.perSecond == nil, "not before a second of observations")
        var steady = SmoothedRate()
        _ = feed(&steady, perSecond: 0.01, for: 3)
        let measured = try #require(steady.perSecond)
        #expect(abs(measured - 0.01) < 0.0005, "\(measured)")
    }

    @Test func burstsAreSmoothedOverTime() throws {
        // Progress moves 5 % at once every 5 s, polled ten times a second: 1 % per second on average.
        var rate = SmoothedRate()
        var progress = 0.0
        for tick in 0...600 {
            let time = Double(tick) / 10
            if tick > 0, tick % 50 == 0 { progress += 0.05 }
            rate.observe(progress: progress, running: true, at: start.addingTimeInterval(time))
        }
        let measured = try #require(rate.perSecond)
        #expect(measured > 0.005 && measured < 0.02, "\(measured)")
    }

    @Test func aChangeOfPaceShowsWithinAboutTenSeconds() throws {
        var rate = SmoothedRate()
        let reached = feed(&rate, perSecond: 0.001, for: 30)
        _ = feed(&rate, from: reached, perSecond: 0.01, for: 20, after: 30.1)
        let measured = try #require(rate.perSecond)
        #expect(measured > 0.008 && measured <= 0.0101, "\(measured)")
    }

    @Test func leavingRunningOrGoingBackStartsAfresh() {
        var rate = SmoothedRate()
        let reached = feed(&rate, perSecond: 0.01, for: 5)
        #expect(rate.perSecond != nil)
        rate.observe(progress: reached, running: false, at: start.addingTimeInterval(6))
        #expect(rate.perSecond == nil, "paused")
        rate.observe(progress: reached, running: true, at: start.addingTimeInterval(60))
        rate.observe(progress: reached + 0.01, running: true, at: start.addingTimeInterval(60.5))
        #expect(rate.perSecond == nil, "the pause is not counted as time at rate 0, and it warms up again")

        var retried = SmoothedRate()
        _ = feed(&retried, perSecond: 0.05, for: 5)
        retried.observe(progress: 0, running: true, at: start.addingTimeInterval(5.5))
        #expect(retried.perSecond == nil, "a retry starts from 0 again")
    }

    @Test func theTimeLeftIsWhatRemainsAtTheRate() throws {
        var root = TaskRecord(id: "r", name: "r", status: .running, progress: 0, createdAt: start)
        var rates = ProgressRates()
        for tick in 0...30 {
            root.progress = Double(tick) * 0.002
            rates.observe([root], at: start.addingTimeInterval(Double(tick) / 10))
        }
        // 0.2 % per 0.1 s = 2 %/s; at 6 %, 94 % are left: 47 s.
        let rate = try #require(rates.rate(of: root))
        #expect(abs(rate - 0.02) < 0.0005)
        let left = try #require(rates.timeLeft(of: root))
        #expect(abs(left - 47) < 1.5, "\(left)")
        root.status = .paused
        #expect(rates.timeLeft(of: root) == nil)
        rates.observe([], at: start.addingTimeInterval(4))
        #expect(rates.rate(of: root) == nil, "a root no longer watched is forgotten")
    }

    @Test(arguments: [
        (nil, "-"), (0.0, "0.0%/min"), (0.0001, "0.6%/min"), (0.002, "12%/min"), (0.00166, "10%/min"),
        (0.001658, "9.9%/min"), (0.01, "1.0%/s"), (0.025, "2.5%/s"), (0.5, "50%/s"), (2.0, "200%/s"),
        (-1.0, "-"), (Double.nan, "-"), (Double.infinity, "-"),
    ] as [(Double?, String)])
    func ratesAreShownPerMinuteOrPerSecond(perSecond: Double?, text: String) {
        #expect(Format.rate(perSecond) == text)
        #expect(Format.rate(perSecond).count <= 8)
    }

    @Test(arguments: [
        (nil, "-"), (0.0, "0s"), (12.0, "12s"), (59.2, "1m00s"), (250.0, "4m10s"), (3599.0, "59m59s"),
        (3600.0, "1h00m"), (3720.0, "1h02m"), (99.0 * 3600 + 59 * 60, "99h59m"), (100.0 * 3600, ">99h"),
        (1e300, ">99h"), (-5.0, "-"), (Double.nan, "-"),
    ] as [(Double?, String)])
    func timesLeftAreShort(seconds: Double?, text: String) {
        #expect(Format.timeLeft(seconds) == text)
        #expect(Format.timeLeft(seconds).count <= 6)
    }
}
