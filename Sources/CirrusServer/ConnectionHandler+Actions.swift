import CirrusWire
import NIOCore

extension ConnectionHandler {
    // MARK: - Acting on the state machine

    func handle(_ action: ConnectionStateMachine.ReceiveAction, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .helloReceived(let hello):
            self.acceptHello(hello, context: context)
        case .openStream(let streamID, let open):
            // The merge rule applied once: what runs (and what a long-lived journal keeps) reads
            // effective values.
            self.startOperation(streamID: streamID, open: open.effective, context: context)
        case .resumeStream(let streamID, let resume):
            self.resumeOperation(streamID: streamID, resume: resume, context: context)
        case .refuseStream(let streamID, let code, let message):
            guard self.spendAbandonedStream(context: context) else { return }
            // Never admitted by the machine: written directly.
            let complete = Wire.Complete(lastSeq: 0, error: Wire.OperationError(code: code, message: message))
            self.write(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
        case .cancelStream(let streamID, _, let cancel):
            self.cancelStream(streamID: streamID, action: cancel, context: context)
        case .completionAcknowledged(let streamID):
            if let key = self.completedLongLived.acknowledge(streamID: streamID) {
                self.shared.router.acknowledge(key)
            }
        case .creditAvailable(let streamID, _):
            // The machine counts the credit; the stream learns what it may queue now.
            self.operations[streamID]?.stream.creditChanged(to: self.machine.credit(streamID: streamID))
        case .sendPong(let nonce):
            self.send(Wire.Frame(streamID: 0, kind: .pong(Wire.Pong(nonce: nonce))), context: context)
        case .deliver, .helloAckReceived:
            break
        case .peerGoingAway(_, let closeNow):
            if closeNow {
                self.close(context: context)
            }
        case .closeWithError(let code, let message):
            self.logger.info("closing connection: \(code): \(message)")
            self.writeErrorAndClose(code: code, message: message, context: context)
        case .peerClosed(let error):
            self.logger.debug("peer closed the connection: \(error.code): \(error.message)")
            self.close(context: context)
        }
    }

    /// The client cancelled the operation on `streamID`; `action` says what the `Cancel`'s flags
    /// ask (see ``StreamStateMachine/CancelAction``).
    private func cancelStream(streamID: UInt64, action: StreamStateMachine.CancelAction, context: ChannelHandlerContext) {
        if let key = self.operations[streamID]?.longLived {
            switch action {
            case .acknowledgeCompletion: self.shared.router.acknowledge(key)
            case .confirm: self.shared.router.cancel(key)
            case .detach, .ignore: break
            }
        }
        self.stopOperation(streamID: streamID)
        guard self.spendAbandonedStream(context: context) else { return }
        if case .confirm(let lastSeq) = action {
            // A plain Cancel: the stream ends with the one Complete that confirms it.
            let error = Wire.OperationError(code: .operationCancelled, message: "the operation was cancelled")
            let complete = Wire.Complete(lastSeq: lastSeq, error: error)
            self.send(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
        } else if self.machine.isDrained {
            self.close(context: context)
        }
    }

    /// Counts a cancelled or refused stream against the user across all their connections;
    /// false (and the connection closes) when they exceeded the rate.
    func spendAbandonedStream(context: ChannelHandlerContext) -> Bool {
        guard let user = self.identity?.userRecordName,
            !self.configuration.peerLimits.spendAbandonedStream(user: user, now: .now())
        else { return true }
        let refusal = PeerLimits.Refusal.abandoningStreams(
            perSecond: self.configuration.peerLimits.configuration.abandonedStreamsPerUserPerSecond)
        self.logger.info("closing connection of \(user): \(refusal.message)")
        self.closeWithError(code: .rateLimited, message: refusal.message, context: context)
        return false
    }
}
