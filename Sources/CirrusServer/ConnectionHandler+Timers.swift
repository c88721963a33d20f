import CirrusWire
import NIOCore

extension ConnectionHandler {
    // MARK: - Timers and shutdown

    func timerFired(context: ChannelHandlerContext) {
        // The outbound budget is shared: another connection's socket may have drained it.
        self.updateProduction(context: context)
        switch self.machine.timerFired(now: .now()) {
        case .none:
            break
        case .sendPing(let nonce):
            self.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: nonce))), context: context)
            self.flushIfNeeded(context: context)
        case .closeWithError(let code, let message):
            self.logger.info("closing connection: \(message)")
            self.writeErrorAndClose(code: code, message: message, context: context)
        case .closeIdle:
            let goAway = self.machine.makeGoAway(code: .idleTimeout, reason: "idle")
            self.write(goAway, context: context)
            self.close(context: context)
        }
    }

    func beginGracefulShutdown(context: ChannelHandlerContext) {
        guard !self.isClosing else { return }
        if self.machine.phase == .handshaking {
            self.close(context: context)
            return
        }
        let goAway = self.machine.makeGoAway(code: .shuttingDown, reason: "server shutting down")
        self.send(goAway, context: context)
        self.flushIfNeeded(context: context)
    }
}
