@testable import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Foundation
import NIOConcurrencyHelpers

/// A file of `count` bytes of a pattern that differs by `seed`, among the test process's
/// temporary files (removed when it exits).
func makeAssetFile(bytes count: Int, seed: UInt8) throws -> URL {
    let url = TemporaryFiles.url(for: "asset.bin")
    var bytes = [UInt8](repeating: 0, count: count)
    var state = UInt32(seed) &+ 1
    for i in bytes.indices {
        state = state &* 1_664_525 &+ 1_013_904_223
        bytes[i] = UInt8(truncatingIfNeeded: state >> 24)
    }
    try Data(bytes).write(to: url)
    return url
}

/// The content files of the server's asset store.
func contentFiles(under directory: String) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: directory + "/content")) ?? []
}

/// Runs `operation` on `database` to its end; the progress its records reported and its result.
func runModify(
    _ operation: CKModifyRecordsOperation, on database: CKDatabase
) async -> (progress: [Double], saved: [CKRecord], error: (any Error)?) {
    let progress = NIOLockedValueBox<[Double]>([])
    let saved = NIOLockedValueBox<[CKRecord]>([])
    operation.perRecordProgressBlock = { _, value in progress.withLockedValue { $0.append(value) } }
    operation.perRecordSaveBlock = { _, result in
        if case .success(let record) = result { saved.withLockedValue { $0.append(record) } }
    }
    let error: (any Error)? = await withCheckedContinuation { continuation in
        operation.modifyRecordsResultBlock = { result in
            switch result {
            case .success: continuation.resume(returning: nil)
            case .failure(let error): continuation.resume(returning: error)
            }
        }
        database.add(operation)
    }
    return (progress.withLockedValue { $0 }, saved.withLockedValue { $0 }, error)
}

/// One upload chunk as a request.
func uploadChunk(
    _ id: String, offset: UInt64, _ data: [UInt8], total: UInt64, sha256: [UInt8], final: Bool = false
) -> Wire.Open.Request {
    .uploadAsset(
        Wire.UploadAssetRequest(
            uploadID: id, offset: offset, data: data, totalSize: total, sha256: sha256, isFinal: final))
}

extension AssetTransfer {
    /// The private database's transfer of `container`.
    static func privateDatabase(of container: CKContainer) -> AssetTransfer {
        AssetTransfer(container: container, scope: .private)
    }

    /// The error code `request` fails with, nil if it succeeds.
    func failure(of request: Wire.Open.Request) async -> CKError.Code? {
        do {
            _ = try await self.run(request)
            return nil
        } catch {
            return error.code
        }
    }
}

/// Removes the client's downloaded copy of `file`'s content (left by an earlier run), so a
/// fetch downloads it.
func forgetDownloaded(_ file: URL) throws {
    let (digest, _) = try CKAsset.digestOfFile(at: file)
    let wire = Wire.Asset(sha256: digest, fileName: file.lastPathComponent)
    try? FileManager.default.removeItem(at: CKAsset.contentFile(for: wire, in: CKAsset.defaultContentDirectory))
}
