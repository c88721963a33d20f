import CirrusStore
import CirrusWire
import Foundation
import Testing

@testable import CirrusServer

@Suite("Change tokens")
struct ChangeTokenSealerTests {
    let sealer = ChangeTokenSealer(secret: Array("a secret of the test, not a real one".utf8))
    let alice = DatabaseKey.private(container: "c", user: "_alice")
    let bob = DatabaseKey.private(container: "c", user: "_bob")

    @Test func aTokenOpensToItsPositionForItsOwnFeedOnly() throws {
        let token = sealer.seal(.zone("Notes"), in: alice, incarnation: 7, seq: 42, floor: 3)
        #expect(token.opaque.count == 42)
        #expect(try sealer.open(token, .zone("Notes"), in: alice) == .init(incarnation: 7, seq: 42, floor: 3))
        #expect(throws: ChangeTokenSealer.Refusal.self) { try sealer.open(token, .zone("Other"), in: alice) }
        #expect(throws: ChangeTokenSealer.Refusal.self) { try sealer.open(token, .zone("Notes"), in: bob) }
        #expect(throws: ChangeTokenSealer.Refusal.self) {
            try sealer.open(token, .zone("Notes"), in: .private(container: "other", user: "_alice"))
        }
        #expect(throws: ChangeTokenSealer.Refusal.self) { try sealer.open(token, .database, in: alice) }
        let otherServer = ChangeTokenSealer(secret: Array("another server".utf8))
        #expect(throws: ChangeTokenSealer.Refusal.self) { try otherServer.open(token, .zone("Notes"), in: alice) }
    }

    @Test func everyFlippedBitAndEveryTruncationIsRefused() throws {
        let token = sealer.seal(.database, in: alice, incarnation: 0, seq: 5, floor: 0)
        for index in token.opaque.indices {
            for bit in 0..<8 {
                var bytes = token.opaque
                bytes[index] ^= UInt8(1 << bit)
                #expect(throws: ChangeTokenSealer.Refusal.self) {
                    try sealer.open(Wire.ServerChangeToken(opaque: bytes), .database, in: alice)
                }
            }
            let cut = Wire.ServerChangeToken(opaque: Array(token.opaque.prefix(index)))
            #expect(throws: ChangeTokenSealer.Refusal.self) { try sealer.open(cut, .database, in: alice) }
        }
        #expect(try sealer.open(token, .database, in: alice).seq == 5)
    }

    @Test func hmacMatchesRFC4231() {
        // RFC 4231 test case 2.
        let mac = Wire.SHA256.hmac(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        let hex = mac.map { String(format: "%02x", $0) }.joined()
        #expect(hex == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }
}
