import Foundation

/// A value guarded by a lock: the one place CirrusModel's reference types keep mutable state,
/// shared (`package`) with the package's other modules (the CLI and the load generator).
///
/// `@unchecked Sendable` is safe because `value` is only reached through `withLock`,
/// which holds `lock` for the whole access, so no two threads touch it at once.
package final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
