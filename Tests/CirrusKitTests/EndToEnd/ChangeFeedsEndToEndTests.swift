import CirrusKit
import CirrusModel
import Foundation
import NIOConcurrencyHelpers
import Testing

/// Everything one zone-changes operation reported, in order.
struct ZoneFetchLog: Sendable {
    enum Entry: Hashable, Sendable {
        case changed(String)
        case deleted(String, String)
        case tokenUpdated(String)
        case zoneDone(String, moreComing: Bool)
        case zoneFailed(String, CKError.Code)
    }

    var entries: [Entry] = []
    var tokens: [CKRecordZone.ID: CKServerChangeToken] = [:]
    var clientTokens: [CKRecordZone.ID: Data?] = [:]
    var records: [CKRecord.ID: CKRecord] = [:]
    var deletedIDs: [CKRecord.ID] = []
    var failures: [CKRecordZone.ID: CKError.Code] = [:]
    var result: Result<Void, CKError>?
}

/// Runs a CKFetchRecordZoneChangesOperation and collects what its blocks saw.
func fetchZoneChanges(
    _ database: CKDatabase,
    _ zones: [CKRecordZone.ID: CKServerChangeToken?],
    order: [CKRecordZone.ID]? = nil,
    resultsLimit: Int = 0,
    desiredKeys: [CKRecord.FieldKey]? = nil,
    fetchAllChanges: Bool = true
) async -> ZoneFetchLog {
    let zoneIDs = order ?? zones.keys.sorted { $0.zoneName < $1.zoneName }
    var configurations: [CKRecordZone.ID: CKFetchRecordZoneChangesOperation.ZoneConfiguration] = [:]
    for zoneID in zoneIDs {
        configurations[zoneID] = CKFetchRecordZoneChangesOperation.ZoneConfiguration(
            previousServerChangeToken: zones[zoneID] ?? nil, resultsLimit: resultsLimit, desiredKeys: desiredKeys)
    }
    let operation = CKFetchRecordZoneChangesOperation(recordZoneIDs: zoneIDs, configurationsByRecordZoneID: configurations)
    operation.fetchAllChanges = fetchAllChanges
    let log = NIOLockedValueBox(ZoneFetchLog())
    operation.recordWasChangedBlock = { id, result in
        log.withLockedValue {
            $0.entries.append(.changed(id.recordName))
            if case .success(let record) = result { $0.records[id] = record }
        }
    }
    operation.recordWithIDWasDeletedBlock = { id, type in
        log.withLockedValue {
            $0.entries.append(.deleted(id.recordName, type))
            $0.deletedIDs.append(id)
        }
    }
    operation.recordZoneChangeTokensUpdatedBlock = { zoneID, token, clientToken in
        log.withLockedValue {
            $0.entries.append(.tokenUpdated(zoneID.zoneName))
            $0.tokens[zoneID] = token
            $0.clientTokens[zoneID] = clientToken
        }
    }
    operation.recordZoneFetchResultBlock = { zoneID, result in
        log.withLockedValue {
            switch result {
            case .success(let (token, clientToken, moreComing)):
                $0.entries.append(.zoneDone(zoneID.zoneName, moreComing: moreComing))
                $0.tokens[zoneID] = token
                $0.clientTokens[zoneID] = clientToken
            case .failure(let error):
                let code = (error as? CKError)?.code ?? .internalError
                $0.entries.append(.zoneFailed(zoneID.zoneName, code))
                $0.failures[zoneID] = code
            }
        }
    }
    operation.fetchRecordZoneChangesResultBlock = { result in
        log.withLockedValue { $0.result = result.mapError { ($0 as? CKError) ?? CKError(.internalError) } }
    }
    database.add(operation)
    await finished(operation)
    return log.withLockedValue { $0 }
}

@Suite("Change feeds end to end")
struct ChangeFeedsEndToEndTests {
    static let zone = CKRecordZone.ID(zoneName: "Notes")

    static func note(_ name: String, in zone: CKRecordZone.ID = Self.zone, _ value: Int = 0) -> CKRecord {
        let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: name, zoneID: zone))
        record["v"] = value
        return record
    }

    @Test func changesSinceATokenAreEachRecordOnceAtItsLatestState() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            _ = try await database.save(CKRecordZone(zoneID: Self.zone))
            _ = try await database.modifyRecords(saving: (0..<5).map { Self.note("n\($0)") }, deleting: [])

            let first = await fetchZoneChanges(database, [Self.zone: nil])
            #expect(first.entries == ["n0", "n1", "n2", "n3", "n4"].map { .changed($0) } + [.zoneDone("Notes", moreComing: false)])
            let token = try #require(first.tokens[Self.zone])

            // Two saves of n1 and a delete of n3: n1 once, at its newest value.
            let n1 = try #require(first.records[CKRecord.ID(recordName: "n1", zoneID: Self.zone)])
            n1["v"] = 1
            let saved = try await database.save(n1)
            saved["v"] = 2
            _ = try await database.save(saved)
            _ = try await database.deleteRecord(withID: CKRecord.ID(recordName: "n3", zoneID: Self.zone))

            let second = await fetchZoneChanges(database, [Self.zone: token])
            #expect(second.entries == [.changed("n1"), .deleted("n3", "Note"), .zoneDone("Notes", moreComing: false)])
            #expect(second.records.values.first?["v"] as? Int == 2)
            #expect((try? second.result?.get()) != nil)

            // Nothing new: nothing but the result, and the token stays usable.
            let secondToken = try #require(second.tokens[Self.zone])
            let third = await fetchZoneChanges(database, [Self.zone: secondToken])
            #expect(third.entries == [.zoneDone("Notes", moreComing: false)])
        }
    }

    @Test func batchesReportTokensBetweenThemOrStopWithMoreComing() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            _ = try await database.save(CKRecordZone(zoneID: Self.zone))
            _ = try await database.modifyRecords(saving: (0..<7).map { Self.note("n\($0)") }, deleting: [])

            let all = await fetchZoneChanges(database, [Self.zone: nil], resultsLimit: 3)
            #expect(all.entries.filter { if case .tokenUpdated = $0 { true } else { false } }.count == 2)
            #expect(all.records.count == 7)
            #expect(all.entries.last == .zoneDone("Notes", moreComing: false))

            // One batch at a time: follow moreComing to the end.
            var token: CKServerChangeToken?
            var seen: [String] = []
            var rounds = 0
            while true {
                rounds += 1
                let (modifications, deletions, next, moreComing) = try await database.recordZoneChanges(
                    inZoneWith: Self.zone, since: token, resultsLimit: 3)
                #expect(deletions.isEmpty)
                seen += modifications.keys.map(\.recordName)
                token = next
                if !moreComing { break }
            }
            #expect(rounds == 3)
            #expect(seen.sorted() == (0..<7).map { "n\($0)" })
        }
    }

    @Test func desiredKeysLimitTheFieldsOfChangedRecords() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            _ = try await database.save(CKRecordZone(zoneID: Self.zone))
            let record = Self.note("n", 5)
            record["title"] = "kept out"
            _ = try await database.save(record)
            let log = await fetchZoneChanges(database, [Self.zone: nil], desiredKeys: ["v"])
            let fetched = try #require(log.records.values.first)
            #expect(fetched["v"] as? Int == 5)
            #expect(fetched["title"] == nil)
        }
    }

    @Test func theClientChangeTokenComesBackWithTheZonesNextFetch() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            _ = try await database.save(CKRecordZone(zoneID: Self.zone))
            let operation = CKModifyRecordsOperation(recordsToSave: [Self.note("a")], recordIDsToDelete: nil)
            operation.clientChangeTokenData = Data("device-A-17".utf8)
            database.add(operation)
            await finished(operation)

            let log = await fetchZoneChanges(database, [Self.zone: nil])
            #expect(log.clientTokens[Self.zone] == Data("device-A-17".utf8))
            let other = await fetchZoneChanges(database, [CKRecordZone.ID.default: nil])
            #expect(other.clientTokens[CKRecordZone.ID.default] == .some(nil))
        }
    }

    @Test func forgedOrForeignTokensAreRefusedPerZone() async throws {
        try await withStack { container in
            let alice = container("alice").privateCloudDatabase
            let bob = container("bob").privateCloudDatabase
            let other = CKRecordZone.ID(zoneName: "Other")
            _ = try await alice.modifyRecordZones(saving: [CKRecordZone(zoneID: Self.zone), CKRecordZone(zoneID: other)], deleting: [])
            _ = try await bob.save(CKRecordZone(zoneID: Self.zone))
            _ = try await alice.save(Self.note("a"))
            let token = try #require(await fetchZoneChanges(alice, [Self.zone: nil]).tokens[Self.zone])

            // Bob's zone of the same name, Alice's other zone, one flipped bit: all refused.
            var flipped = token.opaqueBytes
            flipped[flipped.count / 2] ^= 1
            for (database, zone, presented) in [
                (bob, Self.zone, token), (alice, other, token), (alice, Self.zone, CKServerChangeToken(opaqueBytes: flipped)),
                (alice, Self.zone, CKServerChangeToken(opaqueBytes: [1, 2, 3])),
            ] {
                let log = await fetchZoneChanges(database, [zone: presented])
                #expect(log.entries == [.zoneFailed(zone.zoneName, .invalidArguments)])
                guard case .failure(let error) = log.result else {
                    Issue.record("a refused zone fails the operation")
                    continue
                }
                #expect(error.code == .partialFailure)
                #expect(error.partialErrorsByItemID?[zone] != nil)
            }
            // A database token is not a zone token either.
            let databaseToken = try await alice.databaseChanges(since: nil).changeToken
            #expect(await fetchZoneChanges(alice, [Self.zone: databaseToken]).entries == [.zoneFailed("Notes", .invalidArguments)])
        }
    }

    @Test func theClientRefusesAZoneTwiceAndANegativeLimitBeforeSending() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let twice = await fetchZoneChanges(database, [Self.zone: nil], order: [Self.zone, Self.zone])
            guard case .failure(let error) = twice.result else {
                Issue.record("a zone named twice must be refused")
                return
            }
            #expect(error.code == .invalidArguments)
            #expect(twice.entries.isEmpty)
            let negative = await fetchZoneChanges(database, [Self.zone: nil], resultsLimit: -1)
            if case .failure(let error) = negative.result {
                #expect(error.code == .invalidArguments)
            } else {
                Issue.record("a negative resultsLimit must be refused")
            }
            do {
                _ = try await database.databaseChanges(since: nil, resultsLimit: -1)
                Issue.record("a negative resultsLimit must be refused")
            } catch let error as CKError {
                #expect(error.code == .invalidArguments)
            }
        }
    }

    @Test func oneFailingZoneLeavesTheOthersAlone() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let missing = CKRecordZone.ID(zoneName: "Missing")
            _ = try await database.save(CKRecordZone(zoneID: Self.zone))
            _ = try await database.save(Self.note("a"))
            let log = await fetchZoneChanges(database, [missing: nil, Self.zone: nil], order: [missing, Self.zone])
            #expect(log.entries == [.zoneFailed("Missing", .zoneNotFound), .changed("a"), .zoneDone("Notes", moreComing: false)])
        }
    }

    @Test func aZoneDeletedAndCreatedAgainExpiresItsOldTokens() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            _ = try await database.save(CKRecordZone(zoneID: Self.zone))
            _ = try await database.save(Self.note("a"))
            let token = try #require(await fetchZoneChanges(database, [Self.zone: nil]).tokens[Self.zone])
            _ = try await database.deleteRecordZone(withID: Self.zone)
            #expect(await fetchZoneChanges(database, [Self.zone: token]).entries == [.zoneFailed("Notes", .zoneNotFound)])
            _ = try await database.save(CKRecordZone(zoneID: Self.zone))
            _ = try await database.save(Self.note("b"))
            #expect(await fetchZoneChanges(database, [Self.zone: token]).entries == [.zoneFailed("Notes", .changeTokenExpired)])
            #expect(await fetchZoneChanges(database, [Self.zone: nil]).entries == [.changed("b"), .zoneDone("Notes", moreComing: false)])
        }
    }

    @Test func tokensExpireWhenTheTombstonesTheyNeedArePruned() async throws {
        let clock = ManualClock()
        try await withStack(clock: clock, tombstoneRetentionSeconds: 3600) { container, internals in
            let database = container("alice").privateCloudDatabase
            _ = try await database.save(CKRecordZone(zoneID: Self.zone))
            _ = try await database.modifyRecords(saving: [Self.note("a"), Self.note("b")], deleting: [])
            let old = try #require(await fetchZoneChanges(database, [Self.zone: nil]).tokens[Self.zone])
            let oldDatabase = try await database.databaseChanges(since: nil).changeToken
            _ = try await database.deleteRecord(withID: CKRecord.ID(recordName: "a", zoneID: Self.zone))
            let other = CKRecordZone.ID(zoneName: "Gone")
            _ = try await database.save(CKRecordZone(zoneID: other))
            _ = try await database.deleteRecordZone(withID: other)

            // Within retention the deletion is still reported.
            clock.advance(seconds: 1800)
            try await internals.maintenance.runOnce()
            #expect(await fetchZoneChanges(database, [Self.zone: old]).entries == [.deleted("a", "Note"), .zoneDone("Notes", moreComing: false)])

            // Past it, the old tokens expire; starting over works.
            clock.advance(seconds: 3600)
            try await internals.maintenance.runOnce()
            #expect(await fetchZoneChanges(database, [Self.zone: old]).entries == [.zoneFailed("Notes", .changeTokenExpired)])
            await #expect(throws: CKError.self) { _ = try await database.databaseChanges(since: oldDatabase) }
            do {
                _ = try await database.databaseChanges(since: oldDatabase)
            } catch let error as CKError {
                #expect(error.code == .changeTokenExpired)
            }
            let fresh = await fetchZoneChanges(database, [Self.zone: nil])
            #expect(fresh.entries == [.changed("b"), .zoneDone("Notes", moreComing: false)])
            let databaseChanges = try await database.databaseChanges(since: nil)
            #expect(databaseChanges.modifications.map(\.zoneID.zoneName) == ["Notes"])
            #expect(databaseChanges.deletions.isEmpty)
        }
    }

    @Test func aFetchFromTheBeginningAfterPruningHandsOutTokensThatStayValid() async throws {
        let clock = ManualClock()
        try await withStack(clock: clock, tombstoneRetentionSeconds: 60) { container, internals in
            let database = container("alice").privateCloudDatabase
            _ = try await database.save(CKRecordZone(zoneID: Self.zone))
            // Live records at sequences 1…6, deletions (pruned below) interleaved after them.
            _ = try await database.modifyRecords(saving: (0..<6).map { Self.note("n\($0)") }, deleting: [])
            for i in [1, 3] {
                _ = try await database.deleteRecord(withID: CKRecord.ID(recordName: "n\(i)", zoneID: Self.zone))
            }
            clock.advance(seconds: 120)
            try await internals.maintenance.runOnce()

            // A device starting now pages through in batches of two; each intermediate token
            // lies below the pruned deletions, yet it holds none of those records: still valid.
            var token: CKServerChangeToken?
            var names: [String] = []
            while true {
                let (modifications, deletions, next, moreComing) = try await database.recordZoneChanges(
                    inZoneWith: Self.zone, since: token, resultsLimit: 2)
                #expect(deletions.isEmpty)
                names += modifications.keys.map(\.recordName)
                token = next
                if !moreComing { break }
            }
            #expect(names.sorted() == ["n0", "n2", "n4", "n5"])
        }
    }

    @Test func theDatabaseFeedListsZonesInOrderAndPages() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let zones = (0..<5).map { CKRecordZone.ID(zoneName: "Z\($0)") }
            _ = try await database.modifyRecordZones(saving: zones.map { CKRecordZone(zoneID: $0) }, deleting: [])
            let first = try await database.databaseChanges(since: nil)
            #expect(first.modifications.map(\.zoneID) == zones)
            #expect(!first.moreComing)

            _ = try await database.save(Self.note("x", in: zones[3]))
            _ = try await database.deleteRecordZone(withID: zones[1])
            // Deleted and created again: deleted first, then changed, so a device wipes, then fetches.
            _ = try await database.deleteRecordZone(withID: zones[4])
            _ = try await database.save(CKRecordZone(zoneID: zones[4]))

            let operation = CKFetchDatabaseChangesOperation(previousServerChangeToken: first.changeToken)
            operation.resultsLimit = 2
            let seen = NIOLockedValueBox<[String]>([])
            operation.recordZoneWithIDChangedBlock = { id in seen.withLockedValue { $0.append("+" + id.zoneName) } }
            operation.recordZoneWithIDWasDeletedBlock = { id in seen.withLockedValue { $0.append("-" + id.zoneName) } }
            operation.changeTokenUpdatedBlock = { _ in seen.withLockedValue { $0.append("token") } }
            let end = NIOLockedValueBox<(CKServerChangeToken, Bool)?>(nil)
            operation.fetchDatabaseChangesResultBlock = { result in
                if case .success(let (token, more)) = result { end.withLockedValue { $0 = (token, more) } }
            }
            database.add(operation)
            await finished(operation)
            #expect(seen.withLockedValue { $0 } == ["+Z3", "-Z1", "token", "-Z4", "+Z4"])
            let (token, moreComing) = try #require(end.withLockedValue { $0 })
            #expect(!moreComing)
            let after = try await database.databaseChanges(since: token)
            #expect(after.modifications.isEmpty && after.deletions.isEmpty)

            // One batch at a time.
            let one = try await database.databaseChanges(since: nil, resultsLimit: 2)
            #expect(one.moreComing)
            #expect(one.modifications.count + one.deletions.count == 2)
        }
    }

    @Test func databaseTokensAreBoundToTheirUserAndChangeFeedsStayOutOfThePublicDatabase() async throws {
        try await withStack { container in
            let alice = container("alice").privateCloudDatabase
            let bob = container("bob").privateCloudDatabase
            _ = try await alice.save(CKRecordZone(zoneID: Self.zone))
            let token = try await alice.databaseChanges(since: nil).changeToken
            do {
                _ = try await bob.databaseChanges(since: token)
                Issue.record("Alice's token must not work for Bob")
            } catch let error as CKError {
                #expect(error.code == .invalidArguments)
            }
            let publicDatabase = container("alice").publicCloudDatabase
            do {
                _ = try await publicDatabase.databaseChanges(since: nil)
                Issue.record("the public database has no database change feed")
            } catch let error as CKError {
                #expect(error.code == .invalidArguments)
            }
        }
    }
}
