import NIOCore

extension ConnectionStateMachine {
    /// What to do with a frame this side wants to send.
    public enum SendAction: Sendable, Hashable {
        /// Write it.
        case send
        /// Write it, then close the connection: it ends the last stream of a draining
        /// connection, or it is a `ConnectionError`.
        case sendAndClose
        /// Server: the stream has no credit left. Keep the event until `creditAvailable`.
        case waitForCredit
        /// The stream is gone (cancelled by the peer, or the connection closed): drop the frame.
        case drop
        /// This side got the protocol wrong (a bug, not the peer's doing).
        case invalid(String)
    }

    /// Checks a frame this side is about to send against the protocol and the peer's credit,
    /// and records it.
    public mutating func send(_ frame: Wire.Frame) -> SendAction {
        guard self.phase != .closed else { return .drop }
        guard let kind = frame.kind else { return .invalid("frame has no kind") }
        switch kind {
        case .ping, .pong:
            return frame.streamID == 0 ? .send : .invalid("Ping/Pong on stream \(frame.streamID)")
        case .error:
            self.phase = .closed
            self.streams.removeAll()
            return .sendAndClose
        case .goAway:
            self.phase = .draining
            if self.streams.isEmpty {
                self.phase = .closed
                return .sendAndClose
            }
            return .send
        case .hello:
            guard self.role == .client, self.phase == .handshaking, !self.sentHello else {
                return .invalid("Hello out of place")
            }
            self.sentHello = true
            return .send
        case .helloAck:
            guard self.role == .server, self.phase == .handshaking else { return .invalid("HelloAck out of place") }
            self.phase = .active
            return .send
        case .open(let open):
            return self.sendOpen(streamID: frame.streamID, initialWindow: open.initialWindow, lastSeq: 0)
        case .resume(let resume):
            return self.sendOpen(streamID: frame.streamID, initialWindow: resume.initialWindow, lastSeq: resume.lastSeq)
        case .window(let window):
            guard self.role == .client else { return .invalid("Window from a server") }
            guard var stream = self.streams[frame.streamID], stream.sendWindow(window.credit) else { return .drop }
            self.streams[frame.streamID] = stream
            return .send
        case .cancel(let cancel):
            guard self.role == .client else { return .invalid("Cancel from a server") }
            if self.streams.removeValue(forKey: frame.streamID) != nil {
                return self.closingIfDrained()
            }
            // A long-lived operation's completion acknowledgement goes on the stream its
            // `Complete` already ended.
            if cancel.completionAcknowledged, frame.streamID != 0, frame.streamID <= self.highestStreamID {
                return .send
            }
            return .drop
        case .event(let event):
            return self.sendEvent(streamID: frame.streamID, seq: event.seq)
        case .persisted:
            guard self.role == .server else { return .invalid("Persisted from a client") }
            guard let stream = self.streams[frame.streamID], stream.canSendPersisted else { return .drop }
            return .send
        case .complete(let complete):
            guard self.role == .server else { return .invalid("Complete from a client") }
            guard var stream = self.streams.removeValue(forKey: frame.streamID) else { return .drop }
            switch stream.complete(lastSeq: complete.lastSeq, isError: complete.error != nil) {
            case .lastSeqMismatch(let lastSeq):
                return .invalid("Complete says last seq \(complete.lastSeq) but \(lastSeq) was sent")
            case .drop:
                return .drop
            case .complete:
                return self.closingIfDrained()
            }
        }
    }

    /// Asks to send an `Event` with `seq` on `streamID` (one already encoded, for example):
    /// what ``send(_:)`` answers for that frame.
    public mutating func sendEvent(streamID: UInt64, seq: UInt64) -> SendAction {
        guard self.phase != .closed else { return .drop }
        guard self.role == .server else { return .invalid("Event from a client") }
        guard var stream = self.streams[streamID] else { return .drop }
        switch stream.sendEvent(seq: seq) {
        case .send:
            self.streams[streamID] = stream
            return .send
        case .waitForCredit:
            return .waitForCredit
        case .drop:
            return .drop
        case .outOfOrder(let lastSeq):
            return .invalid("Event seq \(seq) on stream \(streamID) after seq \(lastSeq)")
        }
    }

    private mutating func sendOpen(streamID: UInt64, initialWindow: UInt32, lastSeq: UInt64) -> SendAction {
        guard self.role == .client else { return .invalid("Open/Resume from a server") }
        guard self.phase == .active else { return .invalid("Open/Resume while \(self.phase)") }
        guard streamID > self.highestStreamID else { return .invalid("stream \(streamID) is not new") }
        self.highestStreamID = streamID
        self.streams[streamID] = self.makeStream(initialWindow: initialWindow, lastSeq: lastSeq)
        return .send
    }

    private mutating func closingIfDrained() -> SendAction {
        if self.isDrained {
            self.phase = .closed
            return .sendAndClose
        }
        return .send
    }

    /// Starts a graceful shutdown: returns the `GoAway` to send. Streams already open finish;
    /// new ones are refused; the connection closes when the last one ends.
    public func makeGoAway(code: Wire.ErrorCode, reason: String) -> Wire.Frame {
        Wire.Frame(
            streamID: 0,
            kind: .goAway(Wire.GoAway(lastStreamID: self.highestStreamID, code: code, reason: reason))
        )
    }
}
