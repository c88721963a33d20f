import Synchronization

/// A value guarded by a lock: where CirrusModel's reference types keep mutable state (but
/// `CKRecord`, the one made and freed most, which holds its `Mutex` and state itself), shared
/// (`package`) with the package's other modules (the CLI and the load generator).
///
/// The lock is the standard library's `Mutex`, stored inline (a futex word on Linux): unlike an
/// `NSLock`, no object and no `pthread_mutex_t` of its own to allocate, initialize, destroy and
/// free with every ID and zone.
///
/// `@unchecked Sendable` is safe because `value` is only reached through `withLock`,
/// which holds `lock` for the whole access, so no two threads touch it at once.
package final class Locked<Value>: @unchecked Sendable {
    private let lock = Mutex(())
    /// Unchecked: the lock already makes every access exclusive (a nested `withLock` on the
    /// same box would deadlock before it could overlap), so the runtime's own check of each
    /// access only costs time.
    @exclusivity(unchecked) private var value: Value

    /// `value` is moved in: a state of many reference-counted parts is not copied part by part.
    package init(_ value: consuming Value) {
        self.value = consume value
    }

    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        try lock.withLock { (_) throws(Failure) in try body(&value) }
    }
}
