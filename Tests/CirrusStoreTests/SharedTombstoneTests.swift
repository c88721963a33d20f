import CirrusWire
import Foundation
import GRDB
import Testing

@testable import CirrusStore

/// Tombstones know which shares their record was in when it was deleted (its parent chain is
/// gone afterwards), so a participant's change feed can list exactly the deletions of shared
/// records.
@Suite("Shares: what a tombstone remembers")
struct SharedTombstoneTests {
    private func child(_ name: String, of parent: String?, zone: String = "Albums") -> Wire.Record {
        var record = note(name, zone: zone)
        record.parent = parent.map { Wire.Reference(recordID: recordID($0, zone: zone), action: .none) }
        return record
    }

    private func root(_ name: String, sharedBy share: String, zone: String = "Albums") -> Wire.Record {
        var record = note(name, zone: zone)
        record.share = Wire.Reference(recordID: recordID(share, zone: zone), action: .none)
        return record
    }

    private func share(_ name: String, zone: String = "Albums") -> Wire.Record {
        Wire.Record(recordID: recordID(name, zone: zone), recordType: "cloudkit.share", shareFields: Wire.ShareFields())
    }

    /// Every tombstone of `zone`, by record name.
    private func tombstones(_ storage: any ShareStorageUnderTest, zone: String) async throws -> [String: [String]] {
        let batch = try await storage.recordChanges(in: zoneID(zone), of: alice, since: 0, limit: 400, desiredKeys: [])
        return Dictionary(uniqueKeysWithValues: batch.deleted.map { ($0.recordID.recordName, $0.sharedBy) })
    }

    private func delete(_ names: [String], zone: String, in storage: any ShareStorageUnderTest) async throws {
        let result = try await storage.modifyRecords(
            RecordModification(deleting: names.map { recordID($0, zone: zone) }), in: alice, by: "_alice")
        #expect(!result.hasFailures, "\(result)")
    }

    @Test func aHierarchyDeletionNamesTheSharesOfTheRootsItsChainReached() async throws {
        try await withShareStore { storage, _ in
            try await storage.createZone("Albums")
            // album (share s1) ← photo ← crop; other (share s2) ← b; loose has no parent,
            // orphan's parent never existed.
            try await storage.saveAll([
                root("album", sharedBy: "s1"), share("s1"), root("other", sharedBy: "s2"), share("s2"),
                child("photo", of: "album"), child("crop", of: "photo"), child("b", of: "other"),
                child("loose", of: nil), child("orphan", of: "nowhere"),
            ])
            try await delete(["crop", "b", "loose", "orphan"], zone: "Albums", in: storage)
            // A parent deleted before its child in one request: the child was in its shares.
            try await delete(["photo", "album"], zone: "Albums", in: storage)
            let deleted = try await tombstones(storage, zone: "Albums")
            #expect(deleted["crop"] == ["s1"])
            #expect(deleted["b"] == ["s2"])
            #expect(deleted["loose"] == [])
            #expect(deleted["orphan"] == [])
            #expect(deleted["photo"] == ["s1"])
            #expect(deleted["album"] == ["s1"])
            // Deleting the root deleted its share, whose tombstone names itself.
            #expect(deleted["s1"] == ["s1"])
        }
    }

    @Test func aChildDeletedAfterItsParentInOneRequestKeepsTheParentsShares() async throws {
        try await withShareStore { storage, _ in
            try await storage.createZone("Albums")
            try await storage.saveAll([root("album", sharedBy: "s1"), share("s1"), child("photo", of: "album"), child("crop", of: "photo")])
            try await delete(["photo", "crop"], zone: "Albums", in: storage)
            let deleted = try await tombstones(storage, zone: "Albums")
            #expect(deleted["photo"] == ["s1"] && deleted["crop"] == ["s1"])
        }
    }

    @Test func aRecordDeletedByACascadeNamesTheSharesItWasIn() async throws {
        try await withShareStore { storage, engine in
            try await storage.createZone("Albums")
            // tag's parent is photo, which it references with deleteSelf: deleting photo deletes
            // tag, whose chain then reaches the root through the photo just deleted.
            var tag = child("tag", of: "photo")
            tag.fields = [field("on", reference(recordID("photo", zone: "Albums")))]
            try await storage.saveAll([root("album", sharedBy: "s1"), share("s1"), child("photo", of: "album"), tag])
            let result = try await storage.modifyRecords(
                RecordModification(deleting: [recordID("photo", zone: "Albums")]), in: alice, by: "_alice")
            #expect(result.cascadedDeletions.map(\.recordName) == ["tag"], "\(engine)")
            let deleted = try await tombstones(storage, zone: "Albums")
            #expect(deleted["photo"] == ["s1"] && deleted["tag"] == ["s1"], "\(engine): \(deleted)")
        }
    }

    @Test func aZoneSharedWholeNamesItsShareAndAnUnsharedZoneNone() async throws {
        try await withShareStore { storage, _ in
            try await storage.createZone("Trip")
            try await storage.createZone("Private")
            try await storage.saveAll([note("early", zone: "Trip"), note("mine", zone: "Private")])
            // Deleted before the zone was shared: in no share.
            try await delete(["early"], zone: "Trip", in: storage)
            try await storage.saveAll([share(ShareRules.zoneShareName, zone: "Trip"), note("day", zone: "Trip")])
            try await delete(["day"], zone: "Trip", in: storage)
            try await delete(["mine"], zone: "Private", in: storage)
            let trip = try await tombstones(storage, zone: "Trip")
            #expect(trip["early"] == [])
            #expect(trip["day"] == [ShareRules.zoneShareName])
            #expect(try await tombstones(storage, zone: "Private")["mine"] == [])
        }
    }

    @Test func v11FillsInTheTombstonesOfZonesSharedWhole() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A store at v10: alice's zone Trip shared whole, zone Albums by hierarchy, zone Private
        // not at all; one tombstone in each, as v10 wrote them (no shared_by).
        do {
            let queue = try DatabaseQueue(path: (directory as NSString).appendingPathComponent(SQLiteStorage.fileName))
            try SQLiteStorage.migrator.migrate(queue, upTo: "v10-shares")
            try await queue.write { db in
                try db.execute(sql: """
                    INSERT INTO databases (id, container, scope, owner) VALUES (1, '\(container)', \(Wire.DatabaseScope.private.rawValue), '_alice');
                    INSERT INTO zones (id, database_id, name, change_seq, db_seq) VALUES (1, 1, 'Trip', 1, 1);
                    INSERT INTO zones (id, database_id, name, change_seq, db_seq) VALUES (2, 1, 'Albums', 1, 2);
                    INSERT INTO zones (id, database_id, name, change_seq, db_seq) VALUES (3, 1, 'Private', 1, 3);
                    INSERT INTO shares (zone_id, name, root_name, token, public_permission)
                        VALUES (1, 'cloudkit.zoneshare', NULL, 't1', 1);
                    INSERT INTO shares (zone_id, name, root_name, token, public_permission) VALUES (2, 's1', 'album', 't2', 1);
                    INSERT INTO tombstones (zone_id, name, record_type, seq, deleted_at) VALUES (1, 'day', 'Note', 1, 0);
                    INSERT INTO tombstones (zone_id, name, record_type, seq, deleted_at) VALUES (2, 'photo', 'Note', 1, 0);
                    INSERT INTO tombstones (zone_id, name, record_type, seq, deleted_at) VALUES (3, 'mine', 'Note', 1, 0);
                    """)
            }
        }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        #expect(try await tombstones(storage, zone: "Trip") == ["day": ["cloudkit.zoneshare"]])
        #expect(try await tombstones(storage, zone: "Albums") == ["photo": []], "unknown: never shown to participants")
        #expect(try await tombstones(storage, zone: "Private") == ["mine": []])
    }
}

/// The shares generation an access policy is cached by moves with every change of a share,
/// and only then.
@Suite("Shares: the generation access checks are cached by")
struct ShareGenerationTests {
    @Test func everyChangeOfAShareMovesItAndOtherWritesDoNot() async throws {
        try await withSQLiteStore { storage, _ in
            for user in ["_alice", "_bob"] { _ = try await storage.createUser(user, at: Wire.Timestamp(seconds: 1)) }
            try await storage.createZone("Trip")
            var generation = try #require(storage.sharesGeneration)
            func moved() throws -> Bool {
                let now = try #require(storage.sharesGeneration)
                defer { generation = now }
                return now != generation
            }
            try await storage.saveAll([note("day", zone: "Trip")])
            #expect(try !moved(), "a record save")
            let invite = Wire.ShareParticipant(
                userIdentity: Wire.UserIdentity(userRecordID: Wire.RecordID(recordName: "_bob")), role: .privateUser,
                permission: .readWrite)
            let saved = try await storage.saveAll([
                Wire.Record(
                    recordID: recordID(ShareRules.zoneShareName, zone: "Trip"), recordType: "cloudkit.share",
                    shareFields: Wire.ShareFields(participants: [invite]))
            ])
            #expect(try moved(), "a share saved")
            let token = try #require(ShareURL.token(in: "https://h" + (saved.first?.shareFields?.url ?? "")))
            #expect(try await storage.acceptShare(withToken: token, in: container, by: "_bob") != nil)
            #expect(try moved(), "a participant accepting")
            try await storage.saveAll([note("night", zone: "Trip")])
            #expect(try !moved(), "a record save in the shared zone")
            #expect(try await storage.leaveShare(ShareRules.zoneShareName, inZone: "Trip", of: "_alice", in: container, by: "_bob"))
            #expect(try moved(), "a participant leaving")
            _ = try await storage.modifyZones(saving: [], deleting: [zoneID("Trip")], in: alice)
            #expect(try moved(), "the zone deleted with its share")
        }
    }
}
