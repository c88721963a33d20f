import Dispatch

/// The bridge between libFuzzer's C entry point and Swift.
public enum FuzzInput {
    /// The input libFuzzer hands to `LLVMFuzzerTestOneInput` as a byte array.
    public static func bytes(_ start: UnsafeRawPointer?, _ count: Int) -> [UInt8] {
        guard let start, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: start, count: count))
    }

    /// The input as text, when it is valid UTF-8 (the CLI reads files the same way).
    public static func text(_ start: UnsafeRawPointer?, _ count: Int) -> String? {
        String(validating: self.bytes(start, count), as: UTF8.self)
    }
}

/// Runs async code to completion from libFuzzer's synchronous callback, which is called on the
/// main thread, never on a cooperative-pool thread, so blocking it cannot starve the pool.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let done = DispatchSemaphore(value: 0)
    let result = ResultBox<T>()
    Task {
        result.value = await body()
        done.signal()
    }
    done.wait()
    // The semaphore orders the write above before this read.
    guard let value = result.value else { preconditionFailure("the task signalled without a result") }
    return value
}

/// Carries a task's result to the thread waiting for it.
// @unchecked Sendable: written once by the task before it signals the semaphore, read once by
// the waiting thread after `wait()` returns; the semaphore orders the two.
private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
