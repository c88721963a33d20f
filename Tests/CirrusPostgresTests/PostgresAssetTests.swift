import CirrusPostgres
import CirrusStore
import CirrusWire
import Testing

/// Asset contents on PostgreSQL when two nodes save and drop them at once.
@Suite("PostgreSQL assets across nodes")
struct PostgresAssetTests {
    private func note(_ name: String, _ asset: Wire.Asset) -> Wire.Record {
        Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: zoneID("_defaultZone")), recordType: "Note",
            fields: [Wire.RecordField(key: "f", value: Wire.FieldValue(kind: .assetValue(asset)))])
    }

    /// A save naming known content by its checksum on one node while the other drops the
    /// contents no record refers to: each round ends with the saved record and its content,
    /// or with the save refused (`assetFileNotFound`) and the content gone, never a record
    /// naming content the server forgot.
    @Test func aSaveAndADropOfItsContentNeverLeaveARecordWithoutItsContent() async throws {
        let url = try newDatabase()
        try await withPostgresStore(url) { nodeA in
            try await withPostgresStore(url) { nodeB in
                var outcomes: [Bool] = []
                for round in 0..<30 {
                    let content = Array("round \(round)".utf8)
                    let digest = Wire.SHA256.hash(content)
                    let inline = Wire.Asset(sha256: digest, size: UInt64(content.count), content: .inlineData(content))
                    let byChecksum = Wire.Asset(sha256: digest, size: UInt64(content.count))
                    // Known and unreferenced: saved with its content, then deleted.
                    let seed = Wire.RecordID(recordName: "seed\(round)", zoneID: zoneID("_defaultZone"))
                    #expect(
                        !(try await nodeA.modifyRecords(RecordModification(saving: [note("seed\(round)", inline)]), in: alice, by: "_alice"))
                            .hasFailures)
                    _ = try await nodeA.modifyRecords(RecordModification(deleting: [seed]), in: alice, by: "_alice")

                    async let save = nodeA.modifyRecords(
                        RecordModification(saving: [note("r\(round)", byChecksum)]), in: alice, by: "_alice")
                    async let drop: Bool =
                        round.isMultiple(of: 2)
                        ? nodeB.pruneUnreferencedAssets() > 0 : nodeB.dropAssetIfUnreferenced(digest)
                    let (saved, _) = try await (save, drop)
                    let referenced = try await nodeB.assetIsReferenced(digest)
                    let id = Wire.RecordID(recordName: "r\(round)", zoneID: zoneID("_defaultZone"))
                    let fetched = try await nodeB.fetchRecords([id], desiredKeys: nil, in: alice).first?.value
                    if saved.saves.first?.value != nil {
                        #expect(referenced, "round \(round)")
                        #expect(fetched?.fields.first?.value == Wire.FieldValue(kind: .assetValue(inline)), "round \(round)")
                        outcomes.append(true)
                    } else {
                        #expect(saved.saves.first?.failure?.code == .assetFileNotFound, "round \(round)")
                        #expect(!referenced, "round \(round)")
                        #expect(fetched == nil, "round \(round)")
                        outcomes.append(false)
                    }
                }
                #expect(outcomes.count == 30)
            }
        }
    }
}
