import NIOCore

/// The life of one TLS connection as ``TLSHandler`` sees it, kept apart from
/// OpenSSL and the channel: each event returns what the handler must do.
///
/// idle → handshaking → active → closing → closed; any state → closed on
/// failure, channelInactive, or removal.
struct TLSHandlerStateMachine {
    enum State: Equatable {
        /// Added, channel not active yet.
        case idle
        case handshaking
        case active
        /// close_notify sent or received; the channel is closing. Data
        /// still arriving is decrypted; nothing more is sent.
        case closing
        /// Failed, closed, or removed.
        case closed
    }

    private(set) var state = State.idle

    /// Whether flushed plaintext may be encrypted and sent now.
    var canSend: Bool {
        self.state == .active
    }

    // MARK: Starting

    enum ActivationAction: Equatable {
        case startHandshake
        case none
    }

    /// The channel is active (or the handler joined an active channel).
    mutating func channelActive() -> ActivationAction {
        guard self.state == .idle else {
            return .none
        }
        self.state = .handshaking
        return .startHandshake
    }

    /// The handshake finished; returns whether the connection is now active.
    mutating func handshakeCompleted() -> Bool {
        guard self.state == .handshaking else {
            return false
        }
        self.state = .active
        return true
    }

    // MARK: Inbound

    enum ReadAction: Equatable {
        /// Bytes arrived before channelActive: start, then feed them in.
        case startHandshakeAndContinue
        case continueHandshake
        case decrypt
        case ignore
    }

    mutating func channelRead() -> ReadAction {
        switch self.state {
        case .idle:
            self.state = .handshaking
            return .startHandshakeAndContinue
        case .handshaking:
            return .continueHandshake
        case .active, .closing:
            return .decrypt
        case .closed:
            return .ignore
        }
    }

    enum CloseNotifyAction: Equatable {
        /// Answer with our close_notify and close the channel.
        case replyAndClose
        case none
    }

    mutating func closeNotifyReceived() -> CloseNotifyAction {
        guard self.state == .active else {
            return .none
        }
        self.state = .closing
        return .replyAndClose
    }

    enum InactiveAction: Equatable {
        case fireUnexpectedEOF(duringHandshake: Bool)
        case none
    }

    mutating func channelInactive() -> InactiveAction {
        let previous = self.state
        self.state = .closed
        switch previous {
        case .handshaking:
            return .fireUnexpectedEOF(duringHandshake: true)
        case .active:
            return .fireUnexpectedEOF(duringHandshake: false)
        case .idle, .closing, .closed:
            return .none
        }
    }

    // MARK: Outbound

    enum WriteAction: Equatable {
        /// Keep it until a flush while active.
        case buffer
        case fail
    }

    func write() -> WriteAction {
        switch self.state {
        case .idle, .handshaking, .active:
            .buffer
        case .closing, .closed:
            .fail
        }
    }

    enum CloseAction: Equatable {
        /// Send what was flushed, then close_notify, then close.
        case sendCloseNotifyAndClose
        /// Fail what is pending and close; there is nothing to notify.
        case failPendingAndClose
        /// Already closing or closed, or only the input: pass it on.
        case forward
    }

    mutating func close(mode: CloseMode) -> CloseAction {
        if mode == .input {
            return .forward
        }
        switch self.state {
        case .active:
            self.state = .closing
            return .sendCloseNotifyAndClose
        case .idle, .handshaking:
            self.state = .closed
            return .failPendingAndClose
        case .closing, .closed:
            return .forward
        }
    }

    // MARK: Ending

    enum FailureAction: Equatable {
        /// Send any alert, fire the error, close.
        case reportAndClose
        /// Already closed: a second failure is not news.
        case ignore
    }

    mutating func failed() -> FailureAction {
        guard self.state != .closed else {
            return .ignore
        }
        self.state = .closed
        return .reportAndClose
    }

    mutating func handlerRemoved() {
        self.state = .closed
    }
}
