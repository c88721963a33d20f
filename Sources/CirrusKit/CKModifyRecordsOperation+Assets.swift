import CirrusModel
import CirrusWire
import Foundation
import NIOConcurrencyHelpers

/// How the assets of one modify travel: small files inline in the request (within a budget
/// that keeps the request inside one frame), the rest uploaded first as chunks and named by
/// their upload handle.
struct AssetUploadPlan: Sendable {
    /// One local file to send.
    struct Item: Sendable {
        let asset: CKAsset
        let url: URL
        let digest: [UInt8]
        let size: UInt64
        /// Indices (in `recordsToSave`) of the records holding it.
        var records: [Int]
        /// Assets with this content (each would carry it inline).
        var uses = 1
        /// Set once uploaded; nil = sent inline.
        var handle: String?
    }

    /// A file at most this large may go inline.
    static let inlineAssetBytes: UInt64 = 256 << 10
    /// Inline bytes one request may carry in all (the request stays inside a 4 MiB frame).
    static let inlineBudgetBytes: UInt64 = 3 << 20
    /// Uploads running at once: 4 when any takes several chunks (each keeps its own chunks in
    /// flight), else 16.
    static func concurrentUploads(_ items: [Item], chunkBytes: Int) -> Int {
        items.contains { $0.size > UInt64(chunkBytes) } ? 4 : 16
    }

    var items: [Item] = []
    /// Item index by asset identity.
    var byAsset: [ObjectIdentifier: Int] = [:]
    /// Item index by content: equal files go up once.
    private var byDigest: [[UInt8]: Int] = [:]

    /// Local files of the records' assets (the keys that will be sent), with their digests.
    ///
    /// - throws: `CKError.assetFileNotFound` for a file that cannot be read.
    init(records: [CKRecord], changedKeysOnly: Bool) throws(CKError) {
        for (index, record) in records.enumerated() {
            for (_, assets) in record.assetsToSend(changedKeysOnly: changedKeysOnly) {
                for asset in assets {
                    // A fetched asset the server has already goes by its checksum alone.
                    guard let url = asset.fileURL, asset.wireAsset?.sha256.count != 32 else { continue }
                    if let known = self.byAsset[ObjectIdentifier(asset)] {
                        if self.items[known].records.last != index { self.items[known].records.append(index) }
                        continue
                    }
                    let (digest, size) = try CKAsset.digestOfFile(at: url)
                    if let same = self.byDigest[digest] {
                        self.byAsset[ObjectIdentifier(asset)] = same
                        self.items[same].uses += 1
                        if self.items[same].records.last != index { self.items[same].records.append(index) }
                        continue
                    }
                    self.byAsset[ObjectIdentifier(asset)] = self.items.count
                    self.byDigest[digest] = self.items.count
                    self.items.append(Item(asset: asset, url: url, digest: digest, size: size, records: [index]))
                }
            }
        }
    }

    /// Which items go up as uploads: all but the small ones that fit the inline budget.
    var uploads: [Int] {
        var inline: UInt64 = 0
        var result: [Int] = []
        for (i, item) in self.items.enumerated() {
            let bytes = item.size * UInt64(item.uses)
            if item.size <= Self.inlineAssetBytes && inline + bytes <= Self.inlineBudgetBytes {
                inline += bytes
            } else {
                result.append(i)
            }
        }
        return result
    }

    /// The wire form of `asset`: its upload handle, its content inline, or (an asset the
    /// server has) its checksum and size.
    func wireAsset(_ asset: CKAsset) throws(CKError) -> Wire.Asset {
        if let wire = asset.wireAsset, wire.sha256.count == 32 {
            return Wire.Asset(sha256: wire.sha256, size: wire.size, fileName: wire.fileName, content: nil)
        }
        if let index = self.byAsset[ObjectIdentifier(asset)], let handle = self.items[index].handle {
            let item = self.items[index]
            return Wire.Asset(
                sha256: item.digest, size: item.size, fileName: item.url.lastPathComponent, content: .uploadHandle(handle))
        }
        return try asset.wireAsset(inlineContent: true)
    }

    /// The local file of each content, for the saved records the server returns.
    var localFiles: [[UInt8]: URL] {
        var files: [[UInt8]: URL] = [:]
        for item in self.items { files[item.digest] = item.url }
        return files
    }
}

extension CKModifyRecordsOperation {
    /// Uploads the files of the records' assets that do not go inline, `concurrentUploads` at
    /// a time, reporting each record's progress as its bytes go out.
    func uploadAssets(
        _ plan: AssetUploadPlan, records: [CKRecord], transfer: AssetTransfer
    ) async throws(CKError) -> AssetUploadPlan {
        var plan = plan
        let uploads = plan.uploads
        var sizes = [UInt64](repeating: 0, count: records.count)
        for item in plan.items {
            for record in item.records { sizes[record] += item.size }
        }
        let totals = sizes
        let sent = NIOLockedValueBox([UInt64](repeating: 0, count: records.count))
        let report: @Sendable (AssetUploadPlan.Item, UInt64) -> Void = { item, delta in
            self.noteProgress()
            let fractions = sent.withLockedValue { sent -> [(Int, Double)] in
                item.records.map { record in
                    sent[record] += delta
                    return (record, totals[record] == 0 ? 1 : Double(sent[record]) / Double(totals[record]))
                }
            }
            self.callbackQueue.async {
                for (record, fraction) in fractions { self.perRecordProgressBlock?(records[record], min(1, fraction)) }
            }
        }
        let items = plan.items
        let results: [(Int, Result<String, CKError>)] = await withTaskGroup(of: (Int, Result<String, CKError>).self) { group in
            var next = 0
            var results: [(Int, Result<String, CKError>)] = []
            func startNext() {
                guard next < uploads.count else { return }
                let index = uploads[next]
                next += 1
                group.addTask {
                    let item = items[index]
                    let last = NIOLockedValueBox<UInt64>(0)
                    do throws(CKError) {
                        // Named by the content: an upload of the same file cut short before (by
                        // this process or another of the same user) goes on where it stopped.
                        let handle = try await transfer.upload(
                            item.url, digest: item.digest, size: item.size,
                            uploadID: "sha256-\(item.digest.map { String(format: "%02x", $0) }.joined())-\(item.size)",
                            resuming: item.size > UInt64(transfer.uploadChunkBytes)
                        ) { received in
                            let delta = last.withLockedValue { last -> UInt64 in
                                defer { last = max(last, received) }
                                return received > last ? received - last : 0
                            }
                            if delta > 0 { report(item, delta) }
                        }
                        return (index, .success(handle))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            let selected = uploads.map { items[$0] }
            for _ in 0..<AssetUploadPlan.concurrentUploads(selected, chunkBytes: transfer.uploadChunkBytes) { startNext() }
            for await result in group {
                results.append(result)
                if case .failure = result.1 {
                    group.cancelAll()
                    continue
                }
                startNext()
            }
            return results
        }
        for (index, result) in results {
            switch result {
            case .success(let handle): plan.items[index].handle = handle
            case .failure(let error): throw error
            }
        }
        // Inline assets go out with the request: their records are done as far as bytes go.
        for (i, item) in plan.items.enumerated() where !uploads.contains(i) {
            report(item, item.size)
        }
        return plan
    }
}
