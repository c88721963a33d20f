import CirrusPostgres
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Testing

/// Zones on PostgreSQL beyond the storage conformance suite's `ZoneTests` (which run against
/// this engine in `CirrusStoreTests`): byte-wise order, kept encryption scopes, zones created
/// again, and several nodes at once.
@Suite("PostgreSQL zones")
struct PostgresZoneTests {
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
