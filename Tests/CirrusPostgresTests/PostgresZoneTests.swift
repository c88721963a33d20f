import CirrusPostgres
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Testing

/// `ZoneTests` of the storage conformance suite that need no records, against PostgreSQL
/// (the suite itself runs against it once the engine implements all of `RecordStorage`).
@Suite("PostgreSQL zones")
struct PostgresZoneTests {
    @Test func everyDatabaseHasTheDefaultZone() async throws {
        try await withPostgresStore { storage in
            let zones = try await storage.fetchAllZones(in: alice)
            #expect(zones.map(\.zoneID) == [zoneID("_defaultZone")])
            let fetched = try await storage.fetchZones([zoneID("_defaultZone")], in: alice)
            #expect(fetched.first?.value?.zoneID == zoneID("_defaultZone"))
        }
    }

    @Test func saveIsIdempotentAndReportsCapabilities() async throws {
        try await withPostgresStore { storage in
            let zone = Wire.RecordZone(zoneID: zoneID("Notes"))
            let first = try await storage.modifyZones(saving: [zone], deleting: [], in: alice)
            let second = try await storage.modifyZones(saving: [zone], deleting: [], in: alice)
            let saved = try #require(first.saves.first?.value)
            #expect(saved.zoneID == zoneID("Notes"))
            #expect(saved.capabilities?.fetchChanges == true)
            #expect(saved.capabilities?.atomic == true)
            #expect(saved.encryptionScope == .perRecord)
            #expect(second.saves.first?.value == saved)
            let all = try await storage.fetchAllZones(in: alice)
            #expect(all.map(\.zoneID?.zoneName) == ["_defaultZone", "Notes"])
        }
    }

    @Test func zonesListByteWiseAfterTheDefaultZone() async throws {
        try await withPostgresStore { storage in
            let names = ["b", "B", "a", "Ä", "_x"]
            _ = try await storage.modifyZones(saving: names.map { .init(zoneID: zoneID($0)) }, deleting: [], in: alice)
            let all = try await storage.fetchAllZones(in: alice)
            #expect(all.map(\.zoneID?.zoneName) == ["_defaultZone", "B", "_x", "a", "b", "Ä"])
        }
    }

    @Test func perZoneEncryptionIsKept() async throws {
        try await withPostgresStore { storage in
            let zone = Wire.RecordZone(zoneID: zoneID("Secret"), encryptionScope: .perZone)
            let saved = try await storage.modifyZones(saving: [zone], deleting: [], in: alice)
            #expect(saved.saves.first?.value?.encryptionScope == .perZone)
            #expect(try await storage.fetchZones([zoneID("Secret")], in: alice).first?.value?.encryptionScope == .perZone)
        }
    }

    @Test func fetchByIDReportsZoneNotFoundPerMissingZone() async throws {
        try await withPostgresStore { storage in
            _ = try await storage.modifyZones(saving: [.init(zoneID: zoneID("A"))], deleting: [], in: alice)
            let outcomes = try await storage.fetchZones([zoneID("A"), zoneID("Missing"), zoneID("A", in: bob)], in: alice)
            #expect(outcomes.count == 3)
            #expect(outcomes[0].value?.zoneID == zoneID("A"))
            #expect(outcomes[1].failure?.code == .zoneNotFound)
            #expect(outcomes[2].failure?.code == .zoneNotFound)  // another owner's zone ID
        }
    }

    @Test func aDeletedZoneIsGoneAndCanBeCreatedAgain() async throws {
        try await withPostgresStore { storage in
            _ = try await storage.modifyZones(saving: [.init(zoneID: zoneID("Trip"))], deleting: [], in: alice)
            let result = try await storage.modifyZones(saving: [], deleting: [zoneID("Trip")], in: alice)
            #expect(result.deletes == [ZoneDeletion(id: zoneID("Trip"))])
            #expect(try await storage.fetchZones([zoneID("Trip")], in: alice).first?.failure?.code == .zoneNotFound)
            #expect(try await storage.fetchAllZones(in: alice).count == 1)
            let again = try await storage.modifyZones(saving: [.init(zoneID: zoneID("Trip"))], deleting: [], in: alice)
            #expect(again.saves.first?.value?.zoneID == zoneID("Trip"))
            #expect(try await storage.fetchAllZones(in: alice).map(\.zoneID?.zoneName) == ["_defaultZone", "Trip"])
        }
    }

    @Test func deletingAnUnknownZoneFails() async throws {
        try await withPostgresStore { storage in
            let result = try await storage.modifyZones(saving: [], deleting: [zoneID("Nope")], in: alice)
            #expect(result.deletes.first?.failure?.code == .zoneNotFound)
        }
    }

    @Test func theDefaultZoneCannotBeDeleted() async throws {
        try await withPostgresStore { storage in
            let result = try await storage.modifyZones(saving: [], deleting: [zoneID("_defaultZone")], in: alice)
            #expect(result.deletes.first?.failure?.code == .invalidArguments)
            #expect(try await storage.fetchAllZones(in: alice).map(\.zoneID?.zoneName) == ["_defaultZone"])
        }
    }

    @Test func customZonesAreRefusedInThePublicDatabase() async throws {
        try await withPostgresStore { storage in
            let result = try await storage.modifyZones(
                saving: [Wire.RecordZone(zoneID: zoneID("Custom", in: publicDB))],
                deleting: [zoneID("Other", in: publicDB)], in: publicDB)
            #expect(result.saves.first?.failure?.code == .invalidArguments)
            #expect(result.deletes.first?.failure?.code == .invalidArguments)
            #expect(try await storage.fetchAllZones(in: publicDB).count == 1)
        }
    }

    @Test func aZoneOwnedBySomeoneElseIsNotFound() async throws {
        try await withPostgresStore { storage in
            let result = try await storage.modifyZones(
                saving: [Wire.RecordZone(zoneID: zoneID("Z", in: bob))], deleting: [zoneID("Z", in: bob)], in: alice)
            #expect(result.saves.first?.failure?.code == .zoneNotFound)
            #expect(result.deletes.first?.failure?.code == .zoneNotFound)
            #expect(try await storage.fetchAllZones(in: bob).count == 1)
        }
    }

    @Test func anUnspecifiedScopeIsNoDatabase() async throws {
        try await withPostgresStore { storage in
            let key = DatabaseKey(container: container, scope: .unspecified, owner: "_alice")
            await #expect(throws: StoreError(.badDatabase, "database scope unspecified is not a database")) {
                try await storage.fetchAllZones(in: key)
            }
        }
    }

    @Test func zoneNamesAreChecked() async throws {
        try await withPostgresStore { storage in
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
        try await withPostgresStore { storage in
            let zones = (0..<401).map { Wire.RecordZone(zoneID: zoneID("z\($0)")) }
            await #expect(throws: StoreError.self) { try await storage.modifyZones(saving: zones, deleting: [], in: alice) }
            let zoneIDs = zones.compactMap(\.zoneID)
            await #expect(throws: StoreError.self) { try await storage.fetchZones(zoneIDs, in: alice) }
            let zonesNow = try await storage.fetchAllZones(in: alice)
            #expect(zonesNow.count == 1)
        }
    }

    @Test func concurrentSavesOfOneZoneFromTwoNodesBothSucceedWithOneZone() async throws {
        let url = try newDatabase()
        let first = try await PostgresStorage(url: url, maximumConnections: 4)
        let second = try await PostgresStorage(url: url, maximumConnections: 4)
        let names = (0..<20).map { "Z\($0)" }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for storage in [first, second] {
                for name in names {
                    group.addTask {
                        let result = try await storage.modifyZones(saving: [.init(zoneID: zoneID(name))], deleting: [], in: alice)
                        #expect(result.saves.first?.value?.zoneID == zoneID(name))
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await first.fetchAllZones(in: alice).count == names.count + 1)
        // Twenty zones created, each once: the database change sequence counts twenty changes.
        let server = try TemporaryPostgres.shared()
        let seq = try server.psql("SELECT change_seq FROM databases", database: url.database)
        #expect(seq.trimmingCharacters(in: .whitespacesAndNewlines) == "\(names.count)")
        await first.close()
        await second.close()
    }
}
