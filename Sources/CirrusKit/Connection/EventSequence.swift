/// The events of one operation handed to its callbacks so far, across every stream it ran on.
///
/// A long-lived operation resumed after a dropped connection asks the server for the events
/// after `delivered`; events of the old stream still queued on the callback queue then overlap
/// with the replay. `admit` lets each seq through once, in order: a seq already delivered is a
/// duplicate, a seq beyond the next one is a gap (which the protocol rules out).
///
/// For example:
/// ```swift
/// var sequence = EventSequence()
/// sequence.admit(1)  // .deliver
/// sequence.admit(1)  // .duplicate
/// sequence.admit(3)  // .gap(expected: 2)
/// ```
struct EventSequence: Sendable, Hashable {
    enum Admission: Sendable, Hashable {
        /// The next event: hand it to the callbacks.
        case deliver
        /// Already delivered: drop it.
        case duplicate
        /// Events are missing before this one.
        case gap(expected: UInt64)
    }

    /// The seq of the last event handed to the callbacks; 0 = none.
    private(set) var delivered: UInt64 = 0

    /// Whether the event `seq` goes to the callbacks; records it when it does.
    mutating func admit(_ seq: UInt64) -> Admission {
        if seq <= self.delivered {
            return .duplicate
        }
        guard seq == self.delivered + 1 else {
            return .gap(expected: self.delivered + 1)
        }
        self.delivered = seq
        return .deliver
    }
}
