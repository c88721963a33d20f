@testable import CirrusKit
import CirrusModel
import CirrusServer
import CirrusTestSupport
import CirrusWire
import NIOConcurrencyHelpers
import Foundation
import Testing

@Suite("Assets streamed end to end")
struct AssetStreamingEndToEndTests {
    /// An asset three times the frame size goes up in chunks with per-record progress, is
    /// stored once as a content file, and comes back as a file the client owns.
    @Test func largeAssetStreamsUpAndDownWithProgress() async throws {
        let source = try makeAssetFile(bytes: 12 << 20, seed: 1)
        defer { try? FileManager.default.removeItem(at: source) }
        try await withStack(clock: nil) { container, internals in
            let database = container("alice").privateCloudDatabase
            let video = CKRecord(recordType: "Video", recordID: CKRecord.ID(recordName: "v1"))
            video["file"] = CKAsset(fileURL: source)
            let copy = CKRecord(recordType: "Video", recordID: CKRecord.ID(recordName: "v2"))
            copy["file"] = CKAsset(fileURL: source)
            let (progress, saved, error) = await runModify(
                CKModifyRecordsOperation(recordsToSave: [video, copy]), on: database)
            #expect(error == nil)
            #expect(saved.count == 2)
            #expect(progress.count >= 4)
            #expect(progress.last == 1.0)
            #expect(progress.allSatisfy { $0 > 0 && $0 <= 1 })
            // The saved record's asset is the local file it was uploaded from.
            #expect((saved.first?["file"] as? CKAsset)?.fileURL == source)
            // Two records, one content.
            #expect(contentFiles(under: internals.assets.directory).count == 1)

            try forgetDownloaded(source)
            let fetched = try await database.record(for: video.recordID)
            let asset = try #require(fetched["file"] as? CKAsset)
            let url = try #require(asset.fileURL)
            #expect(url != source)
            #expect(try Data(contentsOf: url) == Data(contentsOf: source))
        }
    }

    /// Many small assets in one modify: some inline, the rest uploaded; all saved and readable.
    @Test func manySmallAssetsInOneModify() async throws {
        var files: [URL] = []
        defer { for file in files { try? FileManager.default.removeItem(at: file) } }
        for i in 0..<300 { files.append(try makeAssetFile(bytes: 10 << 10, seed: UInt8(truncatingIfNeeded: i))) }
        try await withStack(clock: nil) { container, internals in
            let database = container("alice").privateCloudDatabase
            let records = files.enumerated().map { i, file in
                let record = CKRecord(recordType: "Thumb", recordID: CKRecord.ID(recordName: "t\(i)"))
                record["image"] = CKAsset(fileURL: file)
                return record
            }
            let (_, saved, error) = await runModify(CKModifyRecordsOperation(recordsToSave: records), on: database)
            #expect(error == nil)
            #expect(saved.count == 300)
            #expect(contentFiles(under: internals.assets.directory).count == Set(files.map { try? Data(contentsOf: $0) }).count)
            for i in [0, 150, 299] {
                let fetched = try await database.record(for: CKRecord.ID(recordName: "t\(i)"))
                let url = try #require((fetched["image"] as? CKAsset)?.fileURL)
                #expect(try Data(contentsOf: url) == Data(contentsOf: files[i]))
            }
        }
    }

    /// An upload begun on one connection continues on another of the same user from the bytes
    /// the server has, and its handle saves the record.
    @Test func uploadResumesFromAnyConnectionOfTheUser() async throws {
        let source = try makeAssetFile(bytes: 8 << 20, seed: 2)
        defer { try? FileManager.default.removeItem(at: source) }
        let (digest, size) = try CKAsset.digestOfFile(at: source)
        let half = [UInt8](try Data(contentsOf: source).prefix(3 << 20))
        try await withStack(clock: nil) { container, _ in
            let first = AssetTransfer.privateDatabase(of: container("alice"))
            let complete = try await first.run(uploadChunk("u-resume", offset: 0, half, total: size, sha256: digest))
            guard case .uploadAsset(let result)? = complete.result else { Issue.record("no result"); return }
            #expect(result.receivedBytes == 3 << 20)
            #expect(result.uploadHandle.isEmpty)

            let other = container("alice")  // another container: another connection
            let progress = NIOLockedValueBoxArray()
            let handle = try await AssetTransfer.privateDatabase(of: other).upload(
                source, digest: digest, size: size, uploadID: "u-resume", resuming: true
            ) { progress.append($0) }
            #expect(progress.values.first == 3 << 20)
            #expect(!handle.isEmpty)

            var record = Wire.Record(
                recordID: Wire.RecordID(recordName: "r1", zoneID: Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "__defaultOwner__")),
                recordType: "Doc")
            record.fields = [
                Wire.RecordField(key: "file", value: Wire.FieldValue(kind: .assetValue(Wire.Asset(content: .uploadHandle(handle)))))
            ]
            _ = try await first.run(.modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: [record])))
            try forgetDownloaded(source)
            let fetched = try await other.privateCloudDatabase.record(for: CKRecord.ID(recordName: "r1"))
            let url = try #require((fetched["file"] as? CKAsset)?.fileURL)
            #expect(try Data(contentsOf: url) == Data(contentsOf: source))
        }
    }
}

extension AssetStreamingEndToEndTests {
    /// An upload cut short (here: its first chunk, sent by another client of the same user) is
    /// continued by a later modify of the same file: its progress starts where the server was.
    @Test func aLaterModifyContinuesAnUploadCutShort() async throws {
        let source = try makeAssetFile(bytes: 9 << 20, seed: 5)
        defer { try? FileManager.default.removeItem(at: source) }
        let (digest, size) = try CKAsset.digestOfFile(at: source)
        let first = [UInt8](try Data(contentsOf: source).prefix(3 << 20))
        let uploadID = "sha256-\(digest.map { String(format: "%02x", $0) }.joined())-\(size)"
        try await withStack(clock: nil) { container, _ in
            _ = try await AssetTransfer.privateDatabase(of: container("alice"))
                .run(uploadChunk(uploadID, offset: 0, first, total: size, sha256: digest))
            let record = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "later"))
            record["file"] = CKAsset(fileURL: source)
            let (progress, saved, error) = await runModify(
                CKModifyRecordsOperation(recordsToSave: [record]), on: container("alice").privateCloudDatabase)
            #expect(error == nil)
            #expect(saved.count == 1)
            #expect(abs((progress.first ?? 0) - 1.0 / 3) < 0.01)
            #expect(progress.last == 1.0)
        }
    }
}

/// Values collected from a `@Sendable` callback.
final class NIOLockedValueBoxArray: Sendable {
    private let box = NIOLockedValueBox<[UInt64]>([])
    func append(_ value: UInt64) { self.box.withLockedValue { $0.append(value) } }
    var values: [UInt64] { self.box.withLockedValue { $0 } }
}

@Suite("Assets across cut connections")
struct AssetCutConnectionTests {
    /// A long-lived modify whose connection is cut in the middle of its upload finishes on the
    /// next connection from the bytes the server had; a fetch whose download is cut goes on
    /// from the bytes written. Each side ends with the same bytes.
    @Test func uploadAndDownloadSurviveCutConnections() async throws {
        let source = try makeAssetFile(bytes: 24 << 20, seed: 30)
        defer { try? FileManager.default.removeItem(at: source) }
        try await withStack(clock: nil) { _, internals in
            let connections = NIOLockedValueBox(0)
            // The second connection (after the upload's cut) is cut again mid-download.
            let proxy = try await CuttingProxy.start(targetPort: internals.port) {
                let count = connections.withLockedValue { $0 += 1; return $0 }
                return count == 2 ? 16 << 20 : nil
            }
            let container = CKContainer(
                identifier: "iCloud.com.example.notes", configuration: TestCertificates.client(port: proxy.port, user: "alice"))
            let database = container.privateCloudDatabase
            let record = CKRecord(recordType: "Video", recordID: CKRecord.ID(recordName: "cut"))
            record["file"] = CKAsset(fileURL: source)
            let operation = CKModifyRecordsOperation(recordsToSave: [record])
            operation.configuration.isLongLived = true
            let cut = NIOLockedValueBox(false)
            let progress = NIOLockedValueBox<[Double]>([])
            operation.perRecordProgressBlock = { _, value in
                progress.withLockedValue { $0.append(value) }
                if value >= 0.25, !cut.withLockedValue({ $0 }) {
                    cut.withLockedValue { $0 = true }
                    proxy.cutAll()
                }
            }
            let error: (any Error)? = await withCheckedContinuation { continuation in
                operation.modifyRecordsResultBlock = { result in
                    if case .failure(let error) = result { continuation.resume(returning: error) } else {
                        continuation.resume(returning: nil)
                    }
                }
                database.add(operation)
            }
            #expect(error == nil)
            #expect(cut.withLockedValue { $0 })
            #expect(progress.withLockedValue { $0.last } == 1.0)

            try forgetDownloaded(source)
            let fetched = try await database.record(for: record.recordID)
            let url = try #require((fetched["file"] as? CKAsset)?.fileURL)
            #expect(try Data(contentsOf: url) == Data(contentsOf: source))
            #expect(proxy.cutCount >= 2)
            await proxy.stop()
        }
    }
}
