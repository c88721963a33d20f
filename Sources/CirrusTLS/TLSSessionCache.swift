import NIOConcurrencyHelpers

/// The TLS sessions a client has been given (TLS 1.3 tickets), by server, so
/// a reconnect resumes instead of making a full handshake: no certificate is
/// sent, signed for or checked again (the ECDHE key exchange stays, for
/// forward secrecy), which saves about a third of the handshake's CPU.
///
/// Every client ``TLSContext`` has one (``TLSContext/sessionCache``: its own,
/// or one given to several contexts whose keys tell them apart); a
/// ``TLSHandler`` made with a `sessionCacheKey` offers a session stored under
/// that key and stores the tickets its server sends. Each session is offered
/// once (RFC 8446 §C.4: a reused ticket links two connections), and the
/// resumed connection brings fresh tickets. The cache keeps the newest
/// ``maximumSessionsPerKey`` sessions of at most ``maximumKeys`` servers,
/// forgetting the server used least recently first.
///
/// For example:
///
/// ```swift
/// let handler = TLSHandler(context: context, serverHostname: "localhost", sessionCacheKey: "localhost:4433")
/// // …after a connection has closed:
/// context.sessionCache?.count(for: "localhost:4433")   // 2 tickets from the server
/// ```
public final class TLSSessionCache: Sendable {
    /// Sessions kept per server: OpenSSL servers send two tickets.
    public static let maximumSessionsPerKey = 2

    /// The most servers whose sessions are kept.
    public let maximumKeys: Int

    private struct State {
        /// Serialized `SSL_SESSION`s (DER), oldest first, per key.
        var sessions: [String: [[UInt8]]] = [:]
        /// Keys, least recently used first.
        var order: [String] = []
    }

    private let state = NIOLockedValueBox(State())

    /// An empty cache for up to `maximumKeys` servers (at least one).
    public init(maximumKeys: Int = 64) {
        self.maximumKeys = max(1, maximumKeys)
    }

    /// The number of sessions held for `key`.
    public func count(for key: String) -> Int {
        self.state.withLockedValue { $0.sessions[key]?.count ?? 0 }
    }

    /// Forgets every session, e.g. after the client's identity changed.
    public func removeAll() {
        self.state.withLockedValue { $0 = State() }
    }

    /// Takes the newest session stored for `key`, removing it.
    func take(for key: String) -> [UInt8]? {
        self.state.withLockedValue { state in
            guard var list = state.sessions[key], let newest = list.popLast() else {
                return nil
            }
            state.sessions[key] = list.isEmpty ? nil : list
            Self.touch(key, in: &state, keep: !list.isEmpty)
            return newest
        }
    }

    /// Stores a session for `key`, dropping the oldest beyond the bounds.
    func store(_ session: [UInt8], for key: String) {
        self.state.withLockedValue { state in
            var list = state.sessions[key] ?? []
            list.append(session)
            if list.count > Self.maximumSessionsPerKey {
                list.removeFirst(list.count - Self.maximumSessionsPerKey)
            }
            state.sessions[key] = list
            Self.touch(key, in: &state, keep: true)
            while state.order.count > self.maximumKeys {
                let evicted = state.order.removeFirst()
                state.sessions[evicted] = nil
            }
        }
    }

    private static func touch(_ key: String, in state: inout State, keep: Bool) {
        state.order.removeAll { $0 == key }
        if keep {
            state.order.append(key)
        }
    }
}
