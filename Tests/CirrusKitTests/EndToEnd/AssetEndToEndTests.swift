import CirrusKit
import CirrusModel
import CirrusTestSupport
import Foundation
import Testing

@Suite("Assets end to end")
struct AssetEndToEndTests {
    /// A CKAsset's file goes up with its record and comes back as a file with the same bytes.
    @Test func assetRoundTripsThroughTheServer() async throws {
        let source = TemporaryFiles.url(for: "asset.bin")
        let bytes = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try bytes.write(to: source)
        defer { try? FileManager.default.removeItem(at: source) }
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let photo = CKRecord(recordType: "Photo", recordID: CKRecord.ID(recordName: "p1"))
            photo["image"] = CKAsset(fileURL: source)
            _ = try await database.save(photo)

            let fetched = try await database.record(for: photo.recordID)
            let asset = try #require(fetched["image"] as? CKAsset)
            let url = try #require(asset.fileURL)
            #expect(url != source)
            #expect(try Data(contentsOf: url) == bytes)
        }
    }
}
