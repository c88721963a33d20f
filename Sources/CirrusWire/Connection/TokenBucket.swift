import NIOCore

/// A rate limit that allows a burst: `burst` tokens to start, refilled at `perSecond`; each
/// counted act spends one. Time is passed in, never read.
///
/// For example:
/// ```swift
/// var bucket = TokenBucket(burst: 200, perSecond: 100, now: .now())
/// guard bucket.spend(now: .now()) else { return .closeWithError(code: .rateLimited, …) }
/// ```
public struct TokenBucket: Sendable, Hashable {
    /// Tokens available at once.
    public let burst: Int
    /// Tokens added each second, up to `burst`.
    public let perSecond: Int
    private var tokens: Double
    private var updated: NIODeadline

    public init(burst: Int, perSecond: Int, now: NIODeadline) {
        self.burst = max(burst, 1)
        self.perSecond = max(perSecond, 0)
        self.tokens = Double(self.burst)
        self.updated = now
    }

    /// Spends one token if there is one; false when the rate is exceeded.
    public mutating func spend(now: NIODeadline) -> Bool {
        self.refill(now: now)
        guard self.tokens >= 1 else { return false }
        self.tokens -= 1
        return true
    }

    /// The tokens available at `now` (fractions count toward the next one).
    public mutating func available(now: NIODeadline) -> Double {
        self.refill(now: now)
        return self.tokens
    }

    /// Whether the bucket is full at `now`: forgetting it changes nothing.
    public mutating func isFull(now: NIODeadline) -> Bool {
        self.refill(now: now)
        return self.tokens >= Double(self.burst)
    }

    private mutating func refill(now: NIODeadline) {
        let elapsed = Double((now - self.updated).nanoseconds) / 1e9
        guard elapsed > 0 else { return }
        self.tokens = min(Double(self.burst), self.tokens + elapsed * Double(self.perSecond))
        self.updated = now
    }
}
