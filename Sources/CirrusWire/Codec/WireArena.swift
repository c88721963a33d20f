#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A bump-pointer allocator for the temporary C structs of one encode or decode.
///
/// Encoding builds the protobuf-c struct tree of a message (structs, pointer
/// arrays, strings, byte strings) in the arena, packs it and resets the arena;
/// decoding hands the arena to `protobuf_c_message_unpack` as its allocator
/// (free is a no-op), converts the result to Swift and resets. Nothing the
/// arena handed out is used after a reset, so no C memory outlives a call.
///
/// An arena is not thread-safe: use one per channel or thread and reuse it, so
/// steady-state encoding and decoding do not call `malloc`.
///
/// For example:
/// ```swift
/// let arena = WireArena()
/// let frame = try bytes.withUnsafeBytes { try Wire.Frame.decode($0, arena: arena) }
/// ```
public final class WireArena {
    /// Bytes per regular chunk.
    public let chunkSize: Int
    /// Regular chunks kept across resets; more are freed by `reset()`.
    public let retainedChunkLimit: Int
    /// The most memory one decode may take from the arena. A message whose
    /// unpacked form needs more is rejected as malformed. Unchecked like the state below:
    /// protobuf-c's allocator callback reads it once per sub-message, string and array.
    @exclusivity(unchecked) public var decodeByteLimit: Int
    /// The largest allocation too big for a chunk that `reset()` keeps for the next one (an
    /// asset chunk's bytes, encoded or decoded again and again on one thread); 0 = none kept.
    /// Without it each such frame costs a fresh `malloc` of megabytes, which glibc serves
    /// with `mmap` and gives back with `munmap`: page faults and zeroing on every frame.
    public let spareOversizedLimit: Int

    // The arena is confined to one thread at a time (it is not Sendable), so
    // the runtime exclusivity checks on its hot state only cost time.
    @exclusivity(unchecked) private var chunks: [UnsafeMutableRawPointer] = []
    /// Allocations too large for a chunk, with their sizes, freed by `reset()`.
    @exclusivity(unchecked) private var oversized: [(block: UnsafeMutableRawPointer, capacity: Int)] = []
    /// One oversized block kept by `reset()` for reuse (see `spareOversizedLimit`).
    @exclusivity(unchecked) private var spare: (block: UnsafeMutableRawPointer, capacity: Int)?
    @exclusivity(unchecked) private var chunkIndex = 0
    @exclusivity(unchecked) private var offset = 0
    @exclusivity(unchecked) private var bytesInUse = 0
    /// Set while this arena is lent out as a thread's scratch arena.
    @exclusivity(unchecked) var isScratchInUse = false

    /// The largest number of chunks (regular and oversized) held at once.
    @exclusivity(unchecked) public private(set) var highWaterChunkCount = 0

    /// Chunks held now (regular and oversized; not the spare).
    public var chunkCount: Int { chunks.count + oversized.count }

    /// Bytes of the oversized block kept for reuse; 0 when none is.
    public var spareCapacity: Int { spare?.capacity ?? 0 }

    /// ``decodeByteLimit`` unless given: 64 MiB (every thread's scratch arena has it).
    public static let defaultDecodeByteLimit = 64 << 20

    /// Creates an empty arena; memory is allocated on first use.
    public init(
        chunkSize: Int = 16 * 1024, retainedChunkLimit: Int = 4, decodeByteLimit: Int = WireArena.defaultDecodeByteLimit,
        spareOversizedLimit: Int = 0
    ) {
        self.chunkSize = max(chunkSize, 256)
        self.retainedChunkLimit = max(retainedChunkLimit, 1)
        self.decodeByteLimit = decodeByteLimit
        self.spareOversizedLimit = max(spareOversizedLimit, 0)
    }

    deinit {
        for chunk in chunks { free(chunk) }
        for entry in oversized { free(entry.block) }
        if let spare { free(spare.block) }
    }

    /// Forgets every allocation. Keeps up to `retainedChunkLimit` chunks for reuse, and the
    /// largest oversized block up to `spareOversizedLimit` bytes.
    public func reset() {
        for entry in oversized {
            if entry.capacity <= spareOversizedLimit, entry.capacity > (spare?.capacity ?? 0) {
                if let spare { free(spare.block) }
                spare = entry
            } else {
                free(entry.block)
            }
        }
        oversized.removeAll(keepingCapacity: true)
        while chunks.count > retainedChunkLimit {
            free(chunks.removeLast())
        }
        chunkIndex = 0
        offset = 0
        bytesInUse = 0
    }

    /// `byteCount` bytes aligned to `alignment` (a power of two up to 16), or
    /// nil when `malloc` fails.
    func allocateIfPossible(byteCount: Int, alignment: Int) -> UnsafeMutableRawPointer? {
        let byteCount = max(byteCount, 1)
        bytesInUse += byteCount
        if byteCount > chunkSize / 4 {
            if let reusable = spare, reusable.capacity >= byteCount {
                spare = nil
                oversized.append(reusable)
                noteChunkCount()
                return reusable.block
            }
            guard let block = malloc(byteCount) else { return nil }
            oversized.append((block, byteCount))
            noteChunkCount()
            return block
        }
        while true {
            if chunkIndex < chunks.count {
                let aligned = (offset + alignment - 1) & ~(alignment - 1)
                if aligned + byteCount <= chunkSize {
                    offset = aligned + byteCount
                    return chunks[chunkIndex] + aligned
                }
                if chunkIndex + 1 < chunks.count {
                    chunkIndex += 1
                    offset = 0
                    continue
                }
            }
            guard let chunk = malloc(chunkSize) else { return nil }
            chunks.append(chunk)
            chunkIndex = chunks.count - 1
            offset = 0
            noteChunkCount()
        }
    }

    /// Memory for protobuf-c's unpacker: nil once the decode limit is reached.
    func allocateForDecoder(byteCount: Int) -> UnsafeMutableRawPointer? {
        guard byteCount <= decodeByteLimit - bytesInUse else { return nil }
        return allocateIfPossible(byteCount: byteCount, alignment: 16)
    }

    /// `byteCount` bytes for encoding. Running out of memory here is treated
    /// like Swift's own allocation failure (a trap); the sizes come from
    /// values this process built, never from a peer.
    func allocate(byteCount: Int, alignment: Int) -> UnsafeMutableRawPointer {
        guard let pointer = allocateIfPossible(byteCount: byteCount, alignment: alignment) else {
            fatalError("WireArena: out of memory allocating \(byteCount) bytes")
        }
        return pointer
    }

    private func noteChunkCount() {
        highWaterChunkCount = max(highWaterChunkCount, chunkCount)
    }
}
