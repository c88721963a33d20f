import CirrusWire
import Testing

@testable import CirrusStore

@Suite("deleteSelf references")
struct CascadeTests {
    @Test func aChainCascades() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("Z")
            try await storage.saveAll([
                note("a", zone: "Z"),
                note("b", zone: "Z", [field("up", reference(recordID("a", zone: "Z")))]),
                note("c", zone: "Z", [field("up", reference(recordID("b", zone: "Z")))]),
                note("weak", zone: "Z", [field("up", reference(recordID("a", zone: "Z"), deleteSelf: false))]),
                note("listed", zone: "Z", [field("ups", .referenceList(Wire.ReferenceList(values: [
                    Wire.Reference(recordID: recordID("c", zone: "Z"), action: .deleteSelf),
                ])))]),
            ])
            let result = try await storage.modifyRecords(RecordModification(deleting: [recordID("a", zone: "Z")]), in: alice, by: "_alice")
            #expect(result.deletes.first?.failure == nil)
            #expect(result.cascadedDeletions == [recordID("b", zone: "Z"), recordID("c", zone: "Z"), recordID("listed", zone: "Z")])
            #expect(try await storage.fetch(recordID("weak", zone: "Z")).record != nil)
            for name in ["a", "b", "c", "listed"] {
                #expect(try await storage.fetch(recordID(name, zone: "Z")).failure?.code == .unknownItem)
            }
            let changes = try await storage.recordChanges(in: zoneID("Z"), of: alice, since: 5, limit: 10, desiredKeys: nil)
            #expect(changes.deleted.map(\.recordID.recordName) == ["a", "b", "c", "listed"])
            #expect(try await storage.count("cascade_references") == 0)
        }
    }

    @Test func aCycleCascadesOnce() async throws {
        try await withSyncStore { storage, _ in
            // x → y → z → x, all deleteSelf; saved with changedKeys so the cycle can be closed.
            try await storage.saveAll([
                note("x"),
                note("y", [field("r", reference(recordID("x")))]),
                note("z", [field("r", reference(recordID("y")))]),
            ])
            var closing = note("x", [field("r", reference(recordID("z")))])
            closing.changedKeys = ["r"]
            _ = try await storage.modifyRecords(RecordModification(saving: [closing], savePolicy: .changedKeys), in: alice, by: "_alice")

            let result = try await storage.modifyRecords(RecordModification(deleting: [recordID("y")]), in: alice, by: "_alice")
            #expect(result.deletes.first?.failure == nil)
            #expect(result.cascadedDeletions == [recordID("z"), recordID("x")])
            #expect(try await storage.count("records") == 0)
            #expect(try await storage.count("tombstones") == 3)
        }
    }

    @Test func aSelfReferenceDoesNotLoop() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("me", [field("r", reference(recordID("me")))])])
            let result = try await storage.modifyRecords(RecordModification(deleting: [recordID("me")]), in: alice, by: "_alice")
            #expect(result.cascadedDeletions.isEmpty)
            #expect(try await storage.count("records") == 0)
        }
    }

    @Test func cascadesStayInsideTheDatabase() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("t")])
            // Bob's own "t", which his "s" cascades from: alice's "t" has the same name.
            try await storage.saveAll(
                [note("t", in: bob), note("s", in: bob, [field("r", reference(recordID("t", in: bob)))])], in: bob, by: "_bob")
            let result = try await storage.modifyRecords(RecordModification(deleting: [recordID("t")]), in: alice, by: "_alice")
            #expect(result.cascadedDeletions.isEmpty)
            #expect(try await storage.fetch(recordID("s", in: bob), in: bob).record != nil)
        }
    }

    @Test func aRecordSavedAgainKeepsOnlyItsNewReferences() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([
                note("a"), note("b"),
                note("holder", [field("r", reference(recordID("a"))), field("again", reference(recordID("a")))]),
            ])
            #expect(try await storage.count("cascade_references") >= 1)
            // Saved again pointing at b instead (allKeys: the old field is gone).
            _ = try await storage.modifyRecords(
                RecordModification(saving: [note("holder", [field("r", reference(recordID("b")))])], savePolicy: .allKeys),
                in: alice, by: "_alice")
            let first = try await storage.modifyRecords(RecordModification(deleting: [recordID("a")]), in: alice, by: "_alice")
            #expect(first.cascadedDeletions.isEmpty)
            #expect(try await storage.fetch(recordID("holder")).record != nil)
            let second = try await storage.modifyRecords(RecordModification(deleting: [recordID("b")]), in: alice, by: "_alice")
            #expect(second.cascadedDeletions == [recordID("holder")])
            #expect(try await storage.count("cascade_references") == 0)
        }
    }

    @Test func deletingAZoneDropsItsReferences() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("Z")
            try await storage.saveAll([
                note("a", zone: "Z"), note("b", zone: "Z", [field("r", reference(recordID("a", zone: "Z")))]),
            ])
            #expect(try await storage.count("cascade_references") == 1)
            let result = try await storage.modifyZones(saving: [], deleting: [zoneID("Z")], in: alice)
            #expect(result.deletes.first?.failure == nil)
            #expect(try await storage.count("cascade_references") == 0)
        }
    }
}
