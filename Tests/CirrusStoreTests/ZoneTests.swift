import CirrusWire
import Testing

@testable import CirrusStore

@Suite("Zones")
struct ZoneTests {
    @Test func everyDatabaseHasTheDefaultZone() async throws {
        try await withSyncStore { storage, _ in
            let zones = try await storage.fetchAllZones(in: alice)
            #expect(zones.map(\.zoneID) == [zoneID("_defaultZone")])
            let fetched = try await storage.fetchZones([zoneID("_defaultZone")], in: alice)
            #expect(fetched.first?.zone?.zoneID == zoneID("_defaultZone"))
        }
    }

    @Test func saveIsIdempotentAndReportsCapabilities() async throws {
        try await withSyncStore { storage, _ in
            let zone = Wire.RecordZone(zoneID: zoneID("Notes"))
            let first = try await storage.modifyZones(saving: [zone], deleting: [], in: alice)
            let second = try await storage.modifyZones(saving: [zone], deleting: [], in: alice)
            let saved = try #require(first.saves.first?.zone)
            #expect(saved.zoneID == zoneID("Notes"))
            #expect(saved.capabilities?.fetchChanges == true)
            #expect(saved.capabilities?.atomic == true)
            #expect(saved.encryptionScope == .perRecord)
            #expect(second.saves.first?.zone == saved)
            let all = try await storage.fetchAllZones(in: alice)
            #expect(all.map(\.zoneID?.zoneName) == ["_defaultZone", "Notes"])
        }
    }

    @Test func fetchByIDReportsZoneNotFoundPerMissingZone() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("A")
            let outcomes = try await storage.fetchZones([zoneID("A"), zoneID("Missing"), zoneID("A", in: bob)], in: alice)
            #expect(outcomes.count == 3)
            #expect(outcomes[0].zone?.zoneID == zoneID("A"))
            #expect(outcomes[1].failure?.code == .zoneNotFound)
            #expect(outcomes[2].failure?.code == .zoneNotFound)  // another owner's zone ID
        }
    }

    /// SQLite reads a fetch of up to 16 zones in place and a larger one on a reader's queue:
    /// both give the same outcomes, in request order.
    @Test func smallAndLargeZoneFetchesAgree() async throws {
        try await withSyncStore { storage, engine in
            let names = (0..<19).map { "Z\($0)" }
            _ = try await storage.modifyZones(saving: names.map { Wire.RecordZone(zoneID: zoneID($0)) }, deleting: [], in: alice)
            let ids = names.map { zoneID($0) } + [zoneID("Missing")]
            for count in [1, 16, 17, 20] {
                let asked = Array(ids.suffix(count))
                let outcomes = try await storage.fetchZones(asked, in: alice)
                #expect(outcomes.map(\.id) == asked, "\(engine), \(count) zones")
                #expect(outcomes.dropLast().allSatisfy { $0.zone?.zoneID == $0.id })
                #expect(outcomes.last?.failure?.code == .zoneNotFound)
            }
        }
    }

    @Test func deletingAZoneDeletesItsRecords() async throws {
        try await withSyncStore { storage, _ in
            try await storage.createZone("Trip")
            try await storage.saveAll([note("a", zone: "Trip"), note("b", zone: "Trip"), note("c")])
            #expect(try await storage.count("records") == 3)
            let result = try await storage.modifyZones(saving: [], deleting: [zoneID("Trip")], in: alice)
            #expect(result.deletes == [ZoneDeletion(id: zoneID("Trip"))])
            #expect(try await storage.count("records") == 1)
            #expect(try await storage.count("record_values") == 0)
            let fetched = try await storage.fetch(recordID("a", zone: "Trip"))
            #expect(fetched.failure?.code == .zoneNotFound)
            #expect(try await storage.fetch(recordID("c")).record != nil)

            // Created again, it is a new, empty zone.
            try await storage.createZone("Trip")
            #expect(try await storage.fetch(recordID("a", zone: "Trip")).failure?.code == .unknownItem)
        }
    }

    @Test func deletingAnUnknownZoneFails() async throws {
        try await withSyncStore { storage, _ in
            let result = try await storage.modifyZones(saving: [], deleting: [zoneID("Nope")], in: alice)
            #expect(result.deletes.first?.failure?.code == .zoneNotFound)
        }
    }

    @Test func theDefaultZoneCannotBeDeleted() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("keep")])
            let result = try await storage.modifyZones(saving: [], deleting: [zoneID("_defaultZone")], in: alice)
            #expect(result.deletes.first?.failure?.code == .invalidArguments)
            #expect(try await storage.fetch(recordID("keep")).record != nil)
        }
    }

    @Test func customZonesAreRefusedInThePublicDatabase() async throws {
        try await withSyncStore { storage, _ in
            let result = try await storage.modifyZones(
                saving: [Wire.RecordZone(zoneID: zoneID("Custom", in: publicDB))],
                deleting: [zoneID("Other", in: publicDB)], in: publicDB)
            #expect(result.saves.first?.failure?.code == .invalidArguments)
            #expect(result.deletes.first?.failure?.code == .invalidArguments)
            #expect(try await storage.fetchAllZones(in: publicDB).count == 1)
        }
    }

    @Test func aZoneOwnedBySomeoneElseIsNotFound() async throws {
        try await withSyncStore { storage, _ in
            let result = try await storage.modifyZones(
                saving: [Wire.RecordZone(zoneID: zoneID("Z", in: bob))], deleting: [zoneID("Z", in: bob)], in: alice)
            #expect(result.saves.first?.failure?.code == .zoneNotFound)
            #expect(result.deletes.first?.failure?.code == .zoneNotFound)
            #expect(try await storage.fetchAllZones(in: bob).count == 1)
        }
    }

    @Test func anUnspecifiedScopeIsNoDatabase() async throws {
        try await withSyncStore { storage, _ in
            let key = DatabaseKey(container: container, scope: .unspecified, owner: "_alice")
            await #expect(throws: StoreError(.badDatabase, "database scope unspecified is not a database")) {
                try await storage.fetchAllZones(in: key)
            }
        }
    }

    @Test func zoneNamesAreChecked() async throws {
        try await withSyncStore { storage, _ in
            let result = try await storage.modifyZones(
                saving: [
                    Wire.RecordZone(zoneID: zoneID("")), Wire.RecordZone(zoneID: zoneID(String(repeating: "z", count: 256))),
                    Wire.RecordZone(zoneID: zoneID("Reisen ✈︎")), Wire.RecordZone(),
                ],
                deleting: [], in: alice)
            #expect(result.saves.map { $0.failure?.code } == [.invalidArguments, .invalidArguments, nil, .invalidArguments])
        }
    }

    @Test func tooManyZonesInOneRequestWriteNothing() async throws {
        try await withSyncStore { storage, _ in
            let zones = (0..<401).map { Wire.RecordZone(zoneID: zoneID("z\($0)")) }
            await #expect(throws: StoreError.self) { try await storage.modifyZones(saving: zones, deleting: [], in: alice) }
            await #expect(throws: StoreError.self) {
                try await storage.fetchRecords((0..<401).map { recordID("r\($0)") }, desiredKeys: nil, in: alice)
            }
            let zonesNow = try await storage.fetchAllZones(in: alice)
            #expect(zonesNow.count == 1)
        }
    }
}
