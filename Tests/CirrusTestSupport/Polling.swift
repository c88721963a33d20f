/// What a polling helper throws when its condition did not hold in time.
public struct TestTimeout: Error, CustomStringConvertible {
    /// What the test was waiting for.
    public let what: String

    public init(_ what: String = "a condition") {
        self.what = what
    }

    public var description: String { "timed out waiting for \(what)" }
}

/// Polls `condition` until it holds, every `interval`; throws `TestTimeout` naming `what` after
/// `timeout`. A hang guard, not a speed assertion: give it a generous timeout.
///
/// For example:
/// ```swift
/// try await eventually(timeout: .seconds(30), "the second save") { saved.count == 2 }
/// ```
public func eventually(
    timeout: Duration = .seconds(60),
    _ what: String = "a condition",
    every interval: Duration = .milliseconds(5),
    _ condition: () async throws -> Bool
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while try await !condition() {
        guard clock.now < deadline else { throw TestTimeout(what) }
        try await Task.sleep(for: interval)
    }
}
