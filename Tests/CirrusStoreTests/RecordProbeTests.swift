import CirrusWire
import Testing

@testable import CirrusStore
import CirrusTestSupport

/// The stored rows of many names read in IN-list probes of a few fixed sizes, the places left
/// over NULL (``StoreRows/records(_:zoneID:names:)``): every count of names, across sizes and
/// chunks, finds exactly the rows one lookup per name finds.
@Suite("Record rows probed by name")
struct RecordProbeTests {
    @Test func everyCountOfNamesFindsWhatLookupsOneByOneFind() async throws {
        try await withSQLiteStore { storage, _ in
            let stored = 1_200
            for start in stride(from: 0, to: stored, by: 400) {
                try await storage.saveAll((start..<start + 400).map { note("r\($0)", [field("n", .int64Value(Int64($0)))]) })
            }
            let zone = try await storage.read { db in try #require(try StoreRows.liveZone(db, 1, "_defaultZone")).id }
            // Counts at, below and past each size and the largest chunk (512), several chunks.
            let counts = [0, 1, 2, 3, 4, 5, 9, 16, 17, 63, 130, 255, 256, 257, 511, 512, 513, 1_025, 1_600]
            for count in counts {
                // Stored names, missing ones ("m…"), one named twice, in no order.
                var named = (0..<count).map { $0 % 3 == 2 ? "m\($0)" : "r\(($0 * 7) % stored)" }
                if count > 3 { named[count - 1] = named[0] }
                let names = named
                let (probed, oneByOne) = try await storage.read { db in
                    let probed = try StoreRows.records(db, zoneID: zone, names: names)
                    var oneByOne: [String: RecordRow] = [:]
                    for name in names {
                        if let row = try StoreRows.record(db, zoneID: zone, name: name) { oneByOne[name] = row }
                    }
                    return (probed, oneByOne)
                }
                #expect(probed.keys.sorted() == oneByOne.keys.sorted(), "\(count) names")
                for (name, row) in oneByOne {
                    #expect(probed[name]?.id == row.id, "\(count) names: \(name)")
                    #expect(probed[name]?.changeTag == row.changeTag, "\(count) names: \(name)")
                    #expect(probed[name]?.data == row.data, "\(count) names: \(name)")
                }
                if count >= 3 { #expect(!probed.isEmpty) }
            }
        }
    }

    /// Requests of many sizes leave at most one cached probe per size in the connection.
    @Test func theProbeSizesAreFew() {
        #expect(StoreRows.probeSizes == StoreRows.probeSizes.sorted())
        #expect(StoreRows.probeSizes.count <= 10)
        #expect(StoreRows.probeSizes.last == 512)
    }
}
