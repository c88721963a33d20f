import CirrusModel
import CirrusWire
import Dispatch
import Foundation
import NIOConcurrencyHelpers

/// Downloads the assets of fetched records before their callbacks see them, so each fetched
/// `CKAsset` has its `fileURL` (CloudKit's behaviour; `desiredKeys` decides which assets come).
///
/// Files go to `directory` named by their SHA-256: content downloaded once is not downloaded
/// again, and a file there has been checked against its digest.
struct AssetDownloader: Sendable {
    let transfer: AssetTransfer
    let directory: URL
    /// Called as bytes arrive (the operation's request timeout counts them as progress).
    let progress: @Sendable () -> Void

    /// Whether `record` has an asset that comes by download (a download handle instead of
    /// inline content).
    static func hasDownloads(_ record: Wire.Record) -> Bool {
        record.fields.contains { field in
            switch field.value?.kind {
            case .assetValue(let asset): asset.isDownloadHandle
            case .assetList(let list): list.values.contains(where: \.isDownloadHandle)
            default: false
            }
        }
    }

    /// Downloads every asset of `record` that has a download handle and no file yet. It blocks
    /// the calling thread — the operation's serial callback queue, so callbacks keep their
    /// order — until the files are there.
    ///
    /// - throws: `CKError` of the first download that failed.
    func downloadAssets(of record: Wire.Record) throws(CKError) {
        var pending: [Wire.Asset] = []
        var seen = Set<[UInt8]>()
        for field in record.fields {
            let assets: [Wire.Asset]
            switch field.value?.kind {
            case .assetValue(let asset): assets = [asset]
            case .assetList(let list): assets = list.values
            default: continue
            }
            for asset in assets {
                guard case .downloadHandle = asset.content, asset.sha256.count == 32,
                    seen.insert(asset.sha256).inserted,
                    !FileManager.default.fileExists(atPath: CKAsset.contentFile(for: asset, in: self.directory).path)
                else { continue }
                pending.append(asset)
            }
        }
        guard !pending.isEmpty else { return }
        let outcome = NIOLockedValueBox<CKError?>(nil)
        let finished = DispatchSemaphore(value: 0)
        let (transfer, directory, progress) = (self.transfer, self.directory, self.progress)
        Task {
            for asset in pending {
                do throws(CKError) {
                    try await transfer.download(asset, to: CKAsset.contentFile(for: asset, in: directory)) { _ in progress() }
                } catch {
                    outcome.withLockedValue { $0 = error }
                    break
                }
            }
            finished.signal()
        }
        finished.wait()
        if let error = outcome.withLockedValue({ $0 }) { throw error }
    }
}

extension CKDatabaseOperation {
    /// The downloader of this operation's fetched assets, into `CKAsset.defaultContentDirectory`.
    var assetDownloader: AssetDownloader {
        let (container, scope) = self.target()
        return AssetDownloader(
            transfer: AssetTransfer(container: container, scope: scope),
            directory: CKAsset.defaultContentDirectory,
            progress: { [weak self] in self?.noteProgress() })
    }
}

extension Wire.Asset {
    /// The asset's content comes by download (`DownloadAsset`), not inline.
    fileprivate var isDownloadHandle: Bool {
        if case .downloadHandle = self.content { return true }
        return false
    }
}
