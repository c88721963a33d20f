import Foundation

/// A value behind a lock.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: every access to `value` goes through `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        self.lock.lock()
        defer { self.lock.unlock() }
        return try body(&self.value)
    }
}
