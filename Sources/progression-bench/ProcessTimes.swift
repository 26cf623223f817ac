#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The CPU time this process has used, and its context switches.
enum ProcessTimes {
    /// User plus system time of all threads so far (`getrusage(RUSAGE_SELF)`).
    static func cpu() -> Duration {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func duration(_ time: timeval) -> Duration { .seconds(time.tv_sec) + .microseconds(time.tv_usec) }
        return duration(usage.ru_utime) + duration(usage.ru_stime)
    }

    /// Voluntary and involuntary context switches of the process so far (`getrusage(RUSAGE_SELF)`).
    static func contextSwitches() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_nvcsw + usage.ru_nivcsw
    }
}
