#if PostgreSQL
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay between clients and a server on this machine that a test can cut and heal: a network partition
/// without network namespaces. While cut, nothing crosses in either direction and new connections wait, as on a link
/// that is down: data waits in the senders' buffers (TCP keeps it) and arrives late, if at all, once healed; the
/// sockets stay open, so neither end learns of the cut but by its own timeouts.
package final class TCPProxy: Sendable {
    /// The port clients connect to (on 127.0.0.1).
    package let port: Int
    private let listener: Int32
    private let target: (host: String, port: Int)
    private let state = Mutex<(cut: Bool, stopped: Bool, sockets: Set<Int32>)>((false, false, []))

    /// Starts relaying connections made to ``port`` to `host`:`port`.
    package init(to host: String = "127.0.0.1", port targetPort: Int) throws {
        target = (host, targetPort)
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        guard listener >= 0 else { throw LocalPostgresServer.Failure("socket: \(String(cString: strerror(errno)))") }
        var address = Self.address("127.0.0.1", port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            close(listener)
            throw LocalPostgresServer.Failure("cannot listen: \(String(cString: strerror(errno)))")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: actual.sin_port))
        Thread.detachNewThread { [self] in acceptLoop(listener) }
    }

    /// Cuts the link: nothing crosses until ``heal()``.
    package func cut() { state.withLock { $0.cut = true } }

    /// Heals the link: what waited crosses, new connections go through.
    package func heal() { state.withLock { $0.cut = false } }

    /// Closes the listener and every relayed connection.
    package func stop() {
        let sockets = state.withLock { state in
            state.stopped = true
            defer { state.sockets = [] }
            return state.sockets
        }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for socket in sockets { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    deinit { stop() }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    /// Waits while the link is cut; `false` once the proxy stopped.
    private func waitWhileCut() -> Bool {
        while true {
            let (cut, stopped) = state.withLock { ($0.cut, $0.stopped) }
            if stopped { return false }
            if !cut { return true }
            usleep(5_000)
        }
    }

    private func acceptLoop(_ listener: Int32) {
        while !isStopped {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            Thread.detachNewThread { [self] in relay(client) }
        }
    }

    private func relay(_ client: Int32) {
        guard waitWhileCut() else {
            close(client)
            return
        }
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.address(target.host, port: target.port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard server >= 0, connected == 0 else {
            close(client)
            if server >= 0 { close(server) }
            return
        }
        state.withLock {
            $0.sockets.insert(client)
            $0.sockets.insert(server)
        }
        Thread.detachNewThread { [self] in pump(from: server, to: client) }
        pump(from: client, to: server)
    }

    /// Copies bytes from one socket to the other until either end closes; holds them while the link is cut.
    private func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        defer {
            shutdown(destination, Int32(SHUT_WR))
            shutdown(source, Int32(SHUT_RD))
        }
        while true {
            guard waitWhileCut() else { return }
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            // Read before the cut, held until it heals.
            guard waitWhileCut() else { return }
            var offset = 0
            while offset < count {
                let written = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + offset, count - offset) }
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }

    private static func address(_ host: String, port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }
}
#endif
