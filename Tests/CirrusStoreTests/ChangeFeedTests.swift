import CirrusWire
import Testing

@testable import CirrusStore

@Suite("Change sequences and tombstones")
struct ChangeFeedTests {
    @Test func everySaveAndDeleteBumpsTheZoneSequence() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("Z")
            try await storage.saveAll([note("a", zone: "Z"), note("b", zone: "Z")])
            let start = try await storage.recordChanges(in: zoneID("Z"), of: alice, since: 0, limit: 100, desiredKeys: nil)
            #expect(start.changed.map(\.recordID?.recordName) == ["a", "b"])
            #expect(start.lastSeq == 2)
            #expect(!start.moreComing)

            var a = try #require(start.changed.first)
            a.fields = [field("v", .int64Value(1))]
            try await storage.saveAll([a])
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("b", zone: "Z")]), in: alice, by: "_alice")

            let next = try await storage.recordChanges(in: zoneID("Z"), of: alice, since: start.lastSeq, limit: 100, desiredKeys: ["v"])
            #expect(next.changed.map(\.recordID?.recordName) == ["a"])
            #expect(next.changed.first?.keys == ["v"])
            #expect(next.deleted == [RecordTombstone(recordID: recordID("b", zone: "Z"), recordType: "Note", seq: 4)])
            #expect(next.lastSeq == 4)

            let none = try await storage.recordChanges(in: zoneID("Z"), of: alice, since: 4, limit: 100, desiredKeys: nil)
            #expect(none.changed.isEmpty && none.deleted.isEmpty && none.lastSeq == 4)
        }
    }

    @Test func batchesPageInSequenceOrder() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll((0..<5).map { note("r\($0)") })
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("r1")]), in: alice, by: "_alice")
            var since: Int64 = 0
            var seen: [String] = []
            var batches = 0
            while true {
                let batch = try await storage.recordChanges(in: zoneID("_defaultZone"), of: alice, since: since, limit: 2, desiredKeys: [])
                seen += batch.changed.compactMap(\.recordID?.recordName) + batch.deleted.map { "-" + $0.recordID.recordName }
                since = batch.lastSeq
                batches += 1
                if !batch.moreComing { break }
            }
            #expect(seen == ["r0", "r2", "r3", "r4", "-r1"])
            #expect(batches == 3)
            #expect(since == 6)
        }
    }

    @Test func recreatedRecordsDropTheirTombstone() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("x")])
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("x")]), in: alice, by: "_alice")
            #expect(try await storage.count("tombstones") == 1)
            try await storage.saveAll([note("x")])
            #expect(try await storage.count("tombstones") == 0)
        }
    }

    @Test func prunedTombstonesExpireOlderSequences() async throws {
        try await withSyncStore(clock: SteppingClock().clock) { storage, _ in
            try await storage.saveAll([note("a"), note("b")])  // t = 0, seq 1, 2
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("a")]), in: alice, by: "_alice")  // t = 1, seq 3
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("b")]), in: alice, by: "_alice")  // t = 2, seq 4
            try await storage.pruneTombstones(deletedBefore: Wire.Timestamp(seconds: 1_700_000_002))
            #expect(try await storage.count("tombstones") == 1)
            let zone = zoneID("_defaultZone")
            await #expect(throws: StoreError.self) {
                try await storage.recordChanges(in: zone, of: alice, since: 2, limit: 10, desiredKeys: nil)
            }
            let fine = try await storage.recordChanges(in: zone, of: alice, since: 3, limit: 10, desiredKeys: nil)
            #expect(fine.deleted.map(\.recordID.recordName) == ["b"])
            let fromStart = try await storage.recordChanges(in: zone, of: alice, since: 0, limit: 10, desiredKeys: nil)
            #expect(fromStart.changed.isEmpty && fromStart.lastSeq == 4)
            // A sequence the zone never reached is expired too.
            await #expect(throws: StoreError.self) {
                try await storage.recordChanges(in: zone, of: alice, since: 99, limit: 10, desiredKeys: nil)
            }
        }
    }

    @Test func badRecordFeedPositionsAreRefusedWithTheirReason() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("Z")
            try await storage.saveAll([note("a", zone: "Z")])
            func code(
                zone: String = "Z", owner: DatabaseKey = alice, since: Int64 = 0, through: Int64? = nil, limit: Int = 10
            ) async -> StoreError.Code? {
                do {
                    _ = try await storage.recordChanges(
                        in: zoneID(zone, in: owner), of: alice, since: since, floor: 0, through: through, limit: limit,
                        desiredKeys: nil)
                    return nil
                } catch {
                    return (error as? StoreError)?.code
                }
            }
            #expect(await code(since: -1) == .invalidArguments)
            #expect(await code(limit: 0) == .invalidArguments)
            #expect(await code(since: 1, through: 0) == .invalidArguments)
            #expect(await code(zone: "Missing") == .zoneNotFound)
            #expect(await code(owner: bob) == .zoneNotFound)
            #expect(await code(since: 2) == .changeTokenExpired)
            #expect(await code(since: 1) == nil)
        }
    }

    @Test func theClientChangeTokenIsRememberedPerZoneWritten() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("Z")
            _ = try await storage.modifyRecords(
                RecordModification(saving: [note("a", zone: "Z")], clientChangeToken: [7, 7]), in: alice, by: "_alice")
            let z = try await storage.recordChanges(in: zoneID("Z"), of: alice, since: 0, limit: 10, desiredKeys: nil)
            let d = try await storage.recordChanges(in: zoneID("_defaultZone"), of: alice, since: 0, limit: 10, desiredKeys: nil)
            #expect(z.clientChangeToken == [7, 7])
            #expect(d.clientChangeToken == [])
        }
    }

    @Test func theDatabaseFeedReportsZoneChangesAndDeletions() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("A")
            try await storage.createZone("B")
            let first = try await storage.zoneChanges(in: alice, since: 0, limit: 10)
            #expect(first.changed == [zoneID("A"), zoneID("B")])
            #expect(first.lastSeq == 2)

            try await storage.saveAll([note("r", zone: "A")])
            _ = try await storage.modifyZones(saving: [], deleting: [zoneID("B")], in: alice)
            let second = try await storage.zoneChanges(in: alice, since: first.lastSeq, limit: 10)
            #expect(second.changed == [zoneID("A")])
            #expect(second.deleted == [zoneID("B")])
            #expect(second.lastSeq == 4)

            let paged = try await storage.zoneChanges(in: alice, since: 0, limit: 1)
            #expect(paged.moreComing)
            #expect(paged.changed == [zoneID("A")])
            #expect(paged.lastSeq == 3)

            // A deleted zone's incarnation differs from the recreated one.
            let old = try await storage.recordChanges(in: zoneID("A"), of: alice, since: 0, limit: 1, desiredKeys: nil).zoneIncarnation
            _ = try await storage.modifyZones(saving: [], deleting: [zoneID("A")], in: alice)
            try await storage.createZone("A")
            let new = try await storage.recordChanges(in: zoneID("A"), of: alice, since: 0, limit: 1, desiredKeys: nil).zoneIncarnation
            #expect(old != new)
            do {
                _ = try await storage.recordChanges(in: zoneID("B"), of: alice, since: 3, limit: 1, desiredKeys: nil)
                Issue.record("a deleted zone has no changes")
            } catch let error as StoreError {
                #expect(error.code == .zoneNotFound)
            }
        }
    }

    @Test func recordChangesMarkTheirZoneChangedInTheDatabaseFeed() async throws {
        try await withSyncStore { storage, _ in
            let empty = try await storage.zoneChanges(in: alice, since: 0, limit: 10)
            #expect(empty.changed.isEmpty && empty.lastSeq == 0)
            try await storage.saveAll([note("n")])
            let batch = try await storage.zoneChanges(in: alice, since: 0, limit: 10)
            #expect(batch.changed == [zoneID("_defaultZone")])
            #expect(batch.lastSeq == 1)
            await #expect(throws: StoreError.self) { try await storage.zoneChanges(in: alice, since: 5, limit: 10) }
        }
    }
}

@Suite("Change feeds with records as stored")
struct StoredRecordChangeFeedTests {
    @Test func plainRecordsStaySerializedAndRecordsWithAssetsComeDecodedWithTheirContent() async throws {
        try await withAssetStore { storage, engine in
            try await storage.createZone("Z")
            let content: [UInt8] = Array("stored content".utf8)
            let asset = Wire.Asset(
                sha256: Wire.SHA256.hash(content), size: UInt64(content.count), fileName: "a.txt",
                content: .inlineData(content))
            let reference = Wire.Reference(recordID: recordID("plain", zone: "Z"), action: .none)
            try await storage.saveAll([
                note("plain", zone: "Z"),
                note("linked", zone: "Z", [field("to", .referenceValue(reference))]),
                note("file", zone: "Z", [field("f", .assetValue(asset))]),
                note("files", zone: "Z", [field("fs", .assetList(Wire.AssetList(values: [asset])))]),
            ])
            let decoded = try await storage.recordChanges(
                in: zoneID("Z"), of: alice, since: 0, limit: 100, desiredKeys: nil)
            let stored = try await storage.storedRecordChanges(
                in: zoneID("Z"), of: alice, since: 0, floor: 0, through: nil, limit: 100)
            // The same batch either way, record for record.
            #expect(try stored.changed.map { try $0.decoded() } == decoded.changed)
            #expect(stored.mapChanged { _ in 0 } == decoded.mapChanged { _ in 0 })
            #expect(decoded.changed[2].value("f") == .assetValue(asset))
            let forms = stored.changed.map { record -> String in
                switch record {
                case .serialized: "serialized"
                case .decoded: "decoded"
                }
            }
            if engine.name == "SQLite" {
                #expect(forms == ["serialized", "serialized", "decoded", "decoded"])
            } else {
                #expect(forms == ["decoded", "decoded", "decoded", "decoded"])
            }
        }
    }

    @Test func storedBytesThatDoNotDecodeAreCorruptData() {
        guard let serialized = Wire.SerializedRecord(plain: Wire.Record(recordID: recordID("a")).serializedBytes())
        else {
            Issue.record("a record with an ID in a zone is plain")
            return
        }
        #expect(throws: Never.self) { try StoredRecord.serialized(serialized).decoded() }
        // A `Record` whose record type (field 2, a string) is a varint: the walk copies the fields
        // it does not enter as they are, the decoder refuses it.
        guard let broken = Wire.SerializedRecord(plain: serialized.bytes + [0x10, 0x01]) else {
            Issue.record("the walk checks only the fields it enters")
            return
        }
        #expect { try StoredRecord.serialized(broken).decoded() } throws: { ($0 as? StoreError)?.code == .corruptData }
    }
}
