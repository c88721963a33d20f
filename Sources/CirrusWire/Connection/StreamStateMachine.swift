/// The protocol rules of one operation stream, as a value that is fed events and answers with
/// actions: its phase, the `seq` of its events and its flow-control credit. The
/// ``ConnectionStateMachine`` keeps one per open stream and is the only place that counts a
/// stream's credit; this type never touches a channel, so every transition is tested alone.
///
/// On the server: `Open` (or `Resume`) opens the stream with the client's initial window; each
/// `Event` sent spends one unit of credit and takes the next `seq`; `Window` adds credit; the
/// stream ends with `Complete`, or with `Cancel`, whose flags the answer carries
/// (``CancelAction``). On the client the same value counts the events received against the
/// credit granted.
///
/// For example, on the server:
/// ```swift
/// var stream = StreamStateMachine(maximumCredit: 1 << 32)
/// _ = stream.open(initialCredit: 32, lastSeq: 0)
/// switch stream.sendEvent(seq: 1) {
/// case .send: …           // write the event
/// case .waitForCredit: …  // keep it until a Window arrives
/// default: …
/// }
/// ```
public struct StreamStateMachine: Sendable, Hashable {
    /// Where the stream is in its life.
    public enum Phase: Sendable, Hashable {
        /// Not opened yet.
        case idle
        /// Events flow while there is credit.
        case open
        /// Server: the peer cancelled it with a plain `Cancel`; only the `Complete` confirming
        /// that may still be sent.
        case cancelled
        /// Ended: nothing more is sent or accepted on it.
        case closed
    }

    public private(set) var phase: Phase = .idle
    /// Events that may still be sent (server) or received (client) before more credit is granted.
    public private(set) var credit: UInt64 = 0
    /// The last event `seq` sent (server) or received (client).
    public private(set) var lastSeq: UInt64 = 0
    /// The most credit the stream may hold at once.
    public let maximumCredit: UInt64

    public init(maximumCredit: UInt64) {
        self.maximumCredit = maximumCredit
    }

    // MARK: - Opening

    /// What opening the stream answers.
    public enum OpenAction: Sendable, Hashable {
        /// The stream is open with this credit (the requested one, at most ``maximumCredit``).
        case opened(credit: UInt64)
        /// The stream was opened before: a second `Open` or `Resume` on it.
        case duplicate
    }

    /// Opens the stream (`Open`, or `Resume` after `lastSeq`) with `initialCredit` events of
    /// credit.
    public mutating func open(initialCredit: UInt32, lastSeq: UInt64) -> OpenAction {
        guard self.phase == .idle else { return .duplicate }
        self.phase = .open
        self.lastSeq = lastSeq
        self.credit = min(UInt64(initialCredit), self.maximumCredit)
        return .opened(credit: self.credit)
    }

    // MARK: - Credit

    /// What a `Window` from the client answers, on the server.
    public enum WindowAction: Sendable, Hashable {
        /// The credit grew by `granted`; send what waited for it.
        case granted(UInt64)
        /// The stream is cancelled or ended (the `Window` crossed its end): nothing to do.
        case ignore
        /// The `Window` raises the credit above ``maximumCredit``: a flow-control violation.
        case overflow
    }

    /// Server: the client granted `granted` more events.
    public mutating func receiveWindow(_ granted: UInt32) -> WindowAction {
        guard self.phase == .open else { return .ignore }
        guard self.credit + UInt64(granted) <= self.maximumCredit else { return .overflow }
        self.credit += UInt64(granted)
        return .granted(UInt64(granted))
    }

    /// Client: this side grants `granted` more events (sends a `Window`); the credit stops at
    /// ``maximumCredit``. False when the stream is not open (the `Window` is not sent).
    public mutating func sendWindow(_ granted: UInt32) -> Bool {
        guard self.phase == .open else { return false }
        self.credit = min(self.credit + UInt64(granted), self.maximumCredit)
        return true
    }

    // MARK: - Events

    /// What sending an `Event` answers, on the server.
    public enum SendEventAction: Sendable, Hashable {
        /// Write it: one unit of credit is spent and `seq` is the stream's last.
        case send
        /// No credit left: keep the event until a `Window` grants more.
        case waitForCredit
        /// The stream is cancelled or ended: drop the event.
        case drop
        /// `seq` does not follow the last one sent (`lastSeq`): a bug on this side.
        case outOfOrder(lastSeq: UInt64)
    }

    /// Server: asks to send the `Event` with `seq`.
    public mutating func sendEvent(seq: UInt64) -> SendEventAction {
        guard self.phase == .open else { return .drop }
        guard seq == self.lastSeq + 1 else { return .outOfOrder(lastSeq: self.lastSeq) }
        guard self.credit > 0 else { return .waitForCredit }
        self.credit -= 1
        self.lastSeq = seq
        return .send
    }

    /// What receiving an `Event` answers, on the client.
    public enum ReceiveEventAction: Sendable, Hashable {
        /// Hand it to the operation.
        case deliver
        /// The stream ended on this side (cancelled): events in flight are dropped.
        case ignore
        /// `seq` does not follow the last one received (`lastSeq`): a protocol violation.
        case outOfOrder(lastSeq: UInt64)
        /// The peer sent beyond the credit it was granted: a flow-control violation.
        case beyondCredit
    }

    /// Client: an `Event` with `seq` arrived.
    public mutating func receiveEvent(seq: UInt64) -> ReceiveEventAction {
        guard self.phase == .open else { return .ignore }
        guard seq == self.lastSeq + 1 else { return .outOfOrder(lastSeq: self.lastSeq) }
        guard self.credit > 0 else { return .beyondCredit }
        self.credit -= 1
        self.lastSeq = seq
        return .deliver
    }

    /// Server: whether `Persisted` may be sent now (the stream is open and not cancelled).
    public var canSendPersisted: Bool { self.phase == .open }

    // MARK: - Ending

    /// What ending the stream with `Complete` answers.
    public enum CompleteAction: Sendable, Hashable {
        /// The stream ended with it: send it (server) or deliver it (client).
        case complete
        /// The stream had ended already: drop it.
        case drop
        /// A successful `Complete` whose `last_seq` is not the stream's `lastSeq`. The stream
        /// ends all the same.
        case lastSeqMismatch(lastSeq: UInt64)
    }

    /// `Complete` after `lastSeq`, with an error or not, is sent (server) or received (client).
    public mutating func complete(lastSeq: UInt64, isError: Bool) -> CompleteAction {
        guard self.phase == .open || self.phase == .cancelled else { return .drop }
        self.phase = .closed
        self.credit = 0
        if !isError, lastSeq != self.lastSeq {
            return .lastSeqMismatch(lastSeq: self.lastSeq)
        }
        return .complete
    }

    /// What a `Cancel` from the client answers, on the server: the flags of the `Cancel`, read
    /// once, here.
    public enum CancelAction: Sendable, Hashable {
        /// A plain `Cancel`: stop the operation (a long-lived one too) and send the one
        /// `Complete` with `OPERATION_CANCELLED` after `lastSeq` that the stream still takes.
        case confirm(lastSeq: UInt64)
        /// `detach`: stop following the operation; a long-lived one keeps running. Nothing more
        /// is sent on the stream.
        case detach
        /// `completion_acknowledged`: the client has the operation's `Complete`, so a
        /// long-lived operation may be forgotten. Nothing more is sent on the stream.
        case acknowledgeCompletion
        /// Nothing to do: the stream was never opened, already awaits its confirming
        /// `Complete`, or ended (a plain `Cancel` crossed its `Complete`).
        case ignore
    }

    /// Server: the client sent `cancel` on this stream.
    public mutating func receiveCancel(_ cancel: Wire.Cancel) -> CancelAction {
        switch self.phase {
        case .idle, .cancelled:
            return .ignore
        case .closed:
            // A long-lived operation's completion is acknowledged after its Complete.
            return cancel.completionAcknowledged ? .acknowledgeCompletion : .ignore
        case .open:
            self.credit = 0
            if cancel.completionAcknowledged {
                self.phase = .closed
                return .acknowledgeCompletion
            }
            if cancel.detach {
                self.phase = .closed
                return .detach
            }
            self.phase = .cancelled
            return .confirm(lastSeq: self.lastSeq)
        }
    }

}
