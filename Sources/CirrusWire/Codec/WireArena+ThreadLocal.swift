#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The key of each thread's scratch arena; the destructor releases the arena
/// when its thread exits. nil if the process ran out of keys: the convenience
/// APIs then use a fresh arena per call.
private let scratchArenaKey: pthread_key_t? = {
    var key = pthread_key_t()
    let status = pthread_key_create(&key) { pointer in
        // Optional on Glibc, non-optional on Darwin.
        let pointer: UnsafeMutableRawPointer? = pointer
        if let pointer { Unmanaged<WireArena>.fromOpaque(pointer).release() }
    }
    return status == 0 ? key : nil
}()

/// A thread's scratch arena keeps one oversized block up to this size: a 3 MiB asset chunk
/// and its frame fit, so a thread streaming assets reuses one block instead of mapping and
/// unmapping megabytes per frame.
let scratchSpareOversizedLimit = 4 << 20

extension WireArena {
    /// Runs `body` with this thread's scratch arena, used by the convenience
    /// APIs that take no arena. The arena is reset afterwards. Nested use on
    /// the same thread gets a fresh arena instead.
    static func withScratch<Result, Failure: Error>(
        _ body: (WireArena) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let arena: WireArena
        if let key = scratchArenaKey, let existing = pthread_getspecific(key) {
            arena = Unmanaged<WireArena>.fromOpaque(existing).takeUnretainedValue()
        } else {
            arena = WireArena(spareOversizedLimit: scratchSpareOversizedLimit)
            if let key = scratchArenaKey {
                let retained = Unmanaged.passRetained(arena)
                if pthread_setspecific(key, retained.toOpaque()) != 0 { retained.release() }
            }
        }
        guard !arena.isScratchInUse else {
            let fresh = WireArena()
            defer { fresh.reset() }
            return try body(fresh)
        }
        arena.isScratchInUse = true
        defer {
            arena.reset()
            arena.isScratchInUse = false
        }
        return try body(arena)
    }
}
