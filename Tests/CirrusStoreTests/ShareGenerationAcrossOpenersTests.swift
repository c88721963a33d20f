import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

/// The shares generation lives in the database (schema v13): a store sees the changes of a
/// share another store on the same file made (another process, `cirrusd` maintenance
/// commands), so an access policy cached by it is never kept past a revocation made elsewhere.
@Suite("Shares: the generation is the database's, not the process's")
struct ShareGenerationAcrossOpenersTests {
    @Test func aSecondStoreOnTheSameFileMovesTheFirstOnesGeneration() async throws {
        try await withSQLiteStore { storage, directory in
            let token = try await storage.zoneShared(with: ["_bob"])

            let second = try SQLiteStorage(directory: directory)
            defer { try? second.close() }
            var generation = try #require(storage.sharesGeneration)
            #expect(second.sharesGeneration == generation, "one generation, read from the file by both")
            func moved() throws -> Bool {
                let now = try #require(storage.sharesGeneration)
                defer { generation = now }
                return now != generation
            }

            #expect(try await second.acceptShare(withToken: token, in: container, by: "_bob") != nil)
            #expect(try moved(), "a participant accepting through the second store")
            #expect(try await storage.acceptedShares(of: "_bob", in: container).count == 1)
            try await second.saveAll([note("day", zone: "Trip")])
            #expect(try !moved(), "a record saved through the second store")
            #expect(try await second.leaveShare(ShareRules.zoneShareName, inZone: "Trip", of: "_alice", in: container, by: "_bob"))
            #expect(try moved(), "a participant leaving through the second store")
            #expect(try await storage.acceptedShares(of: "_bob", in: container).isEmpty)
            _ = try await second.modifyZones(saving: [], deleting: [zoneID("Trip")], in: alice)
            #expect(try moved(), "the zone deleted with its share through the second store")
            #expect(second.sharesGeneration == storage.sharesGeneration)
        }
    }

    @Test func theGenerationOutlivesTheStoreThatMovedIt() async throws {
        try await withSQLiteStore { storage, directory in
            _ = try await storage.createUser("_alice", at: Wire.Timestamp(seconds: 1))
            try await storage.createZone("Trip")
            let before = try #require(storage.sharesGeneration)
            try await storage.saveAll([
                Wire.Record(
                    recordID: recordID(ShareRules.zoneShareName, zone: "Trip"), recordType: "cloudkit.share",
                    shareFields: Wire.ShareFields())
            ])
            let after = try #require(storage.sharesGeneration)
            #expect(after != before)
            let reopened = try SQLiteStorage(directory: directory)
            defer { try? reopened.close() }
            #expect(reopened.sharesGeneration == after, "a new opener does not start over (and match a stale cache)")
        }
    }
}
