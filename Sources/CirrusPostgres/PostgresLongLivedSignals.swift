import CirrusStore
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// The `NOTIFY`s that carry ``LongLivedOperationSignal``s between nodes: a journal append, a
/// completion or a drop (followers on other nodes read the journal at once), and a client's
/// cancellation (the node running the operation stops it). The listener
/// (``PostgresNotificationListener``) hears every node's on its one connection and tells this
/// node's observers (``PostgresStorage/observeLongLivedOperations(_:)``).
///
/// Each signal is queued once what it reports is committed (``send(_:)``), and a task of its
/// own (``sendQueued(client:leaseTimeout:logger:)``) sends what is queued, in order, several
/// in one small transaction that does not wait for its commit to be flushed
/// (`synchronous_commit` off for it alone). So a signal is never heard before its change is
/// there to read, and neither the append nor its durable commit waits for it: PostgreSQL
/// orders the commits of transactions that `NOTIFY` under one lock for the whole server, and a
/// `NOTIFY` in the append's transaction would hold that lock through the append's durable
/// commit, queueing every node's appends there.
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

    /// Signals queued at most; more are dropped (their followers poll) until the queue drains.
    static let maximumQueued = 10_000

    private let observers = Mutex<[@Sendable (LongLivedOperationSignal) -> Void]>([])
    /// Payloads to send, in order.
    private let queued = Mutex<[String]>([])
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>

    init() {
        (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Queues `signal` to be sent (call once what it reports is committed); nothing when its
    /// payload would be too long.
    func send(_ signal: LongLivedOperationSignal) {
        guard let payload = Self.payload(signal) else { return }
        let accepted = queued.withLock { queued in
            guard queued.count < Self.maximumQueued else { return false }
            queued.append(payload)
            return true
        }
        if accepted { wake.yield() }
    }

    /// Sends the queued signals, in order, until cancelled. Signals that cannot be sent (the
    /// server is away) are dropped: they only say where to look, and the nodes look anyway
    /// (followers poll the journal, heartbeats look for cancellations).
    func sendQueued(client: PostgresClient, leaseTimeout: Duration, logger: Logger) async {
        for await _ in wakes {
            while !Task.isCancelled {
                let batch = queued.withLock { queued in
                    defer { queued.removeAll() }
                    return queued
                }
                if batch.isEmpty { break }
                do {
                    try await client.withConnection(leaseTimeout: leaseTimeout) { connection in
                        let rows = try await connection.query(
                            """
                            SELECT set_config('synchronous_commit', 'off', true), pg_notify(\(Self.channel), payload)::text
                            FROM unnest(\(batch)::text[]) WITH ORDINALITY AS signals (payload, position) ORDER BY position
                            """, logger: logger)
                        for try await _ in rows {}
                    }
                } catch {
                    guard !Task.isCancelled else { return }
                    logger.warning(
                        "long-lived operation signals not sent", metadata: ["count": "\(batch.count)", "error": "\(error)"])
                }
            }
        }
    }

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
