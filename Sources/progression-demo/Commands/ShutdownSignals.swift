import Dispatch
import Foundation
import ServiceLifecycle
import Synchronization

/// SIGTERM and SIGINT as a request for a graceful stop from the moment `serve` starts, not only once its service group
/// runs: a service manager that stops the service while it opens its database (the first 20–30 ms) would otherwise
/// kill it with the signal's default action (status 143) instead of letting it stop (status 0). A request that comes
/// before the group exists is remembered and given to the group when it is handed over.
enum ShutdownSignals {
    private struct State {
        var requested = false
        var group: ServiceGroup?
        /// The signal sources, kept alive for the life of the process.
        var sources: [RetainedSource] = []
    }

    /// Holds a signal source so that it lives as long as the process.
    ///
    /// `@unchecked Sendable` is safe: the reference is a `let`, set before the holder is shared and never read again,
    /// and dispatch objects are themselves safe to use from any thread (libdispatch's contract; its Swift overlay
    /// only lacks the annotation).
    private final class RetainedSource: @unchecked Sendable {
        let source: any DispatchSourceSignal
        init(_ source: any DispatchSourceSignal) { self.source = source }
    }

    private static let state = Mutex(State())

    /// Takes SIGTERM and SIGINT over from their default action (ending the process): a dispatch source receives
    /// them. On Linux libdispatch installs a handler of its own when the source is resumed; on Darwin the signal must
    /// be ignored for kqueue to report it (as swift-service-lifecycle does), which would leave a moment in which a
    /// signal is lost, so it is ignored there only.
    static func install() {
        for number in [SIGTERM, SIGINT] {
            #if canImport(Darwin)
            signal(number, SIG_IGN)
            #endif
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { requestStop() }
            source.resume()
            let retained = RetainedSource(source)
            state.withLock { $0.sources.append(retained) }
        }
    }

    /// The group that a signal stops; when one came already, it is asked to stop as soon as it runs.
    static func stops(_ group: ServiceGroup) async {
        let requested = state.withLock { state in
            state.group = group
            return state.requested
        }
        if requested { await group.triggerGracefulShutdown() }
    }

    private static func requestStop() {
        let group = state.withLock { state in
            state.requested = true
            return state.group
        }
        if let group { Task { await group.triggerGracefulShutdown() } }
    }
}
