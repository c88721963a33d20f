import NIOCore

extension ConnectionStateMachine {
    /// Adopts the peer's keepalive and idle timers from its `Limits` (the client, from
    /// `HelloAck`) where they are shorter than this side's: it pings at least as often as the
    /// peer asks (`ping_interval_ms`), and closes a connection with no stream before the peer
    /// would call it idle (`idle_timeout_ms`). Zero means the peer has no preference.
    ///
    /// For example:
    /// ```swift
    /// if case .helloAckReceived(let ack) = machine.receive(frame, now: .now()), let limits = ack.limits {
    ///     machine.adoptPeerTimers(limits)
    /// }
    /// ```
    public mutating func adoptPeerTimers(_ limits: Wire.Limits) {
        if limits.pingIntervalMs > 0 {
            let interval = TimeAmount.milliseconds(Int64(limits.pingIntervalMs))
            self.configuration.keepaliveInterval = min(self.configuration.keepaliveInterval, interval)
        }
        if limits.idleTimeoutMs > 0 {
            let timeout = TimeAmount.milliseconds(Int64(limits.idleTimeoutMs))
            self.configuration.idleTimeout = min(self.configuration.idleTimeout, timeout)
        }
    }
}
