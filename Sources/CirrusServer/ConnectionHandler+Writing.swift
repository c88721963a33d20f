import CirrusWire
import NIOCore

extension ConnectionHandler {
    // MARK: - Writing

    /// Sends `frame` if the state machine allows it now, and closes when it says so.
    func send(_ frame: Wire.Frame, context: ChannelHandlerContext) {
        switch self.machine.send(frame) {
        case .send:
            self.write(frame, context: context)
            self.replaceIfTooLarge(frame, context: context)
        case .sendAndClose:
            self.write(frame, context: context)
            self.replaceIfTooLarge(frame, context: context)
            self.close(context: context)
        case .waitForCredit, .drop:
            break
        case .invalid(let reason):
            self.logger.error("not sending an invalid frame: \(reason)")
        }
    }

    /// When the encoder refused `frame` as above the connection's max_frame_bytes: a `Complete`
    /// (a result too large) is replaced by one with `LIMIT_EXCEEDED`, so the stream still ends.
    private func replaceIfTooLarge(_ frame: Wire.Frame, context: ChannelHandlerContext) {
        guard let size = self.encoder?.takeRefusedSize() else { return }
        guard case .complete(let complete) = frame.kind else {
            self.logger.error("a frame of \(size) bytes on stream \(frame.streamID) was too large to send")
            return
        }
        let error = self.frameTooLargeError("the operation's result", size: size)
        let small = Wire.Complete(lastSeq: complete.lastSeq, error: error)
        self.write(Wire.Frame(streamID: frame.streamID, kind: .complete(small)), context: context)
    }

    func write(_ frame: Wire.Frame, context: ChannelHandlerContext) {
        self.write(.frame(frame), context: context)
    }

    func write(_ frame: OutboundFrame, context: ChannelHandlerContext) {
        guard !self.isClosing else { return }
        if let metrics = self.configuration.metrics {
            self.count(frame, metrics: metrics)
        }
        context.write(self.wrapOutboundOut(frame), promise: nil)
        self.needsFlush = true
        if !self.inReadBurst, !self.flushScheduled {
            // Outside a read burst (operations emitting, timers): flush once at the end of
            // this event-loop tick, so events emitted together share TLS records.
            self.flushScheduled = true
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.execute {
                let (handler, context) = loopBound.value
                handler.flushScheduled = false
                handler.flushIfNeeded(context: context)
            }
        }
    }

    func flushIfNeeded(context: ChannelHandlerContext) {
        if self.needsFlush {
            self.needsFlush = false
            if self.eventsSinceFlush > 0 {
                self.configuration.metrics?.eventsSent.increment(by: self.eventsSinceFlush)
                self.eventsSinceFlush = 0
            }
            context.flush()
        }
    }

    /// Counts an event or an error going out (see ``ServerMetrics``).
    private func count(_ frame: OutboundFrame, metrics: ServerMetrics) {
        guard case .frame(let frame) = frame else {
            // Events already in wire format (a replay, an asset chunk, a stream's framed together).
            if case .frames(_, let count) = frame { self.eventsSinceFlush += count } else { self.eventsSinceFlush += 1 }
            return
        }
        switch frame.kind {
        case .event:
            self.eventsSinceFlush += 1
        case .complete(let complete):
            if let error = complete.error { metrics.errorSent(error.code, level: "stream") }
        case .error(let error):
            metrics.errorSent(error.code, level: "connection")
        default:
            break
        }
    }

    func closeWithError(code: Wire.ErrorCode, message: String, context: ChannelHandlerContext) {
        _ = self.machine.send(Wire.Frame(streamID: 0, kind: .error(Wire.ConnectionError(code: code, message: message))))
        self.writeErrorAndClose(code: code, message: message, context: context)
    }

    func writeErrorAndClose(code: Wire.ErrorCode, message: String, context: ChannelHandlerContext) {
        self.write(Wire.Frame(streamID: 0, kind: .error(Wire.ConnectionError(code: code, message: message))), context: context)
        self.close(context: context)
    }

    func close(context: ChannelHandlerContext) {
        guard !self.isClosing else { return }
        self.flushIfNeeded(context: context)
        self.isClosing = true
        self.timer?.cancel()
        self.timer = nil
        context.close(promise: nil)
    }
}
