import CirrusPostgres
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import Synchronization
import Testing

@testable import CirrusServer

/// Two `cirrusd` nodes' asset stores on one shared directory, each over its own
/// `PostgresStorage` on one database: what one node commits, the other saves, collects and
/// serves.
@Suite("Asset stores of several nodes")
struct AssetStoreNodesTests {
    static let owner = DatabaseKey.private(container: "iCloud.com.example.nodes", user: "_alice")

    /// Two nodes: their asset stores share `directory`, their storages one database. The
    /// clock is the test's (`time`), for both.
    struct Nodes {
        var a: AssetStore
        var b: AssetStore
        var storageA: PostgresStorage
        var storageB: PostgresStorage
        var directory: String
        var time: TestTime
    }

    /// The nodes' clock, moved by the test.
    final class TestTime: Sendable {
        private let seconds = Mutex<Int64>(1_700_000_000)

        var now: Wire.Timestamp { Wire.Timestamp(seconds: seconds.withLock { $0 }, nanos: 0) }

        func advance(by delta: Int64) { seconds.withLock { $0 += delta } }
    }

    private func withNodes(_ body: (Nodes) async throws -> Void) async throws {
        let server = try TemporaryPostgres.shared()
        let url = try PostgresURL(server.createDatabase())
        defer { _ = try? server.psql("DROP DATABASE IF EXISTS \(url.database) WITH (FORCE)") }
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("cirrus-nodes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let time = TestTime()
        let clock: @Sendable () -> Wire.Timestamp = { time.now }
        let storageA = try await PostgresStorage(url: url, maximumConnections: 2, clock: clock)
        let storageB: PostgresStorage
        do {
            storageB = try await PostgresStorage(url: url, maximumConnections: 2, clock: clock)
        } catch {
            await storageA.close()
            throw error
        }
        do {
            let secret = Array("the nodes' secret".utf8)
            let limits = AssetStore.Limits()
            let nodes = Nodes(
                a: try AssetStore(directory: directory, storage: storageA, secret: secret, limits: limits, clock: clock),
                b: try AssetStore(directory: directory, storage: storageB, secret: secret, limits: limits, clock: clock),
                storageA: storageA, storageB: storageB, directory: directory, time: time)
            try await body(nodes)
        } catch {
            await storageA.close()
            await storageB.close()
            throw error
        }
        await storageA.close()
        await storageB.close()
    }

    private static func chunk(
        _ content: [UInt8], _ range: Range<Int>, id: String, final: Bool = false
    ) -> Wire.UploadAssetRequest {
        var request = Wire.UploadAssetRequest()
        request.uploadID = id
        request.offset = UInt64(range.lowerBound)
        request.data = Array(content[range])
        request.totalSize = UInt64(content.count)
        request.sha256 = Wire.SHA256.hash(content)
        request.isFinal = final
        return request
    }

    /// A record of `owner`'s default zone with an asset the asset store holds (what the
    /// storage executor saves once it resolved the asset).
    private static func record(_ name: String, sha256: [UInt8], size: UInt64) -> Wire.Record {
        let asset = Wire.Asset(sha256: sha256, size: size, content: .uploadHandle(RecordModification.fileContentHandle))
        return Wire.Record(
            recordID: Wire.RecordID(
                recordName: name, zoneID: Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: owner.owner)),
            recordType: "Photo", fields: [Wire.RecordField(key: "image", value: Wire.FieldValue(kind: .assetValue(asset)))])
    }

    private static func collect(_ store: AssetStore, times: Int) async throws {
        for _ in 0..<times { _ = try await store.collect() }
    }

    private static func download(_ store: AssetStore, _ sha256: [UInt8], size: UInt64) async throws -> [UInt8] {
        let handle = store.downloadHandle(sha256: sha256, size: size, for: "_alice")
        let (file, claim) = try await store.openDownload(handle, for: "_alice")
        #expect(claim.size == size)
        return try file.read(at: 0, count: Int(size))
    }

    /// An upload that goes back and forth between the nodes (a client reconnecting after each
    /// failover), saved through the other node, collected on both, served by either.
    @Test func anUploadMovesBetweenNodesAndEitherServesItsContent() async throws {
        try await withNodes { nodes in
            var random = SplitMix64(seed: 17)
            let content = (0..<300_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let digest = Wire.SHA256.hash(content)
            let first = try await nodes.a.receive(Self.chunk(content, 0..<100_000, id: "u"), from: "_alice")
            #expect(first.receivedBytes == 100_000)
            // Node B resumes where A stopped, from the files alone.
            let empty = try await nodes.b.receive(Self.chunk(content, 0..<0, id: "u"), from: "_alice")
            #expect(empty.receivedBytes == 100_000)
            let second = try await nodes.b.receive(Self.chunk(content, 100_000..<200_000, id: "u"), from: "_alice")
            #expect(second.receivedBytes == 200_000)
            // A, asked where to resume, knows what B received.
            let resume = try await nodes.a.receive(Self.chunk(content, 0..<0, id: "u"), from: "_alice")
            #expect(resume.receivedBytes == 200_000)
            // Back on A, whose open upload is behind the file: it adds B's bytes to its digest.
            let done = try await nodes.a.receive(Self.chunk(content, 200_000..<300_000, id: "u", final: true), from: "_alice")
            #expect(done.receivedBytes == 300_000)
            #expect(!done.uploadHandle.isEmpty)
            // A repeated final chunk on B answers the same handle.
            let again = try await nodes.b.receive(Self.chunk(content, 200_000..<300_000, id: "u", final: true), from: "_alice")
            #expect(again.uploadHandle == done.uploadHandle)

            // B resolves the handle A issued and saves the record through its storage.
            let claim = try await nodes.b.resolveUpload(done.uploadHandle, for: "_alice")
            #expect(claim.sha256 == digest)
            #expect(try await nodes.a.collect().contents == 0)
            #expect(try await nodes.b.collect().contents == 0)
            let saved = try await nodes.storageB.modifyRecords(
                RecordModification(saving: [Self.record("photo", sha256: digest, size: claim.size)]), in: Self.owner,
                by: "_alice")
            #expect(!saved.hasFailures, "\(saved)")

            // Long after the upload handle expired, the record keeps the content on both nodes.
            nodes.time.advance(by: 3 * 86_400)
            #expect(try await nodes.a.collect() == AssetStore.Collection(contents: 0, uploads: 1))
            #expect(try await nodes.b.collect() == AssetStore.Collection(contents: 0, uploads: 0))
            #expect(try await Self.download(nodes.a, digest, size: claim.size) == content)
            #expect(try await Self.download(nodes.b, digest, size: claim.size) == content)
            let fetched = try await nodes.storageA.fetchRecords(
                [try #require(saved.saves.first?.value?.recordID)], desiredKeys: nil, in: Self.owner)
            #expect(
                fetched.first?.value?.fields.first?.value == Wire.FieldValue(kind: .assetValue(Wire.Asset(sha256: digest, size: 300_000))))

            // Deleted, the content goes with the first collection, whichever node runs it.
            _ = try await nodes.storageA.modifyRecords(
                RecordModification(deleting: [try #require(saved.saves.first?.value?.recordID)]), in: Self.owner, by: "_alice")
            #expect(try await nodes.b.collect().contents == 1)
            #expect(try await nodes.a.collect().contents == 0)
            #expect(await nodes.a.hasContent(digest) == false)
            await #expect(throws: AssetStoreError.self) { try await Self.download(nodes.a, digest, size: claim.size) }
        }
    }

    /// Content one node committed for a save still to come (inline content of a modify) is
    /// kept by the other node's collection until the save; content a collection removed is
    /// written again by the next commit.
    @Test func contentCommittedOnOneNodeIsKeptByTheOthersCollection() async throws {
        try await withNodes { nodes in
            let content = Array("inline content committed on node A".utf8)
            let digest = Wire.SHA256.hash(content)
            #expect(try await nodes.a.storeInline([content]) == [digest])
            // No upload marker keeps it: only the commit A noted in the database.
            #expect(try await nodes.b.collect().contents == 0)
            #expect(await nodes.b.hasContent(digest))
            let saved = try await nodes.storageA.modifyRecords(
                RecordModification(saving: [Self.record("inline", sha256: digest, size: UInt64(content.count))]),
                in: Self.owner, by: "_alice")
            #expect(!saved.hasFailures, "\(saved)")
            #expect(try await Self.download(nodes.b, digest, size: UInt64(content.count)) == content)

            // Unreferenced and past its grace: collected; committed again: back.
            _ = try await nodes.storageB.modifyRecords(
                RecordModification(deleting: [try #require(saved.saves.first?.value?.recordID)]), in: Self.owner, by: "_alice")
            nodes.time.advance(by: 2 * 86_400)
            #expect(try await nodes.a.collect().contents == 1)
            #expect(await nodes.b.hasContent(digest) == false)
            #expect(try await nodes.b.storeInline([content]) == [digest])
            #expect(try await nodes.a.collect().contents == 0)
            #expect(await nodes.a.hasContent(digest))
        }
    }

    /// Commits on one node while both nodes collect: whenever a commit returned, the content is
    /// there until its save, whatever the collections did; two collections of one content
    /// do not fail each other.
    @Test func concurrentCommitsAndCollectionsNeverLoseCommittedContent() async throws {
        try await withNodes { nodes in
            let contents = (0..<20).map { Array("content \($0)".utf8) }
            for round in 0..<5 {
                // Each round ends past the grace of the round before.
                nodes.time.advance(by: 2 * 86_400)
                async let collectingA: Void = Self.collect(nodes.a, times: 3)
                async let collectingB: Void = Self.collect(nodes.b, times: 3)
                for content in contents {
                    let digest = try #require(try await nodes.a.storeInline([content]).first)
                    #expect(await nodes.a.hasContent(digest), "round \(round)")
                }
                _ = try await (collectingA, collectingB)
                for content in contents {
                    #expect(await nodes.b.hasContent(Wire.SHA256.hash(content)), "round \(round): kept within its grace")
                }
            }
        }
    }
}
