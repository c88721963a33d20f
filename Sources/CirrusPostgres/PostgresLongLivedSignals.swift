import CirrusStore
import Foundation
import Synchronization

/// The `NOTIFY`s that carry ``LongLivedOperationSignal``s between nodes: a journal append, a
/// completion or a drop (followers on other nodes read the journal at once), and a client's
/// cancellation (the node running the operation stops it). Each is sent once what it reports
/// is committed, in a small transaction of its own (see `PostgresStorage.signal(_:)`), so it
/// is never heard before its change is there to read; the listener
/// (``PostgresNotificationListener``) hears every node's on its one connection and tells this
/// node's observers (``PostgresStorage/observeLongLivedOperations(_:)``).
///
/// A signal only says where to look; a lost one only delays (followers also poll the journal,
/// the node running an operation also looks for cancellations at each heartbeat).
final class PostgresLongLivedSignals: Sendable {
    /// The channel: its payload is a JSON object, `{"o": owner, "i": operation ID, "s": last
    /// seq}` for events, a completion or a drop, `{"o": …, "i": …, "c": true}` for a cancellation.
    static let channel = "cirrus_long_lived"

    /// PostgreSQL refuses a payload of 8000 bytes or more; a longer one (an operation ID of
    /// several kilobytes) is not sent, and its followers learn from their poll.
    static let maximumPayloadBytes = 7_900

    private let observers = Mutex<[@Sendable (LongLivedOperationSignal) -> Void]>([])

    func observe(_ observer: @escaping @Sendable (LongLivedOperationSignal) -> Void) {
        observers.withLock { $0.append(observer) }
    }

    /// Tells the observers what one `NOTIFY` of ``channel`` said; ignores one it does not understand.
    /// Returns whether it understood it.
    @discardableResult
    func heard(_ payload: String) -> Bool {
        guard let signal = Self.signal(payload: payload) else { return false }
        for observer in observers.withLock({ $0 }) { observer(signal) }
        return true
    }

    private struct Payload: Codable {
        var owner: String
        var operationID: String
        var lastSeq: UInt64?
        var cancelled: Bool?

        private enum CodingKeys: String, CodingKey {
            case owner = "o", operationID = "i", lastSeq = "s", cancelled = "c"
        }
    }

    /// The payload of `signal`; nil when it would be too long to send.
    static func payload(_ signal: LongLivedOperationSignal) -> String? {
        let body: Payload
        switch signal {
        case .journaled(let key, let lastSeq): body = Payload(owner: key.owner, operationID: key.operationID, lastSeq: lastSeq)
        case .cancelRequested(let key): body = Payload(owner: key.owner, operationID: key.operationID, cancelled: true)
        }
        guard let data = try? JSONEncoder().encode(body), data.count <= maximumPayloadBytes else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// The signal a payload carries; nil for one this version does not understand.
    static func signal(payload: String) -> LongLivedOperationSignal? {
        guard let body = try? JSONDecoder().decode(Payload.self, from: Data(payload.utf8)) else { return nil }
        let key = LongLivedOperationKey(owner: body.owner, operationID: body.operationID)
        if body.cancelled == true { return .cancelRequested(key) }
        guard let seq = body.lastSeq else { return nil }
        return .journaled(key, lastSeq: seq)
    }
}
