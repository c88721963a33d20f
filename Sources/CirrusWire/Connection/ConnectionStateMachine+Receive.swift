import NIOCore

extension ConnectionStateMachine {
    /// What to do with a frame that arrived from the peer.
    public enum ReceiveAction: Sendable, Hashable {
        /// Nothing to do (a late `Window` or `Cancel` for a stream that already ended, a `Pong`).
        case none
        /// Server: the peer said `Hello` with a supported version; authenticate it, then send
        /// `HelloAck` (or a `ConnectionError`).
        case helloReceived(Wire.Hello)
        /// Client: the server accepted the connection.
        case helloAckReceived(Wire.HelloAck)
        /// Server: start the operation `open` on `streamID`.
        case openStream(streamID: UInt64, Wire.Open)
        /// Server: attach `streamID` to the long-lived operation named in `resume`.
        case resumeStream(streamID: UInt64, Wire.Resume)
        /// Server: refuse this stream alone by writing `Complete` with this error on it
        /// directly (the machine never admitted the stream, so `send` would drop it); the
        /// connection stays up.
        case refuseStream(streamID: UInt64, code: Wire.ErrorCode, message: String)
        /// Server: the client cancelled the operation on `streamID`; `action` carries what the
        /// `Cancel`'s flags ask. A plain `Cancel` (``StreamStateMachine/CancelAction/confirm(lastSeq:)``)
        /// leaves the stream open for exactly one more frame: the `Complete` with
        /// `OPERATION_CANCELLED` the server must send now. With `detach` or
        /// `completion_acknowledged` the stream is already gone and nothing is sent.
        case cancelStream(streamID: UInt64, reason: String, action: StreamStateMachine.CancelAction)
        /// Server: `Cancel` with `completion_acknowledged` on `streamID`, whose `Complete` already
        /// went out: the client has a long-lived operation's result, which may be forgotten.
        case completionAcknowledged(streamID: UInt64)
        /// Server: the client granted `granted` more events on `streamID`; send what waits for
        /// it.
        case creditAvailable(streamID: UInt64, granted: UInt64)
        /// Answer a `Ping`.
        case sendPong(nonce: UInt64)
        /// Client: hand this stream frame (`Event`, `Persisted`, `Complete`) to its operation.
        case deliver(Wire.Frame)
        /// The peer sent `GoAway`: open no new streams; those above `lastStreamID` were not
        /// processed. If `closeNow`, nothing is left open and the connection can close.
        case peerGoingAway(lastStreamID: UInt64, closeNow: Bool)
        /// The peer broke the protocol or a limit: send `ConnectionError` with this code and
        /// message, then close.
        case closeWithError(code: Wire.ErrorCode, message: String)
        /// The peer reported a connection error and is closing; close too.
        case peerClosed(Wire.ConnectionError)
    }

    /// Feeds one frame received from the peer.
    public mutating func receive(_ frame: Wire.Frame, now: NIODeadline) -> ReceiveAction {
        if self.phase == .closed {
            return .none
        }
        self.lastReceive = now
        switch frame.kind {
        case .ping, .pong: break
        default: self.lastActivity = now
        }
        guard let kind = frame.kind else {
            return self.close(.unknownFrameKind, "frame on stream \(frame.streamID) has no kind this server knows")
        }
        switch kind {
        case .ping(let ping):
            guard frame.streamID == 0 else { return self.violation("Ping on stream \(frame.streamID)") }
            return self.receivePing(ping)
        case .pong(let pong):
            guard frame.streamID == 0 else { return self.violation("Pong on stream \(frame.streamID)") }
            if let outstanding = self.outstandingPing, outstanding.nonce == pong.nonce {
                self.outstandingPing = nil
            }
            return .none
        case .goAway(let goAway):
            guard frame.streamID == 0 else { return self.violation("GoAway on stream \(frame.streamID)") }
            return self.receiveGoAway(goAway)
        case .error(let error):
            self.phase = .closed
            return .peerClosed(error)
        case .hello(let hello):
            return self.receiveHello(hello, streamID: frame.streamID)
        case .helloAck(let ack):
            return self.receiveHelloAck(ack, streamID: frame.streamID)
        case .open(let open):
            return self.receiveOpen(streamID: frame.streamID, initialWindow: open.initialWindow, lastSeq: 0, now: now) {
                .openStream(streamID: $0, open)
            }
        case .resume(let resume):
            return self.receiveOpen(
                streamID: frame.streamID, initialWindow: resume.initialWindow, lastSeq: resume.lastSeq, now: now
            ) { .resumeStream(streamID: $0, resume) }
        case .cancel(let cancel):
            return self.receiveCancel(cancel, streamID: frame.streamID, now: now)
        case .window(let window):
            return self.receiveWindow(window, streamID: frame.streamID)
        case .event(let event):
            return self.receiveEvent(event, frame: frame)
        case .persisted:
            return self.receiveStreamResult(frame, ends: false)
        case .complete:
            return self.receiveStreamResult(frame, ends: true)
        }
    }

    /// The outbound side became writable or stopped being so. While it is not, `Pong`s queue up
    /// and a peer that keeps pinging without reading is disconnected.
    public mutating func writabilityChanged(isWritable: Bool) {
        self.isWritable = isWritable
        if isWritable {
            self.queuedControlFrames = 0
        }
    }

    // MARK: - Connection frames

    private mutating func receivePing(_ ping: Wire.Ping) -> ReceiveAction {
        guard self.phase != .handshaking else { return self.violation("Ping before the handshake") }
        if !self.isWritable {
            self.queuedControlFrames += 1
            if self.queuedControlFrames > self.configuration.maximumQueuedControlFrames {
                return self.close(
                    .protocolViolation,
                    "more than \(self.configuration.maximumQueuedControlFrames) control frames queued for a peer that does not read"
                )
            }
        }
        return .sendPong(nonce: ping.nonce)
    }

    private mutating func receiveGoAway(_ goAway: Wire.GoAway) -> ReceiveAction {
        if self.phase == .active || self.phase == .handshaking {
            self.phase = .draining
        }
        if self.role == .client {
            // Streams the server never saw fail now; the caller retries them elsewhere.
            self.streams = self.streams.filter { $0.key <= goAway.lastStreamID }
        }
        let closeNow = self.streams.isEmpty
        if closeNow {
            self.phase = .closed
        }
        return .peerGoingAway(lastStreamID: goAway.lastStreamID, closeNow: closeNow)
    }

    private mutating func receiveHello(_ hello: Wire.Hello, streamID: UInt64) -> ReceiveAction {
        guard self.role == .server else { return self.violation("Hello sent to a client") }
        guard streamID == 0 else { return self.violation("Hello on stream \(streamID)") }
        guard self.phase == .handshaking else { return self.violation("second Hello") }
        guard hello.protocolVersion == self.configuration.protocolVersion else {
            return self.close(
                .unsupportedVersion,
                "protocol version \(hello.protocolVersion) is not supported; this server speaks \(self.configuration.protocolVersion)"
            )
        }
        return .helloReceived(hello)
    }

    private mutating func receiveHelloAck(_ ack: Wire.HelloAck, streamID: UInt64) -> ReceiveAction {
        guard self.role == .client else { return self.violation("HelloAck sent to a server") }
        guard streamID == 0 else { return self.violation("HelloAck on stream \(streamID)") }
        guard self.phase == .handshaking, self.sentHello else { return self.violation("unexpected HelloAck") }
        guard ack.protocolVersion == self.configuration.protocolVersion else {
            return self.close(.unsupportedVersion, "server speaks protocol version \(ack.protocolVersion)")
        }
        self.phase = .active
        return .helloAckReceived(ack)
    }

    // MARK: - Stream frames, server side

    private mutating func receiveOpen(
        streamID: UInt64,
        initialWindow: UInt32,
        lastSeq: UInt64,
        now: NIODeadline,
        action: (UInt64) -> ReceiveAction
    ) -> ReceiveAction {
        guard self.role == .server else { return self.violation("Open or Resume sent to a client") }
        guard streamID != 0 else { return self.violation("Open or Resume on stream 0") }
        switch self.phase {
        case .handshaking:
            return self.violation("Open or Resume before Hello")
        case .closed:
            return .none
        case .draining:
            return .refuseStream(streamID: streamID, code: .shuttingDown, message: "the server is shutting down")
        case .active:
            break
        }
        guard streamID > self.highestStreamID else {
            return self.violation("stream \(streamID) reused or out of order (highest so far \(self.highestStreamID))")
        }
        self.highestStreamID = streamID
        guard self.streams.count < self.configuration.maximumConcurrentStreams else {
            // A refusal costs the server as much as a cancel: both count against the peer.
            guard self.abandonTokens.spend(now: now) else {
                return self.close(.rateLimited, self.abandonRateMessage)
            }
            return .refuseStream(
                streamID: streamID,
                code: .tooManyStreams,
                message: "at most \(self.configuration.maximumConcurrentStreams) concurrent streams"
            )
        }
        self.streams[streamID] = self.makeStream(initialWindow: initialWindow, lastSeq: lastSeq)
        return action(streamID)
    }

    private mutating func receiveCancel(_ cancel: Wire.Cancel, streamID: UInt64, now: NIODeadline) -> ReceiveAction {
        guard streamID != 0 else { return self.violation("Cancel on stream 0") }
        guard self.role == .server else {
            return self.violation("Cancel sent to a client")
        }
        guard var stream = self.streams[streamID] else {
            // It ended already: a plain Cancel crossed the Complete; an acknowledgement follows it.
            let acknowledges = cancel.completionAcknowledged && streamID <= self.highestStreamID
            return acknowledges ? .completionAcknowledged(streamID: streamID) : .none
        }
        let action = stream.receiveCancel(cancel)
        if case .ignore = action { return .none }
        if stream.phase == .closed {
            // Detached or acknowledged: nothing more is sent on the stream.
            self.streams.removeValue(forKey: streamID)
        } else {
            // Only the `Complete` that confirms the cancellation may still go out.
            self.streams[streamID] = stream
        }
        guard self.abandonTokens.spend(now: now) else {
            return self.close(.rateLimited, self.abandonRateMessage)
        }
        return .cancelStream(streamID: streamID, reason: cancel.reason, action: action)
    }

    private mutating func receiveWindow(_ window: Wire.Window, streamID: UInt64) -> ReceiveAction {
        guard self.role == .server else { return self.violation("Window sent to a client") }
        guard streamID != 0 else {
            return self.close(.flowControlViolation, "Window on stream 0; credit is per operation stream")
        }
        guard var stream = self.streams[streamID] else { return .none }
        switch stream.receiveWindow(window.credit) {
        case .ignore:
            return .none
        case .overflow:
            return self.close(
                .flowControlViolation,
                "Window on stream \(streamID) raises its credit above \(self.configuration.maximumStreamCredit) events"
            )
        case .granted(let granted):
            self.streams[streamID] = stream
            return .creditAvailable(streamID: streamID, granted: granted)
        }
    }

    /// Credit for a new stream: what it asked for, or the default when it asked for 0.
    func initialCredit(_ requested: UInt32) -> UInt32 {
        requested == 0 ? self.configuration.initialStreamWindow : requested
    }

    var abandonRateMessage: String {
        "streams cancelled or refused faster than \(self.configuration.cancelsPerSecond) per second"
    }

    // MARK: - Stream frames, client side

    private mutating func receiveEvent(_ event: Wire.Event, frame: Wire.Frame) -> ReceiveAction {
        guard self.role == .client else { return self.violation("Event sent to a server") }
        guard var stream = self.streams[frame.streamID] else {
            // The client cancelled; events already in flight are dropped.
            return frame.streamID > self.highestStreamID || frame.streamID == 0
                ? self.violation("Event on stream \(frame.streamID), which was never opened") : .none
        }
        switch stream.receiveEvent(seq: event.seq) {
        case .deliver:
            self.streams[frame.streamID] = stream
            return .deliver(frame)
        case .ignore:
            return .none
        case .outOfOrder(let lastSeq):
            return self.violation("Event seq \(event.seq) on stream \(frame.streamID) after seq \(lastSeq)")
        case .beyondCredit:
            return self.close(.flowControlViolation, "Event on stream \(frame.streamID) beyond the granted credit")
        }
    }

    private mutating func receiveStreamResult(_ frame: Wire.Frame, ends: Bool) -> ReceiveAction {
        guard self.role == .client else { return self.violation("Persisted or Complete sent to a server") }
        guard var stream = self.streams[frame.streamID] else {
            return frame.streamID > self.highestStreamID || frame.streamID == 0
                ? self.violation("result on stream \(frame.streamID), which was never opened") : .none
        }
        if ends, case .complete(let complete) = frame.kind {
            self.streams.removeValue(forKey: frame.streamID)
            if case .lastSeqMismatch(let lastSeq) = stream.complete(lastSeq: complete.lastSeq, isError: complete.error != nil) {
                return self.violation(
                    "Complete on stream \(frame.streamID) says last seq \(complete.lastSeq) but \(lastSeq) arrived"
                )
            }
        }
        return .deliver(frame)
    }

    // MARK: - Errors

    mutating func violation(_ message: String) -> ReceiveAction {
        self.close(.protocolViolation, message)
    }

    mutating func close(_ code: Wire.ErrorCode, _ message: String) -> ReceiveAction {
        self.phase = .closed
        self.streams.removeAll()
        return .closeWithError(code: code, message: message)
    }
}
