import CirrusModel
import CirrusWire
import Foundation

extension AssetTransfer {
    /// Uploads the file at `url` — `size` bytes whose SHA-256 is `digest` — as upload `uploadID`
    /// and answers its upload handle. `progress` gets the bytes the server has after each chunk.
    ///
    /// After a lost connection it asks the server how much it has (an empty chunk) and goes on
    /// from there; an upload ID finished before answers its handle at once. With `resuming` it
    /// asks first (an upload another connection began).
    ///
    /// - throws: `CKError`: the server's refusal (`limitExceeded`, `quotaExceeded`,
    ///   `assetFileModified` when the file changed while it was read …), `assetFileNotFound`
    ///   when the file cannot be read, `networkFailure` after ``maximumAttempts`` failed tries,
    ///   `operationCancelled` when the task is cancelled.
    func upload(
        _ url: URL, digest: [UInt8], size: UInt64, uploadID: String, resuming: Bool = false,
        progress: @Sendable (UInt64) -> Void = { _ in }
    ) async throws(CKError) -> String {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw CKError(.assetFileNotFound, message: "cannot read asset file \(url.path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var offset: UInt64 = 0
        var failures = 0
        var probe = resuming
        while true {
            if Task.isCancelled { throw CKError(.operationCancelled, message: "the asset upload was cancelled") }
            var request = Wire.UploadAssetRequest(uploadID: uploadID, totalSize: size, sha256: digest)
            if !probe {
                let count = Int(min(UInt64(self.uploadChunkBytes), size - offset))
                request.offset = offset
                request.data = try Self.read(fd, at: offset, count: count, path: url.path)
                request.isFinal = offset + UInt64(count) == size
            }
            do throws(CKError) {
                let complete = try await self.run(.uploadAsset(request))
                guard case .uploadAsset(let result)? = complete.result else {
                    throw CKError(.internalError, message: "the server answered an upload chunk without its result")
                }
                failures = 0
                probe = false
                if !result.uploadHandle.isEmpty {
                    progress(size)
                    return result.uploadHandle
                }
                if request.isFinal {
                    throw CKError(.internalError, message: "the server finished the upload without a handle")
                }
                offset = min(result.receivedBytes, size)
                progress(offset)
            } catch {
                guard Self.isRetryable(error) else { throw error }
                failures += 1
                guard failures <= self.maximumAttempts else { throw error }
                try await Self.backoff(failures)
                probe = true
            }
        }
    }

    /// `count` bytes of the file at `offset`.
    static func read(_ fd: Int32, at offset: UInt64, count: Int, path: String) throws(CKError) -> [UInt8] {
        var failed = false
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var done = 0
            while done < count {
                let n = pread(fd, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 {
                    failed = true
                    break
                }
                done += n
            }
            initialized = done
        }
        guard !failed else {
            throw CKError(.assetFileModified, message: "asset file \(path) ended or failed before its \(count) bytes at \(offset)")
        }
        return bytes
    }
}
