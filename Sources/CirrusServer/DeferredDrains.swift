/// The streams of one connection whose queued events (and maybe `Complete`) wait for a pause to
/// end (the socket not writable, or the server's outbound budget spent), in the order they asked
/// to be drained. Each stream is in the queue at most once.
///
/// For example:
/// ```swift
/// deferred.append(streamID: 3)
/// while let (streamID, completion) = deferred.popFirst() { … }
/// ```
struct DeferredDrains: Sendable {
    private var order: [UInt64] = []
    private var completions: [UInt64: OperationCompletion] = [:]

    /// Whether no stream waits.
    var isEmpty: Bool { self.order.isEmpty }

    /// `streamID` queued events to write when the pause ends.
    mutating func append(streamID: UInt64) {
        if !self.order.contains(streamID) {
            self.order.append(streamID)
        }
    }

    /// `streamID` ended with `completion`, to send after its queued events when the pause ends.
    mutating func append(streamID: UInt64, completion: OperationCompletion) {
        self.append(streamID: streamID)
        self.completions[streamID] = completion
    }

    /// `streamID` stopped: its `Complete` is no longer sent.
    mutating func dropCompletion(streamID: UInt64) {
        self.completions.removeValue(forKey: streamID)
    }

    /// The stream to drain next, with its completion if it ended.
    mutating func popFirst() -> (streamID: UInt64, completion: OperationCompletion?)? {
        guard !self.order.isEmpty else { return nil }
        let streamID = self.order.removeFirst()
        return (streamID, self.completions.removeValue(forKey: streamID))
    }
}
