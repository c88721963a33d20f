import CirrusKit
import CirrusModel
import CirrusPostgres
import CirrusServer
import CirrusStore
import CirrusTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

/// One node of ``withCluster(nodes:_:)``: a server with a `PostgresStorage` of its own.
struct ClusterNode: Sendable {
    let port: Int
    let storage: PostgresStorage
    let longLived: LongLivedOperations

    /// A device of `user` connected to this node.
    func container(_ user: String) -> CKContainer {
        CKContainer(identifier: "iCloud.com.example.notes", configuration: TestCertificates.client(port: port, user: user))
    }
}

/// `nodes` servers on one PostgreSQL database, each with its own storage (its own connection
/// pool, notification listener and group commit), user directory, long-lived operations and
/// asset store (over one shared directory): what `cirrusd --database` nodes run, in one
/// process.
func withCluster(nodes count: Int, _ body: ([ClusterNode]) async throws -> Void) async throws {
    let url = try PostgresURL(try TemporaryPostgres.shared().createDatabase())
    let assetDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-cluster-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: assetDirectory) }
    var storages: [PostgresStorage] = []
    do {
        for _ in 0..<count {
            storages.append(try await PostgresStorage(url: url, maximumConnections: 6))
        }
        try await startNodes(storages[...], assetDirectory: assetDirectory, started: [], body)
    } catch {
        for storage in storages { await storage.close() }
        throw error
    }
    for storage in storages { await storage.close() }
}

private func startNodes(
    _ storages: ArraySlice<PostgresStorage>, assetDirectory: String, started: [ClusterNode],
    _ body: ([ClusterNode]) async throws -> Void
) async throws {
    guard let storage = storages.first else {
        try await body(started)
        return
    }
    let secret = try await ServerSecret.load(from: storage)
    let users = UserDirectory(storage: storage)
    let assets = try AssetStore(directory: assetDirectory, storage: storage, secret: secret)
    let executor = StorageExecutor(storage: storage, tokens: ChangeTokenSealer(secret: secret), users: users, assets: assets)
    let longLived = LongLivedOperations(journal: storage, executor: executor)
    try await withServer(configure: {
        $0.executor = executor
        $0.longLivedOperations = longLived
        $0.users = users
    }) { _, port in
        try await startNodes(
            storages.dropFirst(), assetDirectory: assetDirectory,
            started: started + [ClusterNode(port: port, storage: storage, longLived: longLived)], body)
    }
}

/// Several nodes on one PostgreSQL database, end to end over TLS: a device may use any node
/// and sees what every other node committed, pushed and fed as if there were one server.
@Suite("A cluster of nodes on PostgreSQL, end to end")
struct ClusterEndToEndTests {
    static let notes = CKRecordZone.ID(zoneName: "Notes")

    static func note(_ name: String) -> CKRecord {
        let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: name, zoneID: notes))
        record["title"] = name
        return record
    }

    @Test func aSaveOnNodeOneIsPushedToAWatcherOnNodeTwoAndFedToItOnNodeThree() async throws {
        try await withCluster(nodes: 3) { nodes in
            let deviceA = nodes[0].container("alice")
            let deviceBWatching = nodes[1].container("alice")
            let deviceBFetching = nodes[2].container("alice")
            _ = try await deviceA.privateCloudDatabase.save(CKRecordZone(zoneID: Self.notes))
            let subscription = CKRecordZoneSubscription(zoneID: Self.notes, subscriptionID: "notes-zone")
            subscription.notificationInfo = CKSubscription.NotificationInfo()
            _ = try await deviceBWatching.privateCloudDatabase.save(subscription)

            let pushed = PushLog()
            let watch = collectNotifications(
                of: deviceBWatching, since: try await currentNotificationToken(deviceBWatching), into: pushed)
            var zoneToken: CKServerChangeToken?
            for round in 0..<3 {
                _ = try await deviceA.privateCloudDatabase.save(Self.note("n\(round)"))
                try await eventually { pushed.count == round + 1 }
                let notification = try #require(pushed.all.last as? CKRecordZoneNotification)
                #expect(notification.recordZoneID == Self.notes)
                // B's change feed, read through the third node, has the save (with a token
                // sealed by the third node, opened by the same node next round).
                let changes = try await deviceBFetching.privateCloudDatabase.recordZoneChanges(
                    inZoneWith: Self.notes, since: zoneToken)
                #expect(changes.modificationResultsByID.keys.map(\.recordName) == ["n\(round)"])
                zoneToken = changes.changeToken
            }
            watch.cancel()
            _ = await watch.value
            // A token sealed on node three opens on node one (one server secret).
            let fromNodeOne = try await deviceA.privateCloudDatabase.recordZoneChanges(inZoneWith: Self.notes, since: zoneToken)
            #expect(fromNodeOne.modificationResultsByID.isEmpty)
        }
    }

    @Test func twoNodesSavingIntoOneZoneFeedEveryChangeOnce() async throws {
        try await withCluster(nodes: 2) { nodes in
            let database = nodes[0].container("alice").privateCloudDatabase
            _ = try await database.save(CKRecordZone(zoneID: Self.notes))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, node) in nodes.enumerated() {
                    let writer = node.container("alice").privateCloudDatabase
                    for batch in 0..<4 {
                        group.addTask {
                            let records = (0..<25).map { Self.note("node\(index)-\(batch)-\($0)") }
                            let result = try await writer.modifyRecords(saving: records, deleting: [])
                            for (_, outcome) in result.saveResults { _ = try outcome.get() }
                        }
                    }
                }
                try await group.waitForAll()
            }
            // Read in small pages through either node: every record once.
            var seen: [String] = []
            var token: CKServerChangeToken?
            var more = true
            var page = 0
            while more {
                let reader = nodes[page % 2].container("alice").privateCloudDatabase
                let changes = try await reader.recordZoneChanges(inZoneWith: Self.notes, since: token, resultsLimit: 30)
                seen += changes.modificationResultsByID.keys.map(\.recordName)
                token = changes.changeToken
                more = changes.moreComing
                page += 1
            }
            #expect(seen.count == 200, "\(seen.count) changes")
            #expect(Set(seen).count == 200, "no record twice")
        }
    }
}
