@testable import CirrusKit
import CirrusModel
import CirrusServer
import CirrusWire
import Foundation
import Testing

@Suite("Assets: bad input")
struct AssetBadInputTests {
    static let zone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "__defaultOwner__")

    static func record(_ name: String, asset: Wire.Asset) -> Wire.Record {
        var record = Wire.Record(recordID: Wire.RecordID(recordName: name, zoneID: zone), recordType: "Doc")
        record.fields = [Wire.RecordField(key: "file", value: Wire.FieldValue(kind: .assetValue(asset)))]
        return record
    }

    /// A chunk too far ahead, a chunk whose gap is never filled, a chunk past the declared
    /// size, a final chunk before the end, and a declaration that changes are refused; the
    /// upload goes on from where it was.
    @Test func chunksOutOfOrderOrPastTheSizeAreRefused() async throws {
        let bytes = [UInt8](repeating: 7, count: 1000)
        let digest = Wire.SHA256.hash(bytes)
        var limits = AssetStore.Limits()
        limits.reorderWindowBytes = 300
        limits.reorderWaitSeconds = 0.5
        try await withStack(clock: nil, assetLimits: limits) { container, _ in
            let alice = AssetTransfer.privateDatabase(of: container("alice"))
            #expect(await alice.failure(of: uploadChunk("u1", offset: 0, Array(bytes[0..<400]), total: 1000, sha256: digest)) == nil)
            // Beyond the window: refused at once. Within it, but the gap never filled: refused
            // after the wait.
            #expect(await alice.failure(of: uploadChunk("u1", offset: 800, Array(bytes[800..<900]), total: 1000, sha256: digest)) == .invalidArguments)
            #expect(await alice.failure(of: uploadChunk("u1", offset: 500, Array(bytes[500..<600]), total: 1000, sha256: digest)) == .invalidArguments)
            #expect(await alice.failure(of: uploadChunk("u1", offset: 400, Array(repeating: 7, count: 700), total: 1000, sha256: digest)) == .invalidArguments)
            #expect(await alice.failure(of: uploadChunk("u1", offset: 400, Array(bytes[400..<500]), total: 1000, sha256: digest, final: true)) == .invalidArguments)
            #expect(await alice.failure(of: uploadChunk("u1", offset: 500, [], total: 999, sha256: digest)) == .invalidArguments)
            #expect(await alice.failure(of: uploadChunk("u1", offset: .max, [1], total: 1000, sha256: digest)) == .invalidArguments)
            // What was refused changed nothing: the rest completes the upload.
            let complete = try await alice.run(uploadChunk("u1", offset: 400, Array(bytes[400...]), total: 1000, sha256: digest, final: true))
            guard case .uploadAsset(let result)? = complete.result else { Issue.record("no result"); return }
            #expect(result.receivedBytes == 1000)
            #expect(!result.uploadHandle.isEmpty)
        }
    }

    /// Chunks in flight together may reach the server in any order within the window: each
    /// waits for the ones before it, and the content assembles in order.
    @Test func chunksWithinTheWindowAssembleInOrder() async throws {
        let bytes = (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let digest = Wire.SHA256.hash(bytes)
        try await withStack(clock: nil) { container, _ in
            let alice = AssetTransfer.privateDatabase(of: container("alice"))
            async let last = alice.failure(of: uploadChunk("w", offset: 2000, Array(bytes[2000...]), total: 3000, sha256: digest, final: true))
            async let middle = alice.failure(of: uploadChunk("w", offset: 1000, Array(bytes[1000..<2000]), total: 3000, sha256: digest))
            try await Task.sleep(for: .milliseconds(50))
            let first = await alice.failure(of: uploadChunk("w", offset: 0, Array(bytes[0..<1000]), total: 3000, sha256: digest))
            #expect(first == nil)
            #expect(await middle == nil)
            #expect(await last == nil)
            // Asking again answers the handle of the finished upload.
            let again = try await alice.run(uploadChunk("w", offset: 0, [], total: 3000, sha256: digest))
            guard case .uploadAsset(let result)? = again.result else { Issue.record("no result"); return }
            #expect(result.receivedBytes == 3000)
            #expect(!result.uploadHandle.isEmpty)
        }
    }

    /// Content that does not match its declared SHA-256 is never stored.
    @Test func digestMismatchStoresNothing() async throws {
        let bytes = [UInt8](repeating: 1, count: 5000)
        try await withStack(clock: nil) { container, internals in
            let alice = AssetTransfer.privateDatabase(of: container("alice"))
            let wrong = Wire.SHA256.hash([UInt8](repeating: 2, count: 5000))
            #expect(await alice.failure(of: uploadChunk("u2", offset: 0, bytes, total: 5000, sha256: wrong, final: true)) == .assetFileModified)
            #expect(contentFiles(under: internals.assets.directory).isEmpty)
            // Inline content with a wrong checksum fails its record, and stores nothing either.
            let asset = Wire.Asset(sha256: wrong, size: 5000, content: .inlineData(bytes))
            let error = await alice.failure(of: .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: [Self.record("d1", asset: asset)])))
            #expect(error == .partialFailure)
            #expect(contentFiles(under: internals.assets.directory).isEmpty)
            // The upload was discarded: the same upload ID starts over.
            let right = Wire.SHA256.hash(bytes)
            #expect(await alice.failure(of: uploadChunk("u2", offset: 0, bytes, total: 5000, sha256: right, final: true)) == nil)
        }
    }

    /// Another user's upload handle saves nothing, and another user's download handle reads nothing.
    @Test func handlesOfAnotherUserAreRefused() async throws {
        let source = try makeAssetFile(bytes: 1 << 20, seed: 3)
        defer { try? FileManager.default.removeItem(at: source) }
        let (digest, size) = try CKAsset.digestOfFile(at: source)
        try await withStack(clock: nil) { container, _ in
            let alice = AssetTransfer.privateDatabase(of: container("alice"))
            let bob = AssetTransfer.privateDatabase(of: container("bob"))
            let handle = try await alice.upload(source, digest: digest, size: size, uploadID: "shared")
            let stolen = Wire.ModifyRecordsRequest(
                recordsToSave: [Self.record("b1", asset: Wire.Asset(content: .uploadHandle(handle)))])
            do {
                _ = try await bob.run(.modifyRecords(stolen))
                Issue.record("bob saved alice's upload")
            } catch let error as CKError {
                #expect(error.code == .partialFailure)
                #expect(error.partialErrorsByItemID?.values.contains { ($0 as? CKError)?.code == .permissionFailure } == true)
            }
            // A forged handle is refused too.
            let forged = Wire.ModifyRecordsRequest(
                recordsToSave: [Self.record("b2", asset: Wire.Asset(sha256: digest, size: size, content: .uploadHandle("u1.AAAA")))])
            #expect(await bob.failure(of: .modifyRecords(forged)) == .partialFailure)

            _ = try await alice.run(.modifyRecords(Wire.ModifyRecordsRequest(
                recordsToSave: [Self.record("a1", asset: Wire.Asset(content: .uploadHandle(handle)))])))
            let record = try await container("alice").privateCloudDatabase.record(for: CKRecord.ID(recordName: "a1"))
            let wire = try #require((record["file"] as? CKAsset)?.wireAsset)
            let target = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: target) }
            do {
                try await bob.download(wire, to: target)
                Issue.record("bob read alice's asset")
            } catch let error as CKError {
                #expect(error.code == .permissionFailure)
            }
            #expect(!FileManager.default.fileExists(atPath: target.path))
            try await alice.download(wire, to: target)
            #expect(try Data(contentsOf: target) == Data(contentsOf: source))
        }
    }

    /// A download after the record was deleted fails with assetFileNotFound and leaves no file.
    @Test func downloadOfADeletedAssetFails() async throws {
        let source = try makeAssetFile(bytes: 300 << 10, seed: 4)
        defer { try? FileManager.default.removeItem(at: source) }
        try await withStack(clock: nil) { container, _ in
            let database = container("alice").privateCloudDatabase
            let record = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "gone"))
            record["file"] = CKAsset(fileURL: source)
            _ = try await database.save(record)
            let fetched = try await database.record(for: record.recordID)
            let wire = try #require((fetched["file"] as? CKAsset)?.wireAsset)
            _ = try await database.deleteRecord(withID: record.recordID)
            let target = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-\(UUID().uuidString)")
            do {
                try await AssetTransfer.privateDatabase(of: container("alice")).download(wire, to: target)
                Issue.record("a deleted asset was downloaded")
            } catch let error as CKError {
                #expect(error.code == .assetFileNotFound)
            }
            #expect(!FileManager.default.fileExists(atPath: target.path))
        }
    }

    /// An asset above `maxAssetBytes` gets limitExceeded; uploads beyond the user's quota get
    /// quotaExceeded (the records already saved stay).
    @Test func limitsAndQuotasUseCloudKitCodes() async throws {
        var files: [URL] = []
        defer { for file in files { try? FileManager.default.removeItem(at: file) } }
        for seed in 0..<4 { files.append(try makeAssetFile(bytes: 900 << 10, seed: UInt8(10 + seed))) }
        let limits = AssetStore.Limits(maxAssetBytes: 1 << 20, maxUserBytes: 3 << 20)
        try await withStack(clock: nil, assetLimits: limits) { container, _ in
            let alice = AssetTransfer.privateDatabase(of: container("alice"))
            let big = Wire.SHA256.hash([UInt8](repeating: 0, count: 2 << 20))
            #expect(await alice.failure(of: uploadChunk("big", offset: 0, [], total: 2 << 20, sha256: big)) == .limitExceeded)

            let database = container("alice").privateCloudDatabase
            for i in 0..<3 {
                let record = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "q\(i)"))
                record["file"] = CKAsset(fileURL: files[i])
                _ = try await database.save(record)
            }
            let over = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "q3"))
            over["file"] = CKAsset(fileURL: files[3])
            let (_, saved, error) = await runModify(CKModifyRecordsOperation(recordsToSave: [over]), on: database)
            #expect(saved.isEmpty)
            #expect((error as? CKError)?.code == .quotaExceeded)
            // Another user has a quota of their own.
            let bobs = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "b"))
            bobs["file"] = CKAsset(fileURL: files[3])
            _ = try await container("bob").privateCloudDatabase.save(bobs)
        }
    }

    /// A disk without room for an asset refuses it before anything is written, with a message
    /// saying so; the records without assets in the same modify are saved, and nothing is lost.
    @Test func aFullDiskRefusesTheAssetAndKeepsTheRest() async throws {
        var limits = AssetStore.Limits()
        limits.minimumFreeBytes = UInt64.max / 2  // no disk has this much free: it is "full"
        let source = try makeAssetFile(bytes: 5 << 20, seed: 40)
        let smallFile = try makeAssetFile(bytes: 1000, seed: 41)
        defer {
            try? FileManager.default.removeItem(at: source)
            try? FileManager.default.removeItem(at: smallFile)
        }
        try await withStack(clock: nil, assetLimits: limits) { container, internals in
            let database = container("alice").privateCloudDatabase
            let plain = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "plain"))
            plain["title"] = "no asset"
            let small = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "small"))
            small["file"] = CKAsset(fileURL: smallFile)
            let modify = CKModifyRecordsOperation(recordsToSave: [plain, small])
            modify.isAtomic = false
            let (_, saved, error) = await runModify(modify, on: database)
            #expect(saved.map(\.recordID.recordName) == ["plain"])
            let failure = try #require((error as? CKError)?.partialErrorsByItemID?[small.recordID] as? CKError)
            #expect(failure.code == .quotaExceeded)
            #expect(failure.message?.contains("out of disk space") == true)

            let big = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "big"))
            big["file"] = CKAsset(fileURL: source)
            let (_, none, refused) = await runModify(CKModifyRecordsOperation(recordsToSave: [big]), on: database)
            #expect(none.isEmpty)
            #expect((refused as? CKError)?.code == .quotaExceeded)
            #expect(contentFiles(under: internals.assets.directory).isEmpty)
            #expect(try await database.record(for: plain.recordID)["title"] as? String == "no asset")
        }
    }

    /// An upload never finished expires a lifetime after its last chunk and is collected with
    /// its file; finished content no record refers to goes once its handle expired; content a
    /// record holds stays until the record is deleted.
    @Test func expiredUploadsAndUnreferencedContentAreCollected() async throws {
        let clock = ManualClock()
        let kept = try makeAssetFile(bytes: 400 << 10, seed: 20)
        defer { try? FileManager.default.removeItem(at: kept) }
        try await withStack(clock: clock) { container, internals in
            let alice = AssetTransfer.privateDatabase(of: container("alice"))
            let orphan = [UInt8](repeating: 9, count: 2000)
            _ = try await alice.run(uploadChunk("never", offset: 0, Array(orphan[..<1000]), total: 2000, sha256: Wire.SHA256.hash(orphan)))
            let unsaved = [UInt8](repeating: 8, count: 3000)
            _ = try await alice.run(uploadChunk("unsaved", offset: 0, unsaved, total: 3000, sha256: Wire.SHA256.hash(unsaved), final: true))
            let database = container("alice").privateCloudDatabase
            let record = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "k"))
            record["file"] = CKAsset(fileURL: kept)
            _ = try await database.save(record)
            #expect(contentFiles(under: internals.assets.directory).count == 2)

            // Within the lifetime nothing goes.
            var collected = try await internals.assets.collect()
            #expect(collected == AssetStore.Collection())
            clock.advance(seconds: 25 * 3600)
            try await internals.maintenance.runOnce()
            #expect(contentFiles(under: internals.assets.directory).count == 1)
            // The unfinished upload is gone: asked where to resume, the server has nothing.
            let probe = try await alice.run(uploadChunk("never", offset: 0, [], total: 2000, sha256: Wire.SHA256.hash(orphan)))
            guard case .uploadAsset(let restarted)? = probe.result else { Issue.record("no result"); return }
            #expect(restarted.receivedBytes == 0)

            _ = try await database.deleteRecord(withID: record.recordID)
            collected = try await internals.assets.collect()
            #expect(collected.contents == 1)
            #expect(contentFiles(under: internals.assets.directory).isEmpty)
        }
    }
}
