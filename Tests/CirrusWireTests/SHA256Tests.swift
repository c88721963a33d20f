import CirrusWire
import Foundation
import Testing

@Suite("SHA-256 and HMAC-SHA-256")
struct SHA256Tests {
    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    @Test("FIPS 180-4 examples and the empty message", arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
    ])
    func digests(message: String, expected: String) {
        #expect(hex(Wire.SHA256.hash(Array(message.utf8))) == expected)
        var hasher = Wire.SHA256()
        hasher.update(Array(message.utf8))
        #expect(hex(hasher.finalize()) == expected)
    }

    @Test("A million 'a's fed in uneven pieces, and a sequence that is not contiguous")
    func incremental() {
        var hasher = Wire.SHA256()
        var left = 1_000_000
        var piece = 1
        while left > 0 {
            let count = min(piece, left)
            hasher.update([UInt8](repeating: UInt8(ascii: "a"), count: count))
            left -= count
            piece = piece * 3 + 1
        }
        #expect(hex(hasher.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        // A lazily mapped sequence has no contiguous storage.
        #expect(hex(Wire.SHA256.hash("abc".utf8.lazy.map { $0 })) == hex(Wire.SHA256.hash(Array("abc".utf8))))
    }

    @Test("A copied hasher goes on independently, and finalize starts over")
    func valueSemantics() {
        var first = Wire.SHA256()
        first.update(Array("ab".utf8))
        var second = first
        second.update(Array("c".utf8))
        first.update(Array("x".utf8))
        #expect(hex(second.finalize()) == hex(Wire.SHA256.hash(Array("abc".utf8))))
        #expect(hex(first.finalize()) == hex(Wire.SHA256.hash(Array("abx".utf8))))
        first.update(Array("abc".utf8))
        #expect(hex(first.finalize()) == hex(Wire.SHA256.hash(Array("abc".utf8))))
    }

    @Test("RFC 4231 test cases 1–4, 6 and 7, and an empty key and message", arguments: [
        ([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8),
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        (Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        ([UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        (Array(1...25), [UInt8](repeating: 0xcd, count: 50),
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        ([UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        ([UInt8](repeating: 0xaa, count: 131),
         Array(("This is a test using a larger than block-size key and a larger than block-size data. "
            + "The key needs to be hashed before being used by the HMAC algorithm.").utf8),
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
        ([], [], "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"),
    ] as [([UInt8], [UInt8], String)])
    func hmac(key: [UInt8], message: [UInt8], expected: String) {
        #expect(hex(Wire.SHA256.hmac(key: key, message: message)) == expected)
    }
}
