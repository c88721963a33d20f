internal import COpenSSL
import Foundation
import Synchronization

/// Random (version 4) UUIDs made from OpenSSL's generator (`RAND_bytes`, seeded by the system
/// and reseeded by OpenSSL), read 128 UUIDs at a time.
///
/// Foundation's `UUID()` on Linux opens, reads and closes `/dev/urandom` for every UUID (three
/// system calls, about 2.8 µs here); the system generator is `getrandom(2)`, about 0.85 µs for
/// the two calls of one UUID. Every `CKOperation` names itself with one, and a profile of
/// `cirrus bench --op fetch --concurrency 64` spent 4.7 % of the client's CPU opening
/// `/dev/urandom`; with `getrandom` per UUID and `uuidString`'s formatting, single saves still
/// spent 2.4 % there (two `getrandom` calls and a formatted string per UUID). A UUID's string
/// is written directly.
///
/// For example:
/// ```swift
/// let operationID = RandomUUID.string()   // "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"
/// ```
package enum RandomUUID {
    /// Random words read ahead, two per UUID, and how many are still unused.
    private struct Pool {
        /// 2 KiB: `RAND_bytes` costs about 1.5 µs a call here whatever it reads up to a few
        /// KiB (1.54 µs for 256 bytes, 2.05 µs for 2,048), and with 16 UUIDs a call it was
        /// 1.3 % of a client's CPU under single saves.
        static let size = 256
        var words = [UInt64](repeating: 0, count: Pool.size)
        var left = 0

        mutating func next() -> (UInt64, UInt64) {
            if left < 2 {
                let filled = words.withUnsafeMutableBytes { RAND_bytes($0.baseAddress, Int32($0.count)) }
                if filled != 1 {
                    // OpenSSL could not seed itself: the system generator, a call per word.
                    var generator = SystemRandomNumberGenerator()
                    for index in words.indices {
                        words[index] = generator.next()
                    }
                }
                left = words.count
            }
            left -= 2
            // Each word is used once: a UUID takes the two it gets out of the pool.
            defer { (words[left], words[left + 1]) = (0, 0) }
            return (words[left], words[left + 1])
        }
    }

    private static let pool = Mutex(Pool())

    /// A new random UUID.
    package static func make() -> UUID {
        let (high, low) = Self.words()
        return withUnsafeBytes(of: (high, low)) { b in
            UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
        }
    }

    /// A new random UUID's string, upper-case as `UUID().uuidString` writes it.
    package static func string() -> String {
        let (high, low) = Self.words()
        return withUnsafeBytes(of: (high, low)) { bytes in
            String(unsafeUninitializedCapacity: 36) { buffer in
                let digits: StaticString = "0123456789ABCDEF"
                var out = 0
                for (index, byte) in bytes.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        buffer[out] = UInt8(ascii: "-")
                        out += 1
                    }
                    buffer[out] = digits.utf8Start[Int(byte >> 4)]
                    buffer[out + 1] = digits.utf8Start[Int(byte & 0x0F)]
                    out += 2
                }
                return out
            }
        }
    }

    /// Bytes 0–7 and 8–15 of a new UUID, big-endian: the version (4) is the high nibble of
    /// byte 6, the variant (binary 10) the two high bits of byte 8.
    private static func words() -> (UInt64, UInt64) {
        cirrus_openssl_prepare()
        let (first, second) = Self.pool.withLock { $0.next() }
        let high = ((first & ~0xF000) | 0x4000).bigEndian
        let low = ((second & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000).bigEndian
        return (high, low)
    }
}
