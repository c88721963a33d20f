import CirrusKit
import CirrusModel
import CirrusTestSupport
import Foundation
import Testing

/// A real `cirrusd` whose files cannot grow past 16 MiB (`ulimit -f`), as on a disk that fills
/// up while an asset is being written: the write that hits the limit fails the asset with
/// `quotaExceeded`, the server keeps running, and nothing already stored is touched.
@Suite("cirrusd when the disk fills up mid-write", .serialized)
struct DiskFullTests {
    private static func file(bytes: Int, seed: UInt64) throws -> URL {
        var generator = SplitMix64(seed: seed)
        var data = [UInt8](repeating: 0, count: bytes)
        for index in stride(from: 0, to: bytes, by: 8) {
            var word = generator.next()
            for offset in index..<min(index + 8, bytes) {
                data[offset] = UInt8(truncatingIfNeeded: word)
                word >>= 8
            }
        }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("disk-full-\(UUID().uuidString).bin")
        try Data(data).write(to: url)
        return url
    }

    @Test func anAssetWhoseWriteFailsIsRefusedAndTheServerGoesOn() async throws {
        let server = try CirrusdProcess(fileSizeLimitKiB: 16 * 1024)
        let large = try Self.file(bytes: 24 << 20, seed: 1)
        let small = try Self.file(bytes: 4 << 10, seed: 2)
        defer {
            try? FileManager.default.removeItem(at: large)
            try? FileManager.default.removeItem(at: small)
        }
        let configuration = CirrusClientConfiguration(
            host: "127.0.0.1", port: server.port, trustRootsPath: Paths.certificate("ca.pem"),
            certificateChainPath: Paths.certificate("alice.pem"), privateKeyPath: Paths.certificate("alice-key.pem"))
        let database = CKContainer(identifier: "iCloud.com.example.disk", configuration: configuration).privateCloudDatabase

        let before = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "before"))
        before["title"] = "saved before the disk filled"
        _ = try await database.save(before)

        let big = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "big"))
        big["file"] = CKAsset(fileURL: large)
        do {
            _ = try await database.save(big)
            Issue.record("a 24 MiB asset was saved on a server that cannot write 16 MiB")
        } catch let error as CKError {
            #expect(error.code == .quotaExceeded, "\(error)")
            #expect(error.localizedDescription.contains("out of disk space"), "\(error)")
        }
        #expect(server.process.isRunning, "a failed write must not end the server (SIGXFSZ)")

        // Everything else still works: what was stored, a new record, a small asset.
        #expect(try await database.record(for: before.recordID)["title"] as? String == "saved before the disk filled")
        let after = CKRecord(recordType: "Doc", recordID: CKRecord.ID(recordName: "after"))
        after["file"] = CKAsset(fileURL: small)
        _ = try await database.save(after)
        let fetched = try await database.record(for: after.recordID)
        let asset = try #require(fetched["file"] as? CKAsset)
        let fileURL = try #require(asset.fileURL)
        #expect(try Data(contentsOf: fileURL) == Data(contentsOf: small))
        await #expect(throws: CKError.self) { _ = try await database.record(for: big.recordID) }
    }
}
