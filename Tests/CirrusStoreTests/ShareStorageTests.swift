import CirrusWire
import Testing

@testable import CirrusStore

/// ``ShareStorage`` on every engine that keeps shares: accepting and leaving, the shares a
/// participant reaches, a participant's writes through their shared database, and several
/// nodes (or processes) changing one share at once.
@Suite("Shares: accepting, leaving, the shared database")
struct ShareStorageTests {
    private func invite(_ user: String, _ permission: Wire.ShareParticipantPermission = .readWrite) -> Wire.ShareParticipant {
        Wire.ShareParticipant(
            userIdentity: Wire.UserIdentity(userRecordID: Wire.RecordID(recordName: user)), role: .privateUser,
            permission: permission)
    }

    private func share(
        _ name: String, zone: String = "Trip", participants: [Wire.ShareParticipant] = [],
        publicPermission: Wire.ShareParticipantPermission = .none
    ) -> Wire.Record {
        Wire.Record(
            recordID: recordID(name, zone: zone), recordType: ShareRules.shareType,
            shareFields: Wire.ShareFields(participants: participants, publicPermission: publicPermission))
    }

    private func child(_ name: String, of parent: String, zone: String = "Trip") -> Wire.Record {
        var record = note(name, zone: zone)
        record.parent = Wire.Reference(recordID: recordID(parent, zone: zone), action: .none)
        return record
    }

    /// Users alice (the owner), bob, carol, dave; alice's zone Trip.
    private func prepare(_ storage: any ShareStorageUnderTest) async throws {
        for user in ["_alice", "_bob", "_carol", "_dave"] {
            _ = try await storage.createUser(user, at: Wire.Timestamp(seconds: 1))
        }
        try await storage.createZone("Trip")
    }

    /// The token of a saved share's URL.
    private func token(of saved: Wire.Record?) throws -> String {
        try #require(ShareURL.token(in: "https://h" + (saved?.shareFields?.url ?? "")))
    }

    /// The acceptance statuses the share record lists, by user.
    private func listed(_ storage: any ShareStorageUnderTest, _ name: String, zone: String = "Trip") async throws
        -> [String: Wire.ShareParticipantAcceptanceStatus]
    {
        let record = try #require(try await storage.fetch(recordID(name, zone: zone)).record)
        var statuses: [String: Wire.ShareParticipantAcceptanceStatus] = [:]
        for participant in record.shareFields?.participants ?? [] {
            if let user = participant.userIdentity?.userRecordID?.recordName { statuses[user] = participant.acceptanceStatus }
        }
        return statuses
    }

    @Test func aParticipantAcceptsThenLeaves() async throws {
        try await withShareStore { storage, engine in
            try await prepare(storage)
            let saved = try await storage.saveAll([share(ShareRules.zoneShareName, participants: [invite("_bob")])])
            let token = try token(of: saved.first)
            #expect(try await storage.share(withToken: token, in: container)?.participant("_bob")?.status == .pending)
            #expect(try await storage.acceptedShares(of: "_bob", in: container).isEmpty, "\(engine)")

            #expect(try await storage.acceptShare(withToken: token, in: "other.container", by: "_bob") == nil)
            #expect(try await storage.acceptShare(withToken: token, in: container, by: "_carol") == nil, "not invited")
            let accepted = try #require(try await storage.acceptShare(withToken: token, in: container, by: "_bob"))
            #expect(accepted.acceptedPermission(of: "_bob") == .readWrite)
            #expect(try await listed(storage, ShareRules.zoneShareName)["_bob"] == .accepted, "the record lists it")
            #expect(try await storage.acceptedShares(of: "_bob", in: container).map(\.recordName) == [ShareRules.zoneShareName])
            #expect(try await storage.shares(inZone: "Trip", of: "_alice", in: container).count == 1)
            let zone = try await storage.fetchZones([zoneID("Trip")], in: alice).first?.zone
            #expect(zone?.share?.recordID?.recordName == ShareRules.zoneShareName, "a zone shared whole names its share")

            #expect(
                try await !storage.leaveShare(ShareRules.zoneShareName, inZone: "Trip", of: "_alice", in: container, by: "_alice"),
                "the owner does not leave")
            #expect(try await storage.leaveShare(ShareRules.zoneShareName, inZone: "Trip", of: "_alice", in: container, by: "_bob"))
            #expect(try await !storage.leaveShare(ShareRules.zoneShareName, inZone: "Trip", of: "_alice", in: container, by: "_bob"))
            #expect(try await storage.acceptedShares(of: "_bob", in: container).isEmpty)
            #expect(try await listed(storage, ShareRules.zoneShareName)["_bob"] == .removed)
            #expect(try await storage.acceptShare(withToken: token, in: container, by: "_bob") == nil, "one who left stays out")
        }
    }

    @Test func anyoneJoinsAPublicShareAsAPublicUser() async throws {
        try await withShareStore { storage, _ in
            try await prepare(storage)
            let saved = try await storage.saveAll([share(ShareRules.zoneShareName, publicPermission: .readOnly)])
            let joined = try #require(try await storage.acceptShare(withToken: token(of: saved.first), in: container, by: "_dave"))
            #expect(joined.participant("_dave")?.role == .publicUser)
            #expect(joined.acceptedPermission(of: "_dave") == .readOnly)
            #expect(try await listed(storage, ShareRules.zoneShareName)["_dave"] == .accepted)
        }
    }

    @Test func shareableUsersAreEnabledUsersOfTheDirectory() async throws {
        try await withShareStore { storage, _ in
            _ = try await storage.registerUser("_erin", verifiedEmails: ["erin@example.com"], at: Wire.Timestamp(seconds: 1))
            _ = try await storage.createUser("_frank", at: Wire.Timestamp(seconds: 1))
            _ = try await storage.updateUser("_frank", .setDisabled(true), at: Wire.Timestamp(seconds: 2))
            let found = try await storage.shareableUsers(matching: [
                .email("Erin@Example.com"), .userRecordName("_frank"), .userRecordName("_nobody"), .phone("+1 555 0100"),
            ])
            #expect(found == ["_erin", nil, nil, nil])
        }
    }

    @Test func aParticipantWritesOnlyRecordsOfSharesTheyMayChange() async throws {
        try await withShareStore { storage, _ in
            try await prepare(storage)
            var album = note("album", zone: "Trip")
            album.share = Wire.Reference(recordID: recordID("s1", zone: "Trip"), action: .none)
            try await storage.saveAll([album, share("s1", participants: [invite("_bob")]), note("diary", zone: "Trip")])
            let scope: [String: Set<String>] = ["Trip": ["s1"]]
            func asBob(_ modification: RecordModification) async throws -> RecordModificationResult {
                var modification = modification
                modification.sharedScope = scope
                return try await storage.modifyRecords(modification, in: alice, by: "_bob")
            }
            // A new record under the root, and one under that new record in the same request.
            let added = try await asBob(RecordModification(saving: [child("photo", of: "album"), child("crop", of: "photo")]))
            #expect(!added.hasFailures, "\(added)")
            #expect(added.saved(0)?.lastModifiedUserRecordID?.recordName == "_bob")
            // Outside the share: refused, whether the record exists or not.
            let outside = try await asBob(
                RecordModification(saving: [note("diary", zone: "Trip"), note("loose", zone: "Trip")], isAtomic: false))
            #expect(outside.saveError(0)?.code == .permissionFailure)
            #expect(outside.saveError(1)?.code == .permissionFailure)
            let deleting = try await asBob(
                RecordModification(deleting: [recordID("diary", zone: "Trip"), recordID("ghost", zone: "Trip")], isAtomic: false))
            #expect(deleting.deletes.map { $0.failure?.code } == [.permissionFailure, .permissionFailure])
            // An atomic request with one refused item writes nothing.
            let mixed = try await asBob(RecordModification(saving: [child("extra", of: "album"), note("diary2", zone: "Trip")]))
            #expect(mixed.saveError(0)?.code == .batchRequestFailed)
            #expect(try await storage.fetch(recordID("extra", zone: "Trip")).failure?.code == .unknownItem)
            // Deleting a shared record leaves a tombstone naming its share.
            let deleted = try await asBob(RecordModification(deleting: [recordID("crop", zone: "Trip")]))
            #expect(!deleted.hasFailures, "\(deleted)")
            let shares = try await storage.sharesOfDeletedRecords(["crop", "photo"], inZone: "Trip", of: "_alice", in: container)
            #expect(shares == ["crop": ["s1"]])
        }
    }

    @Test func aParticipantsSharedSubscriptionHearsOfTheRecordsOfTheirHierarchyShareOnly() async throws {
        try await withShareStore { storage, engine in
            try await prepare(storage)
            var album = note("album", zone: "Trip")
            album.share = Wire.Reference(recordID: recordID("s1", zone: "Trip"), action: .none)
            let saved = try await storage.saveAll([album, share("s1", participants: [invite("_bob")])])
            #expect(try await storage.acceptShare(withToken: token(of: saved.last), in: container, by: "_bob") != nil)
            _ = try await storage.modifySubscriptions(
                saving: [Wire.Subscription(subscriptionID: "db", kind: .database(Wire.DatabaseSubscription()))],
                deleting: [], in: DatabaseKey.shared(container: container, user: "_bob"), by: "_bob")
            let feed = NotificationFeedKey(container: container, user: "_bob")
            let before = try await storage.notificationFeedHead(feed)
            try await storage.saveAll([note("loose", zone: "Trip")])
            #expect(try await storage.notificationFeedHead(feed) == before, "\(engine): not in bob's share")
            try await storage.saveAll([child("photo", of: "album")])
            #expect(try await storage.notificationFeedHead(feed) == before + 1, "\(engine): under the root")
            _ = try await storage.modifyRecords(
                RecordModification(deleting: [recordID("photo", zone: "Trip"), recordID("loose", zone: "Trip")]), in: alice,
                by: "_alice")
            #expect(try await storage.notificationFeedHead(feed) == before + 2, "\(engine): a shared record deleted")
        }
    }

    @Test func aParticipantRemovedThroughOneNodeLosesAccessThroughTheOther() async throws {
        try await withStores(\.implementsShares, as: (any ShareStorageUnderTest).self, nodes: 2) { nodes, engine in
            let (first, second) = (nodes[0], nodes[1])
            try await prepare(first)
            let saved = try await first.saveAll([share(ShareRules.zoneShareName, participants: [invite("_bob"), invite("_carol")])])
            #expect(try await second.acceptShare(withToken: token(of: saved.first), in: container, by: "_bob") != nil)
            // What an access check on the second node compiles, and the generation it keeps it by.
            let generation = second.sharesGeneration
            #expect(try await second.acceptedShares(of: "_bob", in: container).count == 1, "\(engine)")

            var removing = try #require(try await first.fetch(recordID(ShareRules.zoneShareName, zone: "Trip")).record)
            removing.shareFields?.participants.removeAll { $0.userIdentity?.userRecordID?.recordName == "_bob" }
            _ = try await first.saveAll([removing])

            // The second node's cached access is not reused past the removal, and what it reads
            // again no longer has bob in the share.
            if let generation { #expect(second.sharesGeneration != generation, "\(engine): the generation moved") }
            #expect(try await second.acceptedShares(of: "_bob", in: container).isEmpty, "\(engine)")
            #expect(try await second.share(withToken: token(of: saved.first), in: container)?.participant("_bob") == nil)
        }
    }

    @Test func nodesAcceptingAndLeavingOneShareAtOnceAgree() async throws {
        try await withStores(\.implementsShares, as: (any ShareStorageUnderTest).self, nodes: 2) { nodes, engine in
            try await prepare(nodes[0])
            let saved = try await nodes[0].saveAll([
                share(ShareRules.zoneShareName, participants: [invite("_carol")], publicPermission: .readWrite)
            ])
            let token = try token(of: saved.first)
            #expect(try await nodes[0].acceptShare(withToken: token, in: container, by: "_carol") != nil)
            // Each node: bob joins (a new public participant), dave joins, and carol leaves on one
            // node while she saves nothing on the other.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, node) in nodes.enumerated() {
                    group.addTask {
                        for user in ["_bob", "_dave"] {
                            #expect(try await node.acceptShare(withToken: token, in: container, by: user) != nil, "\(engine)")
                        }
                        if index == 1 {
                            _ = try await node.leaveShare(
                                ShareRules.zoneShareName, inZone: "Trip", of: "_alice", in: container, by: "_carol")
                        }
                    }
                }
                try await group.waitForAll()
            }
            let entry = try #require(try await nodes[1].share(withToken: token, in: container))
            #expect(entry.participants.filter { $0.user == "_bob" }.count == 1, "\(engine): bob joined once")
            #expect(entry.participants.filter { $0.user == "_dave" }.count == 1, "\(engine): dave joined once")
            #expect(entry.participant("_carol")?.status == .removed)
            // The share record lists what the rows say: no acceptance was lost.
            let statuses = try await listed(nodes[0], ShareRules.zoneShareName)
            #expect(statuses == ["_alice": .accepted, "_bob": .accepted, "_dave": .accepted, "_carol": .removed], "\(engine)")
            let record = try #require(try await nodes[0].fetch(recordID(ShareRules.zoneShareName, zone: "Trip")).record)
            #expect(record.shareFields?.participants.count == 4)
        }
    }
}
