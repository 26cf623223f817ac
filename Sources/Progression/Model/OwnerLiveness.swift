import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Whether the executor that holds tasks still runs.
package enum OwnerLiveness: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Its process runs (same host), or its heartbeat is fresh (another host).
    case alive
    /// It shut down cleanly.
    case stopped
    /// It died: its process is gone, its pid now belongs to another process, or its heartbeat is stale.
    case dead(reason: String)

    package var isAlive: Bool { self == .alive }

    package var description: String {
        switch self {
        case .alive: "alive"
        case .stopped: "stopped"
        case .dead(let reason): "dead (\(reason))"
        }
    }
}

extension OwnerRecord {
    /// This machine's host name, as owners record it: `$PROGRESSION_HOST` when set (containers that share a database
    /// and a host name, tests that play several hosts), else the system's.
    package static var currentHost: String {
        if let name = ProcessInfo.processInfo.environment["PROGRESSION_HOST"], !name.isEmpty { return name }
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Decides whether this owner still runs.
    ///
    /// On this host the answer needs no timeout: the process is looked up by pid (and its start time, so that a
    /// reused pid does not pass for the owner). On another host, a heartbeat older than `staleAfter` means dead.
    package func liveness(
        now: Date = Date(), staleAfter: Duration = .seconds(15), host: String = OwnerRecord.currentHost
    ) -> OwnerLiveness {
        if stoppedAt != nil { return .stopped }
        if self.host == host {
            guard pid > 0, kill(pid, 0) == 0 || errno == EPERM else {
                return .dead(reason: "process \(pid) is gone")
            }
            if let processStart = Self.processStartTime(pid: pid),
                processStart.timeIntervalSince(startedAt) > 2
            {
                return .dead(reason: "pid \(pid) belongs to a process started after the owner")
            }
            return .alive
        }
        let silence = now.timeIntervalSince(heartbeatAt)
        if silence > staleAfter.seconds {
            return .dead(reason: "no heartbeat for \(Int(silence)) s")
        }
        return .alive
    }

    /// When a process started, from /proc (Linux); `nil` elsewhere.
    static func processStartTime(pid: Int32) -> Date? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name (which may hold spaces); starttime is field 22, the 20th after it.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]),
            let uptimeText = try? String(contentsOfFile: "/proc/uptime", encoding: .utf8),
            let uptime = Double(uptimeText.split(separator: " ").first ?? "")
        else { return nil }
        let hertz = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard hertz > 0 else { return nil }
        let bootTime = Date().addingTimeInterval(-uptime)
        return bootTime.addingTimeInterval(ticks / hertz)
    }
}
