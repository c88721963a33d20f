import NIOCore

extension ConnectionStateMachine {
    /// What the connection's timer asks for.
    public enum TimerAction: Sendable, Hashable {
        case none
        /// Nothing arrived for a while: send this `Ping`.
        case sendPing(nonce: UInt64)
        /// Close with this error (handshake or keepalive timeout), after sending it.
        case closeWithError(code: Wire.ErrorCode, message: String)
        /// The connection sat idle: say `GoAway` and close.
        case closeIdle
    }

    /// Checks the handshake, keepalive and idle timers. Call it periodically, e.g. every
    /// second, with the current time.
    public mutating func timerFired(now: NIODeadline) -> TimerAction {
        switch self.phase {
        case .closed:
            return .none
        case .handshaking:
            if now >= self.handshakeDeadline {
                self.phase = .closed
                return .closeWithError(
                    code: .handshakeTimeout,
                    message: "no \(self.role == .server ? "Hello" : "HelloAck") within \(self.configuration.handshakeTimeout)"
                )
            }
            return .none
        case .active, .draining:
            break
        }
        if let ping = self.outstandingPing {
            if now - ping.sentAt >= self.configuration.keepaliveTimeout {
                self.phase = .closed
                self.streams.removeAll()
                return .closeWithError(code: .idleTimeout, message: "no Pong within \(self.configuration.keepaliveTimeout)")
            }
            return .none
        }
        if !self.streams.isEmpty {
            // Busy streams are activity: idleness counts from the last tick that saw one.
            self.lastActivity = now
        } else if now - self.lastActivity >= self.configuration.idleTimeout {
            self.phase = .closed
            return .closeIdle
        }
        if now - self.lastReceive >= self.configuration.keepaliveInterval {
            let nonce = self.nextPingNonce
            self.nextPingNonce &+= 1
            self.outstandingPing = (nonce, now)
            return .sendPing(nonce: nonce)
        }
        return .none
    }
}
