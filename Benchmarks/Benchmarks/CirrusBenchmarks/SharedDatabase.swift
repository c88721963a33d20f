import CirrusKit
import CirrusModel
import CirrusServer
import CirrusStore
import Foundation
import Synchronization

/// The cost of the shared database's access checks: the same fetch and save by the owner in
/// their private database and by a read-write participant in their shared database, against
/// one server (CirrusKit → TLS → cirrusd → SQLite, all in this process).
///
/// Alice owns two zones of 100 records each: `Whole` shared whole, `Album` shared by hierarchy
/// (every record's parent is the root). Bob accepted both shares with read-write permission.
final class SharedDatabaseBench: Sendable {
    static let recordCount = 100

    let server: CirrusServer
    let storage: SQLiteStorage
    let alice: CKContainer
    let bob: CKContainer
    let directory: String
    /// Saves so far: names each save's records apart.
    private let rounds = Atomic<Int>(0)
    /// Flips at every call: which of a pair goes first.
    private let turns = Atomic<Bool>(false)

    init(certificates: String) async throws {
        self.directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-bench-\(UUID().uuidString)").path
        self.storage = try SQLiteStorage(directory: self.directory)
        var configuration = ServerConfiguration(
            tls: .server(
                certificateChainPath: certificates + "/server.pem",
                privateKeyPath: certificates + "/server-key.pem",
                clientCATrustRootsPath: certificates + "/ca.pem",
                clientCertificateVerification: .required
            )
        )
        configuration.port = 0
        let executor = StorageExecutor(storage: self.storage)
        configuration.executor = executor
        configuration.users = executor.users
        self.server = CirrusServer(configuration: configuration)
        let port = try await self.server.start().port ?? 0
        func container(_ user: String) -> CKContainer {
            CKContainer(
                identifier: "iCloud.bench",
                configuration: CirrusClientConfiguration(
                    host: "127.0.0.1", port: port, trustRootsPath: certificates + "/ca.pem",
                    certificateChainPath: certificates + "/\(user).pem", privateKeyPath: certificates + "/\(user)-key.pem"))
        }
        self.alice = container("alice")
        self.bob = container("bob")
        _ = try await self.alice.userRecordID()
        _ = try await self.bob.userRecordID()
        try await self.shareZones()
    }

    private static let whole = CKRecordZone.ID(zoneName: "Whole")
    private static let album = CKRecordZone.ID(zoneName: "Album")

    private func shareZones() async throws {
        let database = self.alice.privateCloudDatabase
        _ = try await database.modifyRecordZones(saving: [CKRecordZone(zoneID: Self.whole), CKRecordZone(zoneID: Self.album)], deleting: [])
        let lookup = CKUserIdentity.LookupInfo(userRecordID: CKRecord.ID(recordName: "_bob"))
        let wholeShare = CKShare(recordZoneID: Self.whole)
        let root = CKRecord(recordType: "Album", recordID: CKRecord.ID(recordName: "root", zoneID: Self.album))
        let albumShare = CKShare(rootRecord: root)
        for share in [wholeShare, albumShare] {
            let bob = try await self.alice.shareParticipant(for: lookup)
            bob.permission = .readWrite
            share.addParticipant(bob)
        }
        var records: [CKRecord] = [wholeShare, root, albumShare]
        records += Self.records(Self.recordCount, prefix: "n", zone: Self.whole, parent: nil)
        records += Self.records(Self.recordCount, prefix: "n", zone: Self.album, parent: root.recordID)
        let (saved, _) = try await database.modifyRecords(saving: records, deleting: [], savePolicy: .allKeys)
        for share in [wholeShare, albumShare] {
            guard let url = (try saved[share.recordID]?.get() as? CKShare)?.url else {
                throw CKError(.internalError, message: "the bench's share was not saved")
            }
            _ = try await self.bob.accept(try await self.bob.shareMetadata(for: url))
        }
    }

    static func records(_ count: Int, prefix: String, zone: CKRecordZone.ID, parent: CKRecord.ID?) -> [CKRecord] {
        (0..<count).map { index in
            let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "\(prefix)-\(index)", zoneID: zone))
            record["title"] = "Note number \(index)"
            record["count"] = index
            if let parent { record.setParent(parent) }
            return record
        }
    }

    /// Where a benchmark reads and writes: the owner in their private database, in the zone
    /// shared whole (`ownersPrivateDatabase`) or in the hierarchy's zone, whose records carry
    /// a parent (`ownersHierarchy`, the same fetch as `participantsHierarchy`'s); the
    /// participant in their shared database.
    enum Place {
        case ownersPrivateDatabase, ownersHierarchy, participantsZoneSharedWhole, participantsHierarchy

        var zone: CKRecordZone.ID {
            switch self {
            case .ownersPrivateDatabase, .participantsZoneSharedWhole: SharedDatabaseBench.whole
            case .ownersHierarchy, .participantsHierarchy: SharedDatabaseBench.album
            }
        }
    }

    private func database(_ place: Place) -> (CKDatabase, CKRecordZone.ID) {
        switch place {
        case .ownersPrivateDatabase, .ownersHierarchy:
            (self.alice.privateCloudDatabase, place.zone)
        case .participantsZoneSharedWhole, .participantsHierarchy:
            (self.bob.sharedCloudDatabase, CKRecordZone.ID(zoneName: place.zone.zoneName, ownerName: "_alice"))
        }
    }

    /// Fetches the 100 records of the place's zone in one operation.
    func fetch(_ place: Place) async throws -> Int {
        let (database, zone) = self.database(place)
        let ids = (0..<Self.recordCount).map { CKRecord.ID(recordName: "n-\($0)", zoneID: zone) }
        let results = try await database.records(for: ids)
        return results.values.filter { (try? $0.get()) != nil }.count
    }

    /// Saves 100 new records (parented to the root in the hierarchy) in one operation.
    func save(_ place: Place) async throws {
        let round = self.rounds.add(1, ordering: .relaxed).oldValue
        let (database, zone) = self.database(place)
        let parent = place.zone == Self.album ? CKRecord.ID(recordName: "root", zoneID: zone) : nil
        let records = Self.records(Self.recordCount, prefix: "s\(round)-\(place)", zone: zone, parent: parent)
        let (saved, _) = try await database.modifyRecords(saving: records, deleting: [], savePolicy: .allKeys)
        guard saved.values.allSatisfy({ (try? $0.get()) != nil }) else {
            throw CKError(.internalError, message: "a bench save failed")
        }
    }

    /// Alternately false and true, one call after another.
    func takeTurn() -> Bool {
        self.turns.logicalXor(true, ordering: .relaxed).oldValue
    }

    func close() async {
        await self.server.shutdownGracefully()
        try? self.storage.close()
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}
