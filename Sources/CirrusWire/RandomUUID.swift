import Foundation

/// Random (version 4) UUIDs made from `SystemRandomNumberGenerator`.
///
/// Foundation's `UUID()` on Linux opens, reads and closes `/dev/urandom` for every UUID (three
/// system calls, about 2.8 µs here); the system generator is `getrandom(2)`, about 0.85 µs for
/// the two calls of one UUID. Every `CKOperation` names itself with one, and a profile of
/// `cirrus bench --op fetch --concurrency 64` spent 4.7 % of the client's CPU opening
/// `/dev/urandom`.
///
/// For example:
/// ```swift
/// let operationID = RandomUUID.string()   // "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"
/// ```
package enum RandomUUID {
    /// A new random UUID.
    package static func make() -> UUID {
        var generator = SystemRandomNumberGenerator()
        let first: UInt64 = generator.next()
        let second: UInt64 = generator.next()
        // Bytes 0–7 and 8–15, big-endian: the version (4) is the high nibble of byte 6, the
        // variant (binary 10) the two high bits of byte 8.
        let high = ((first & ~0xF000) | 0x4000).bigEndian
        let low = ((second & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000).bigEndian
        return withUnsafeBytes(of: (high, low)) { b in
            UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
        }
    }

    /// A new random UUID's string, upper-case as `UUID().uuidString` writes it.
    package static func string() -> String {
        make().uuidString
    }
}
