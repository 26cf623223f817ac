import Logging

/// A log handler that hands each event, with the logger's metadata merged under the event's, to a closure: the
/// tests' one way to see what the executor logs.
///
/// ```swift
/// let lines = Recorder<String>()
/// let logger = Logger(label: "test") { _ in LogSink { event, _ in lines.append("\(event.message)") } }
/// ```
struct LogSink: LogHandler {
    let receive: @Sendable (LogEvent, Logger.Metadata) -> Void
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    init(_ receive: @escaping @Sendable (LogEvent, Logger.Metadata) -> Void) {
        self.receive = receive
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        receive(event, metadata.merging(event.metadata ?? [:]) { $1 })
    }
}
