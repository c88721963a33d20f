import CirrusWire
import Foundation
import Testing

@Suite("Random UUIDs")
struct RandomUUIDTests {
    @Test func theyAreVersion4VariantRFC4122AndReadBackAsUUIDs() throws {
        for _ in 0..<1_000 {
            let uuid = RandomUUID.make()
            let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 4, "version nibble of \(uuid)")
            #expect(bytes[8] >> 6 == 0b10, "variant bits of \(uuid)")
            let string = RandomUUID.string()
            #expect(string == string.uppercased())
            #expect(try #require(UUID(uuidString: string)).uuidString == string)
        }
    }

    @Test func stringsAreWrittenAsFoundationWritesThemAndDiffer() throws {
        let strings = (0..<10_000).map { _ in RandomUUID.string() }
        #expect(Set(strings).count == strings.count)
        for string in strings.prefix(1_000) {
            let uuid = try #require(UUID(uuidString: string))
            #expect(uuid.uuidString == string)
            let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 4, "version nibble of \(string)")
            #expect(bytes[8] >> 6 == 0b10, "variant bits of \(string)")
        }
    }

    @Test func theyDifferAndUseEveryRandomBit() {
        let uuids = (0..<10_000).map { _ in RandomUUID.make() }
        #expect(Set(uuids).count == uuids.count)
        // Every one of the 122 random bits is set in some UUID and clear in another.
        var ones = [UInt8](repeating: 0, count: 16)
        var zeros = [UInt8](repeating: 0, count: 16)
        for uuid in uuids {
            withUnsafeBytes(of: uuid.uuid) { bytes in
                for index in 0..<16 {
                    ones[index] |= bytes[index]
                    zeros[index] |= ~bytes[index]
                }
            }
        }
        var fixedOnes = [UInt8](repeating: 0, count: 16)
        var fixedZeros = [UInt8](repeating: 0, count: 16)
        fixedOnes[6] = 0x40
        fixedZeros[6] = 0xB0
        fixedOnes[8] = 0x80
        fixedZeros[8] = 0x40
        for index in 0..<16 {
            #expect(ones[index] & ~fixedZeros[index] == 0xFF & ~fixedZeros[index], "byte \(index): bits never set")
            #expect(zeros[index] & ~fixedOnes[index] == 0xFF & ~fixedOnes[index], "byte \(index): bits never clear")
        }
    }
}
