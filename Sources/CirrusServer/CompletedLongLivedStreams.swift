import CirrusStore

/// The streams of one connection that delivered a long-lived operation's `Complete`, with the
/// operation each followed: a `Cancel` with `completion_acknowledged` on one of them lets that
/// operation be forgotten. Holds at most ``capacity`` streams, the oldest (lowest stream ID)
/// forgotten first, so a client that never acknowledges cannot grow it.
///
/// For example:
/// ```swift
/// completed.insert(streamID: 7, key: key)
/// if let key = completed.acknowledge(streamID: 7) { router.acknowledge(key) }
/// ```
struct CompletedLongLivedStreams: Sendable {
    /// The streams kept at most on one connection.
    static let defaultCapacity = 1_024

    let capacity: Int
    private var keys: [UInt64: LongLivedOperationKey] = [:]

    init(capacity: Int = Self.defaultCapacity) {
        self.capacity = capacity
    }

    /// The streams remembered now.
    var count: Int { self.keys.count }

    /// `streamID` delivered the `Complete` of the long-lived operation `key`.
    mutating func insert(streamID: UInt64, key: LongLivedOperationKey) {
        if self.keys.count >= self.capacity, let oldest = self.keys.keys.min() {
            self.keys.removeValue(forKey: oldest)
        }
        self.keys[streamID] = key
    }

    /// The client acknowledged the completion on `streamID`: the operation it followed, once;
    /// nil for a stream that followed none or was forgotten.
    mutating func acknowledge(streamID: UInt64) -> LongLivedOperationKey? {
        self.keys.removeValue(forKey: streamID)
    }
}
