import CirrusStore
import CirrusWire
import NIOCore

extension StorageExecutor {
    /// The largest chunk a download event carries: well inside the default 4 MiB frame.
    static let maximumDownloadChunk = 2 << 20

    /// One chunk of an upload (`UploadAsset`): stored, and answered with the bytes the server
    /// has and, after the final chunk, the upload handle.
    func uploadAsset(_ request: Wire.UploadAssetRequest, _ context: Context) async throws -> OperationCompletion {
        guard let assets = self.assets else { return Self.noAssetStore }
        do {
            let result = try await assets.receive(request, from: context.caller.userRecordName)
            return .success(.uploadAsset(result))
        } catch let error as AssetStoreError {
            return OperationCompletion(error: error.operationError)
        }
    }

    /// A download (`DownloadAsset`): the content a download handle names, from an offset, as
    /// chunk events under the stream's flow control, then its size and SHA-256.
    func downloadAsset(_ request: Wire.DownloadAssetRequest, _ context: Context) async throws -> OperationCompletion {
        guard let assets = self.assets else { return Self.noAssetStore }
        let file: AssetFile
        let claim: AssetHandleSealer.Claim
        do {
            (file, claim) = try await assets.openDownload(request.downloadHandle, for: context.caller.userRecordName)
        } catch let error as AssetStoreError {
            return OperationCompletion(error: error.operationError)
        }
        guard request.offset <= claim.size else {
            return .failure(.invalidArguments, "offset \(request.offset) is past the asset's \(claim.size) bytes")
        }
        let end = request.length == 0 ? claim.size : min(claim.size, request.offset &+ request.length)
        let chunk = request.chunkBytes == 0
            ? AssetStore.defaultChunkBytes : min(max(Int(request.chunkBytes), 4096), Self.maximumDownloadChunk)
        var offset = request.offset
        let allocator = ByteBufferAllocator()
        while offset < end {
            try Task.checkCancellation()
            let count = Int(min(UInt64(chunk), end - offset))
            // Read into the buffer the socket writes from: the content is not copied again.
            var bytes = allocator.buffer(capacity: count)
            do {
                try file.read(at: offset, count: count, into: &bytes)
            } catch {
                return OperationCompletion(error: error.operationError)
            }
            guard bytes.readableBytes > 0 else {
                return .failure(.assetFileModified, "the stored asset is shorter than its \(claim.size) bytes")
            }
            let read = bytes.readableBytes
            try await context.stream.emitAssetChunk(offset: offset, data: bytes)
            offset += UInt64(read)
        }
        return .success(.downloadAsset(Wire.DownloadAssetResult(size: claim.size, sha256: claim.sha256)))
    }

    static var noAssetStore: OperationCompletion {
        .failure(.serverRejectedRequest, "this server keeps no asset files")
    }

    /// A modification with its assets' content in the asset store: each upload handle
    /// resolved for the caller (its checksum and size filled in), each inline content written
    /// to a file. A record whose asset cannot be stored is refused (``RecordModification/refusals``)
    /// with its error. Without an asset store inline content stays inline and upload handles
    /// are refused. A record refused already (``RecordModification/refusals``) is left as it is.
    nonisolated(nonsending) func storingAssets(_ modification: RecordModification, caller: ClientIdentity) async -> RecordModification {
        var result = modification
        // Where each inline content sits (record, field, list element or -1), stored in one batch.
        var inline: [(record: Int, field: Int, element: Int, bytes: [UInt8])] = []
        for index in result.recordsToSave.indices
        where result.refusals[index] == nil && result.recordsToSave[index].hasAssets {
            var record = result.recordsToSave[index]
            var found: [(record: Int, field: Int, element: Int, bytes: [UInt8])] = []
            do {
                for f in record.fields.indices {
                    switch record.fields[f].value?.kind {
                    case .assetValue(var asset):
                        if let bytes = try await Self.store(&asset, in: self.assets, caller: caller) {
                            found.append((index, f, -1, bytes))
                        }
                        record.fields[f].value = Wire.FieldValue(kind: .assetValue(asset))
                    case .assetList(var list):
                        for a in list.values.indices {
                            if let bytes = try await Self.store(&list.values[a], in: self.assets, caller: caller) {
                                found.append((index, f, a, bytes))
                            }
                        }
                        record.fields[f].value = Wire.FieldValue(kind: .assetList(list))
                    default:
                        continue
                    }
                }
                result.recordsToSave[index] = record
                inline += found
            } catch let error as AssetStoreError {
                result.refusals[index] = ItemFailure(Self.itemCode(error.code), error.message)
            } catch {
                result.refusals[index] = ItemFailure(.internalError, "cannot store the asset: \(error)")
            }
        }
        guard let assets = self.assets, !inline.isEmpty else { return result }
        do {
            _ = try await assets.storeInline(inline.map(\.bytes))
            for place in inline {
                // Checked against its size and checksum by `store`: the content is a file now.
                Self.markStored(&result.recordsToSave[place.record].fields[place.field], element: place.element)
            }
        } catch {
            let failure = (error as? AssetStoreError).map { ItemFailure(Self.itemCode($0.code), $0.message) }
                ?? ItemFailure(.internalError, "cannot store the asset: \(error)")
            for place in inline { result.refusals[place.record] = failure }
        }
        return result
    }

    /// Points an inline asset (or list element) at the asset store's copy of its content.
    private static func markStored(_ field: inout Wire.RecordField, element: Int) {
        switch field.value?.kind {
        case .assetValue(var asset):
            asset.content = .uploadHandle(RecordModification.fileContentHandle)
            field.value = Wire.FieldValue(kind: .assetValue(asset))
        case .assetList(var list) where list.values.indices.contains(element):
            list.values[element].content = .uploadHandle(RecordModification.fileContentHandle)
            field.value = Wire.FieldValue(kind: .assetList(list))
        default:
            break
        }
    }

    private static func itemCode(_ code: Wire.ErrorCode) -> ItemFailure.Code {
        switch code {
        case .permissionFailure: .permissionFailure
        case .assetFileNotFound: .assetFileNotFound
        case .assetFileModified: .assetFileModified
        case .limitExceeded: .limitExceeded
        case .quotaExceeded: .quotaExceeded
        case .invalidArguments: .invalidArguments
        default: .internalError
        }
    }

    /// Resolves an upload handle into the asset (checksum, size, the file-content marker), or
    /// checks inline content and answers it for the batch (checksum filled in); nil otherwise.
    private static func store(
        _ asset: inout Wire.Asset, in assets: AssetStore?, caller: ClientIdentity
    ) async throws -> [UInt8]? {
        switch asset.content {
        case .uploadHandle(let handle):
            guard let assets else {
                throw AssetStoreError(code: .assetFileNotFound, message: "this server keeps no uploaded asset files")
            }
            let claim = try await assets.resolveUpload(handle, for: caller.userRecordName)
            if !asset.sha256.isEmpty && asset.sha256 != claim.sha256 {
                throw AssetStoreError(code: .assetFileModified, message: "the asset's SHA-256 is not its upload's")
            }
            asset.sha256 = claim.sha256
            asset.size = claim.size
            asset.content = .uploadHandle(RecordModification.fileContentHandle)
        case .inlineData(let bytes):
            guard assets != nil else { return nil }
            guard asset.size == UInt64(bytes.count) else {
                throw AssetStoreError(code: .assetFileModified, message: "asset size \(asset.size) but \(bytes.count) bytes sent")
            }
            let digest = Wire.SHA256.hash(bytes)
            if !asset.sha256.isEmpty && asset.sha256 != digest {
                throw AssetStoreError(code: .assetFileModified, message: "asset content does not match its SHA-256")
            }
            asset.sha256 = digest
            return bytes
        case .downloadHandle, nil:
            return nil
        }
        return nil
    }
}
