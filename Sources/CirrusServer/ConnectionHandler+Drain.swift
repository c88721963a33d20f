import CirrusWire
import NIOCore

extension ConnectionHandler {
    // MARK: - Back-pressure

    /// Pauses the operations while the socket is not writable or the server's outbound budget
    /// is spent; resumes them, after writing what waited, when both allow it again.
    func updateProduction(context: ChannelHandlerContext) {
        let shouldPause = !context.channel.isWritable || (self.outbound?.shouldPause ?? false)
        guard shouldPause != self.isPaused else { return }
        self.isPaused = shouldPause
        if shouldPause {
            for operation in self.operations.values { operation.stream.pause() }
            return
        }
        self.writeDeferred(context: context)
        if self.isPaused { return }  // Writing what waited filled the socket again.
        for operation in self.operations.values { operation.stream.resume() }
    }

    /// Writes the events (and completions) that waited for the pause to end, stream by stream
    /// in the order they came, until the socket fills again.
    private func writeDeferred(context: ChannelHandlerContext) {
        while !self.isPaused, let (streamID, completion) = self.deferredDrains.popFirst() {
            self.writeQueued(streamID: streamID, context: context)
            if let completion {
                self.finish(streamID: streamID, completion: completion, context: context)
            }
            // Hand each stream's batch to the socket before the next, so a socket that fills
            // up pauses production again before every stream has written.
            self.flushIfNeeded(context: context)
            if !context.channel.isWritable {
                self.updateProduction(context: context)
            }
        }
    }

    // MARK: - Writing the operations' events

    /// Writes the events the operation on `streamID` queued, or, while production is paused,
    /// remembers to write them when it resumes.
    func drain(streamID: UInt64) {
        guard let context = self.context, self.operations[streamID] != nil else { return }
        if !self.isPaused, self.outbound?.shouldPause == true {
            // The shared budget ran out while this connection holds more than its share.
            self.updateProduction(context: context)
        }
        if self.isPaused {
            self.deferredDrains.append(streamID: streamID)
            return
        }
        self.writeQueued(streamID: streamID, context: context)
    }

    /// Writes what the operation on `streamID` queued, each event with the seq after the
    /// machine's last, then its `Complete` when it ended with them. The stream only queues what
    /// the machine's credit allows, so the machine accepts each.
    private func writeQueued(streamID: UInt64, context: ChannelHandlerContext) {
        guard let operation = self.operations[streamID] else { return }
        let (queued, completion) = operation.stream.takeQueued()
        // After the events, on every way out (a stream the writing stopped is gone by then).
        defer {
            if let completion {
                self.finish(streamID: streamID, completion: completion, context: context)
            }
        }
        guard var nextSeq = self.machine.lastSeq(streamID: streamID).map({ $0 + 1 }) else {
            if !queued.isEmpty {
                self.logger.debug("dropping \(queued.count) events of stream \(streamID): the stream ended")
            }
            return
        }
        // Events already in wire format (a saved record's, a change feed's stored record) are
        // framed one after another into one buffer, handed down the pipeline in one write: a
        // write per event cost each a buffer of its own, a trip through the pipeline and a copy
        // into the TLS handler's gathered record.
        var framed: ByteBuffer?
        var framedCount = 0
        func writeFramed() {
            guard let buffer = framed.take() else { return }
            self.write(.frames(buffer, count: framedCount), context: context)
            framedCount = 0
        }
        defer { writeFramed() }
        let maximumFrameBytes = self.encoder?.maximumFrameBytes ?? self.configuration.maximumFrameBytes
        for event in queued {
            let frame: OutboundFrame
            switch event {
            case .encodedPayload(let payload):
                switch self.machine.sendEvent(streamID: streamID, seq: nextSeq) {
                case .send, .sendAndClose:
                    var buffer = framed.take() ?? context.channel.allocator.buffer(capacity: Self.framedCapacity(queued))
                    do {
                        try FrameEncoder.encode(
                            streamID: streamID, seq: nextSeq, payload: payload, into: &buffer,
                            maximumFrameBytes: maximumFrameBytes)
                    } catch {
                        // The events before it go out; it ends its stream (written nothing).
                        framed = buffer
                        writeFramed()
                        let size = FrameEncoder.frameBodySize(streamID: streamID, seq: nextSeq, payload: payload)
                        self.endOversizeEvent(streamID: streamID, seq: nextSeq, size: size, context: context)
                        return
                    }
                    framed = buffer
                    framedCount += 1
                    nextSeq += 1
                case .waitForCredit, .drop, .invalid:
                    self.logger.debug("dropping an event of stream \(streamID): the stream ended")
                }
                continue
            case .payload(let payload):
                frame = .frame(Wire.Frame(streamID: streamID, kind: .event(Wire.Event(seq: nextSeq, payload: payload))))
            case .encoded(let event) where event.seq == nextSeq:
                frame = .event(streamID: streamID, event)
            case .assetChunk(let offset, let data):
                frame = .assetChunk(streamID: streamID, seq: nextSeq, offset: offset, data: data)
            case .encoded(let event):
                // Journal seqs are the operation's seqs, so this does not happen; if it did, the
                // client must not see a gap or a repeat.
                writeFramed()
                self.logger.error("stream \(streamID) replays journaled event \(event.seq) where \(nextSeq) is next")
                self.stopOperation(streamID: streamID)
                let error = Wire.OperationError(code: .internalError, message: "the operation's journal is out of order")
                let complete = Wire.Complete(lastSeq: nextSeq - 1, error: error)
                self.send(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
                return
            }
            writeFramed()  // The events framed so far go first.
            switch self.machine.sendEvent(streamID: streamID, seq: nextSeq) {
            case .send, .sendAndClose:
                self.write(frame, context: context)
                if let size = self.encoder?.takeRefusedSize() {
                    self.endOversizeEvent(streamID: streamID, seq: nextSeq, size: size, context: context)
                    return
                }
                nextSeq += 1
            case .waitForCredit, .drop, .invalid:
                // The stream's credit is the machine's, less what it queued; this means the
                // stream is gone.
                self.logger.debug("dropping an event of stream \(streamID): the stream ended")
            }
        }
    }

    /// Room for the frames of the events of `queued` already in wire format: each payload's
    /// bytes and at most 39 of length prefix, frame and event headers.
    private static func framedCapacity(_ queued: [OperationStream.QueuedEvent]) -> Int {
        var bytes = 0
        for case .encodedPayload(let payload) in queued { bytes += payload.bytes.count + 39 }
        return bytes
    }

    /// Ends the operation on `streamID` with its `Complete`, after what it queued (later, if
    /// production is paused: the events before it wait too).
    func complete(streamID: UInt64, completion: OperationCompletion) {
        guard let context = self.context, self.operations[streamID] != nil else { return }
        if self.isPaused {
            self.deferredDrains.append(streamID: streamID, completion: completion)
            return
        }
        self.writeQueued(streamID: streamID, context: context)
        self.finish(streamID: streamID, completion: completion, context: context)
    }

    private func finish(streamID: UInt64, completion: OperationCompletion, context: ChannelHandlerContext) {
        guard let operation = self.operations.removeValue(forKey: streamID) else { return }
        let lastSeq = self.machine.lastSeq(streamID: streamID) ?? 0
        let complete = Wire.Complete(lastSeq: lastSeq, error: completion.error, result: completion.result)
        self.send(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
        if let key = operation.longLived {
            self.completedLongLived.insert(streamID: streamID, key: key)
        }
    }

    /// Event `seq` of the operation on `streamID` is larger than the client accepts (the
    /// encoder refused it; nothing was sent): the stream ends with `LIMIT_EXCEEDED` after
    /// `seq - 1`. A long-lived operation keeps running and can be resumed from there on a
    /// connection with a larger limit.
    private func endOversizeEvent(streamID: UInt64, seq: UInt64, size: Int, context: ChannelHandlerContext) {
        self.stopOperation(streamID: streamID)
        let error = self.frameTooLargeError("event \(seq)", size: size)
        let complete = Wire.Complete(lastSeq: seq - 1, error: error)
        self.send(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
    }

    func frameTooLargeError(_ what: String, size: Int) -> Wire.OperationError {
        let limit = self.encoder?.maximumFrameBytes ?? self.configuration.maximumFrameBytes
        return Wire.OperationError(
            code: .limitExceeded,
            message: "\(what) is a frame of \(size) bytes, above this connection's max_frame_bytes of \(limit); "
                + "it was not sent"
        )
    }
}
