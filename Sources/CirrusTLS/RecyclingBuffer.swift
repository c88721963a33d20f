import NIOCore

/// A small buffer used again and again: handed out for one read or write
/// burst, then kept. If whoever got it last still holds it, `take` gets fresh
/// memory (ByteBuffer's copy-on-write), so sharing is always safe. Big buffers
/// are not kept, so an idle connection stays cheap.
struct RecyclingBuffer {
    static let maximumRetainedCapacity = 1_024

    private var buffer: ByteBuffer?

    /// An empty buffer with room for at least `capacity` bytes.
    mutating func take(capacity: Int, allocator: ByteBufferAllocator) -> ByteBuffer {
        guard var buffer = self.buffer.take() else {
            return allocator.buffer(capacity: capacity)
        }
        buffer.clear(minimumCapacity: capacity)
        return buffer
    }

    /// Keeps `buffer` for the next `take` if it is small.
    mutating func giveBack(_ buffer: ByteBuffer) {
        if buffer.capacity <= Self.maximumRetainedCapacity {
            self.buffer = buffer
        }
    }
}
