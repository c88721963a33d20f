import CirrusWire
import NIOConcurrencyHelpers
import NIOCore

/// Limits that hold across all of a server's connections, so reconnecting never buys a fresh
/// allowance: connections per user, TLS handshakes per client address (before anyone is
/// authenticated), and streams a user may abandon — cancel, or open beyond a connection's limit
/// and have refused — per second. Each connection also has its own, smaller allowance in its
/// ``ConnectionStateMachine``.
///
/// Time is passed in, never read. Idle entries are forgotten once their bucket is full again, so
/// the tables hold only peers that are using their allowance now.
///
/// For example:
/// ```swift
/// var configuration = ServerConfiguration(tls: tls)
/// configuration.peerLimits = PeerLimits(configuration: .init(maximumConnectionsPerUser: 16))
/// ```
public final class PeerLimits: Sendable {
    /// The numbers; zero turns a limit off.
    public struct Configuration: Sendable, Hashable {
        /// Connections one user may hold open at once; one more is refused at `Hello` with
        /// `RATE_LIMITED`.
        public var maximumConnectionsPerUser: Int
        /// TLS connections accepted per second from one IP address, sustained; more are closed
        /// before their handshake.
        public var handshakesPerAddressPerSecond: Int
        /// Connections one address may open in a burst before the rate applies.
        public var handshakeBurstPerAddress: Int
        /// Streams one user may abandon (cancel, or have refused) per second across all of
        /// their connections, sustained. Beyond it the connection closes with `RATE_LIMITED`
        /// and the user's new connections are refused until half the burst has refilled.
        public var abandonedStreamsPerUserPerSecond: Int
        /// Streams one user may abandon in a burst before the rate applies.
        public var abandonedStreamBurstPerUser: Int

        public init(
            maximumConnectionsPerUser: Int = 256,
            handshakesPerAddressPerSecond: Int = 1_000,
            handshakeBurstPerAddress: Int = 2_000,
            abandonedStreamsPerUserPerSecond: Int = 200,
            abandonedStreamBurstPerUser: Int = 1_000
        ) {
            self.maximumConnectionsPerUser = maximumConnectionsPerUser
            self.handshakesPerAddressPerSecond = handshakesPerAddressPerSecond
            self.handshakeBurstPerAddress = handshakeBurstPerAddress
            self.abandonedStreamsPerUserPerSecond = abandonedStreamsPerUserPerSecond
            self.abandonedStreamBurstPerUser = abandonedStreamBurstPerUser
        }
    }

    /// Why a user's connection is refused.
    public enum Refusal: Sendable, Hashable {
        case tooManyConnections(limit: Int)
        case abandoningStreams(perSecond: Int)

        /// The message sent with `RATE_LIMITED`.
        public var message: String {
            switch self {
            case .tooManyConnections(let limit):
                "at most \(limit) connections per user"
            case .abandoningStreams(let perSecond):
                "streams cancelled or refused faster than \(perSecond) per second across this user's connections; retry later"
            }
        }
    }

    private struct State {
        var connections: [String: Int] = [:]
        var addresses = RateTable()
        var users = RateTable()
        /// Users who exceeded their abandoned-stream rate, refused until half the burst is back.
        var lockedOut: Set<String> = []
    }

    /// One token bucket per key, created full on first use; full (idle) ones are swept out.
    private struct RateTable {
        var buckets: [String: TokenBucket] = [:]
        /// The size at which the table is next swept, doubling with what stays in it so a
        /// sweep costs amortised constant time.
        var sweepAt = PeerLimits.sweepThreshold

        mutating func spend(_ key: String, burst: Int, perSecond: Int, now: NIODeadline) -> Bool {
            var bucket = self.buckets[key] ?? TokenBucket(burst: burst, perSecond: perSecond, now: now)
            let spent = bucket.spend(now: now)
            self.buckets[key] = bucket
            if self.buckets.count > self.sweepAt {
                for (key, var bucket) in self.buckets where bucket.isFull(now: now) {
                    self.buckets.removeValue(forKey: key)
                }
                self.sweepAt = max(PeerLimits.sweepThreshold, self.buckets.count * 2)
            }
            return spent
        }

        /// The tokens `key` has at `now`; nil when it has a full bucket (never spent or swept).
        mutating func available(_ key: String, now: NIODeadline) -> Double? {
            guard var bucket = self.buckets[key] else { return nil }
            defer { self.buckets[key] = bucket }
            return bucket.available(now: now)
        }
    }

    public let configuration: Configuration
    private let state = NIOLockedValueBox(State())
    /// Entries a table may hold before the full (idle) ones are swept out.
    private static let sweepThreshold = 4_096

    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    /// Whether a new TCP connection from `address` may start its TLS handshake.
    public func admitHandshake(from address: String, now: NIODeadline) -> Bool {
        let rate = self.configuration.handshakesPerAddressPerSecond
        guard rate > 0 else { return true }
        let burst = self.configuration.handshakeBurstPerAddress
        return self.state.withLockedValue { state in
            state.addresses.spend(address, burst: burst, perSecond: rate, now: now)
        }
    }

    /// Counts a connection of `user` that said `Hello`, or says why it is refused. Each
    /// admitted connection is given back with ``release(user:)`` when it closes.
    public func admit(user: String, now: NIODeadline) -> Refusal? {
        self.state.withLockedValue { state in
            if state.lockedOut.contains(user) {
                if let tokens = state.users.available(user, now: now),
                    tokens < Double(self.configuration.abandonedStreamBurstPerUser) / 2
                {
                    return .abandoningStreams(perSecond: self.configuration.abandonedStreamsPerUserPerSecond)
                }
                state.lockedOut.remove(user)
            }
            let open = state.connections[user, default: 0]
            let limit = self.configuration.maximumConnectionsPerUser
            if limit > 0, open >= limit {
                return .tooManyConnections(limit: limit)
            }
            state.connections[user] = open + 1
            return nil
        }
    }

    /// A connection admitted for `user` closed.
    public func release(user: String) {
        self.state.withLockedValue { state in
            let open = state.connections[user, default: 0] - 1
            state.connections[user] = open > 0 ? open : nil
        }
    }

    /// Counts one stream `user` abandoned (cancelled, or had refused); false when the user has
    /// exceeded the rate and the connection should close.
    public func spendAbandonedStream(user: String, now: NIODeadline) -> Bool {
        let rate = self.configuration.abandonedStreamsPerUserPerSecond
        guard rate > 0 else { return true }
        let burst = self.configuration.abandonedStreamBurstPerUser
        return self.state.withLockedValue { state in
            let spent = state.users.spend(user, burst: burst, perSecond: rate, now: now)
            if !spent {
                state.lockedOut.insert(user)
            }
            return spent
        }
    }

    /// Connections open now for `user`.
    public func connectionCount(user: String) -> Int {
        self.state.withLockedValue { $0.connections[user, default: 0] }
    }
}
