import CirrusStore
import CirrusWire
import NIOCore

extension ConnectionHandler {
    // MARK: - Operations

    /// Starts the operation `open` on `streamID`: its stream takes the credit the machine
    /// granted, and the ``OperationRouter`` runs it.
    func startOperation(streamID: UInt64, open: Wire.Open, context: ChannelHandlerContext) {
        guard open.request != nil else {
            self.endStream(
                streamID: streamID,
                error: Wire.OperationError(code: .unknownFrameKind, message: "Open carries no request this server knows"),
                context: context
            )
            return
        }
        guard let caller = self.identity else {
            // The state machine admits Open only after HelloAck, which needs an identity.
            let error = Wire.OperationError(code: .notAuthenticated, message: "no identity")
            self.endStream(streamID: streamID, error: error, context: context)
            return
        }
        let stream = self.makeStream(streamID: streamID, operationID: open.operationID, context: context)
        self.configuration.metrics?.streamOpened(open.request)
        self.operations[streamID] = RunningOperation(stream: stream)
        let fields = OperationLogContext.fields(
            of: open, user: caller.userRecordName, stream: streamID, connection: self.logger.handler.metadata)
        self.operations[streamID]?.task = self.shared.router.start(
            open, caller: caller, stream: stream, fields: fields, loop: self.loopExecutor(context))
    }

    /// Attaches `streamID` to a long-lived operation: `Persisted`, the journal after the
    /// client's last seq, live events, `Complete`.
    func resumeOperation(streamID: UInt64, resume: Wire.Resume, context: ChannelHandlerContext) {
        guard let registry = self.configuration.longLivedOperations, let caller = self.identity else {
            self.endStream(
                streamID: streamID,
                error: Wire.OperationError(code: .unknownOperation, message: "no long-lived operation \(resume.operationID)"),
                context: context
            )
            return
        }
        let stream = self.makeStream(streamID: streamID, operationID: resume.operationID, context: context)
        // Seqs continue the operation's: the machine has the stream after the client's last_seq.
        self.operations[streamID] = RunningOperation(stream: stream)
        self.operations[streamID]?.task = self.shared.router.resume(
            resume, caller: caller, stream: stream, registry: registry)
    }

    /// The executor that runs small operations on the connection's event loop (made once).
    private func loopExecutor(_ context: ChannelHandlerContext) -> EventLoopTaskExecutor {
        if let executor = self.loopTaskExecutor { return executor }
        let executor = EventLoopTaskExecutor(context.eventLoop)
        self.loopTaskExecutor = executor
        return executor
    }

    private func makeStream(streamID: UInt64, operationID: String, context: ChannelHandlerContext) -> OperationStream {
        let stream = OperationStream(
            streamID: streamID,
            operationID: operationID,
            credit: self.machine.credit(streamID: streamID),
            handler: self,
            eventLoop: context.eventLoop,
            openStreams: self.openStreams
        )
        if self.isPaused { stream.pause() }
        return stream
    }

    /// Sends `Persisted` on `streamID`, marks the stream as following `key` (`release` ends
    /// that when the stream stops) and runs `then` (before any `Cancel` of the stream is
    /// handled); false when the stream already ended.
    func persisted(
        streamID: UInt64, key: LongLivedOperationKey, release: @escaping @Sendable () -> Void, then: () -> Void
    ) -> Bool {
        guard let context = self.context, !self.isClosing, self.operations[streamID] != nil else { return false }
        self.operations[streamID]?.longLived = key
        self.operations[streamID]?.releaseFollower = release
        then()
        self.send(
            Wire.Frame(streamID: streamID, kind: .persisted(Wire.Persisted(operationID: key.operationID))),
            context: context)
        return true
    }

    func stopOperation(streamID: UInt64) {
        self.deferredDrains.dropCompletion(streamID: streamID)
        guard let operation = self.operations.removeValue(forKey: streamID) else { return }
        // Before the next frame is read: a Resume right after this stream's Cancel attaches.
        operation.releaseFollower?()
        operation.stream.close()
        operation.task?.cancel()
    }

    func stopAllOperations() {
        for streamID in Array(self.operations.keys) {
            self.stopOperation(streamID: streamID)
        }
    }

    func endStream(streamID: UInt64, error: Wire.OperationError, context: ChannelHandlerContext) {
        let complete = Wire.Complete(lastSeq: 0, error: error)
        self.send(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
    }
}
