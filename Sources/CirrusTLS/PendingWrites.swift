import NIOCore

/// Plaintext the application wrote and ``TLSHandler`` has not encrypted yet,
/// in order, split into flushed (ready) and not yet flushed.
struct PendingWrites {
    private var writes = CircularBuffer<(ByteBuffer, EventLoopPromise<Void>?)>()
    private var flushedCount = 0
    /// Readable bytes of all pending writes.
    private(set) var bytes = 0

    var isEmpty: Bool {
        self.writes.isEmpty
    }

    var hasFlushed: Bool {
        self.flushedCount > 0
    }

    mutating func append(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        self.writes.append((buffer, promise))
        self.bytes += buffer.readableBytes
    }

    /// Everything written so far becomes ready to send.
    mutating func markFlushed() {
        self.flushedCount = self.writes.count
    }

    mutating func popFlushed() -> (ByteBuffer, EventLoopPromise<Void>?)? {
        guard self.flushedCount > 0 else {
            return nil
        }
        self.flushedCount -= 1
        let write = self.writes.removeFirst()
        self.bytes -= write.0.readableBytes
        return write
    }

    /// Fails and forgets every write, flushed or not.
    mutating func failAll(_ error: Error) {
        let writes = self.writes
        self.writes.removeAll()
        self.flushedCount = 0
        self.bytes = 0
        for (_, promise) in writes {
            promise?.fail(error)
        }
    }
}
