#if Console
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A minimal HTTP/1.1 client over a blocking socket to 127.0.0.1: requests on one kept-alive connection, and a
/// reader of Server-Sent Events. The benchmark measures the console with it from outside the server's code, so
/// that what it counts is what a browser waits for.
final class HTTPProbe {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The socket (``shutDown(_:)`` ends a connection from another thread).
    let descriptor: Int32
    private var buffer: [UInt8] = []

    /// Connects to `port` on 127.0.0.1.
    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw Failure(description: "connect to port \(port): \(String(cString: strerror(errno)))")
        }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close(descriptor) }

    /// Ends the connection of `descriptor` (a reader blocked on it returns); safe from any thread.
    static func shutDown(_ descriptor: Int32) {
        shutdown(descriptor, Int32(SHUT_RDWR))
    }

    private func send(_ text: String) throws {
        var bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress! + sent, $0.count - sent) }
            guard count > 0 else { throw Failure(description: "write: \(String(cString: strerror(errno)))") }
            sent += count
        }
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { throw Failure(description: "the connection closed") }
        buffer += chunk[0..<count]
    }

    private func line() throws -> String {
        while true {
            if let end = buffer.firstIndex(of: 0x0A) {
                let text = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeSubrange(...end)
                return text.hasSuffix("\r") ? String(text.dropLast()) : text
            }
            try fill()
        }
    }

    private func bytes(_ count: Int) throws -> [UInt8] {
        while buffer.count < count { try fill() }
        let taken = Array(buffer[..<count])
        buffer.removeSubrange(..<count)
        return taken
    }

    /// The status and headers of a response (lowercased names).
    private func head() throws -> (Int, [String: String]) {
        let status = try line()
        let parts = status.split(separator: " ")
        guard parts.count >= 2, let code = Int(parts[1]) else { throw Failure(description: "not HTTP: \(status)") }
        var headers: [String: String] = [:]
        while true {
            let field = try line()
            if field.isEmpty { break }
            if let colon = field.firstIndex(of: ":") {
                headers[field[..<colon].lowercased()] = field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return (code, headers)
    }

    /// `GET path` on this connection; the status and the body's size.
    func get(_ path: String, accept: String = "text/html") throws -> (status: Int, bytes: Int) {
        let (status, body) = try fetch(path, accept: accept)
        return (status, body.count)
    }

    /// `GET path` on this connection; the status and the body.
    func fetch(_ path: String, accept: String = "text/html") throws -> (status: Int, body: [UInt8]) {
        try send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: \(accept)\r\n\r\n")
        let (status, headers) = try head()
        var body: [UInt8] = []
        if let length = headers["content-length"].flatMap(Int.init) {
            body = try bytes(length)
        } else if headers["transfer-encoding"]?.lowercased() == "chunked" {
            while let chunk = try chunk() { body += chunk }
        }
        return (status, body)
    }

    /// The next chunk of a chunked body, `nil` after the last.
    private func chunk() throws -> [UInt8]? {
        let sizeLine = try line()
        guard let size = Int(sizeLine.split(separator: ";")[0], radix: 16) else {
            throw Failure(description: "bad chunk size '\(sizeLine)'")
        }
        if size == 0 {
            _ = try line()
            return nil
        }
        let data = try bytes(size)
        _ = try line()
        return data
    }

    /// Opens `path` as an event stream and calls `event` with the data of each `update` event as it arrives, until
    /// the connection ends (``shutDown()``) or `event` returns `false`.
    func events(_ path: String, event: (String) -> Bool) throws {
        try send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
        let (status, headers) = try head()
        guard status == 200 else { throw Failure(description: "\(path): status \(status)") }
        let chunked = headers["transfer-encoding"]?.lowercased() == "chunked"
        var pending: [UInt8] = []
        while true {
            if chunked {
                guard let chunk = try chunk() else { return }
                pending += chunk
            } else {
                if buffer.isEmpty { try fill() }
                pending += buffer
                buffer.removeAll()
            }
            // Events end with a blank line.
            while let end = Self.blankLine(in: pending) {
                let block = String(decoding: pending[..<end], as: UTF8.self)
                pending.removeSubrange(..<(end + 2))
                if block.hasPrefix("event: update\ndata: "), !event(String(block.dropFirst("event: update\ndata: ".count))) {
                    return
                }
            }
        }
    }

    private static func blankLine(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 2 else { return nil }
        for index in 0..<(bytes.count - 1) where bytes[index] == 0x0A && bytes[index + 1] == 0x0A { return index }
        return nil
    }
}
#endif
