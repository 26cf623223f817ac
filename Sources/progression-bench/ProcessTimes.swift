#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The CPU time this process has used.
enum ProcessTimes {
    /// User plus system time of all threads so far (`getrusage(RUSAGE_SELF)`).
    static func cpu() -> Duration {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func duration(_ time: timeval) -> Duration { .seconds(time.tv_sec) + .microseconds(time.tv_usec) }
        return duration(usage.ru_utime) + duration(usage.ru_stime)
    }
}
