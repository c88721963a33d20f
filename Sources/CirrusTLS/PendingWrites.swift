import NIOCore

/// Plaintext the application wrote and ``TLSHandler`` has not encrypted yet,
/// in order, split into flushed (ready) and not yet flushed.
struct PendingWrites {
    /// Room for a few writes at first (an idle connection holds this array): it doubles as needed.
    private var writes = CircularBuffer<(ByteBuffer, EventLoopPromise<Void>?)>(initialCapacity: 4)
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

    /// Forgets every write, flushed or not; returns their promises for the caller to fail.
    /// Failing them here, inside a mutating call, would let a promise's callback (which may
    /// close the channel, and so re-enter the handler) reach this value while it is being
    /// modified.
    mutating func removeAll() -> [EventLoopPromise<Void>] {
        let promises = self.writes.compactMap(\.1)
        self.writes.removeAll()
        self.flushedCount = 0
        self.bytes = 0
        return promises
    }
}
