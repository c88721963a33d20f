import CirrusModel
import CirrusWire
internal import CSystemShims
import Foundation
import NIOConcurrencyHelpers

extension AssetTransfer {
    /// Downloads the content of `asset` (which carries a download handle) to `destination`:
    /// written to a temporary file beside it, checked against the asset's size and SHA-256,
    /// then renamed. `progress` gets the bytes written so far.
    ///
    /// After a lost connection it asks for the rest from the bytes already written.
    ///
    /// - throws: `CKError`: the server's refusal (`assetFileNotFound` for a deleted asset or an
    ///   expired handle, `permissionFailure` for another user's handle),
    ///   `assetFileModified` when the bytes do not match (nothing is kept), `internalError` when
    ///   the file cannot be written, `networkFailure` after ``maximumAttempts`` failed tries.
    func download(
        _ asset: Wire.Asset, to destination: URL, progress: @escaping @Sendable (UInt64) -> Void = { _ in }
    ) async throws(CKError) {
        guard case .downloadHandle(let handle) = asset.content else {
            throw CKError(.assetFileNotFound, message: "the asset has no download handle")
        }
        let directory = destination.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(".\(destination.lastPathComponent).\(UUID().uuidString).download")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw CKError(.internalError, message: "cannot create \(directory.path): \(error)")
        }
        let fd = open(temporary.path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw CKError(.internalError, message: "cannot create \(temporary.path): \(String(cString: strerror(errno)))")
        }
        var kept = false
        defer {
            close(fd)
            if !kept { unlink(temporary.path) }
        }
        let sink = DownloadSink(fd: fd, path: temporary.path, progress: progress)
        var failures = 0
        while true {
            if Task.isCancelled { throw CKError(.operationCancelled, message: "the asset download was cancelled") }
            let offset = sink.written
            let request = Wire.DownloadAssetRequest(
                downloadHandle: handle, offset: offset, length: 0, chunkBytes: self.downloadChunkBytes)
            do throws(CKError) {
                let complete = try await self.run(.downloadAsset(request), window: self.downloadWindow) { event in
                    sink.take(event)
                }
                guard case .downloadAsset(let result)? = complete.result else {
                    throw CKError(.internalError, message: "the server ended a download without its result")
                }
                let digest = sink.finish()
                guard result.size == sink.written, digest == result.sha256,
                    asset.sha256.isEmpty || asset.sha256 == digest
                else {
                    throw CKError(
                        .assetFileModified,
                        message: "the downloaded asset (\(sink.written) bytes) does not match its size and SHA-256; nothing was kept")
                }
                guard fsync(fd) == 0, rename(temporary.path, destination.path) == 0 else {
                    throw CKError(
                        .internalError, message: "cannot keep \(destination.path): \(String(cString: strerror(errno)))")
                }
                kept = true
                return
            } catch {
                guard Self.isRetryable(error) else { throw error }
                failures = sink.written > offset ? 1 : failures + 1
                guard failures <= self.maximumAttempts else { throw error }
                try await Self.backoff(failures)
            }
        }
    }
}

/// Where a download's chunks go: the file, in order, with their running digest. Touched on the
/// download stream's serial queue, then read by the downloading task after the stream ended.
private final class DownloadSink: @unchecked Sendable {
    // @unchecked Sendable: the state is lock-protected; the file is written only from the
    // stream's serial queue, one stream at a time.
    private struct State {
        var written: UInt64 = 0
        var digest = Wire.SHA256()
    }

    private let fd: Int32
    private let path: String
    private let progress: @Sendable (UInt64) -> Void
    private let state = NIOLockedValueBox(State())

    init(fd: Int32, path: String, progress: @escaping @Sendable (UInt64) -> Void) {
        self.fd = fd
        self.path = path
        self.progress = progress
    }

    var written: UInt64 { self.state.withLockedValue { $0.written } }

    /// Writes one chunk event; the error that ends the download, if any.
    func take(_ event: Wire.Event) -> CKError? {
        guard case .downloadAsset(let payload)? = event.payload, case .chunk(let chunk)? = payload.callback else {
            return nil
        }
        return self.state.withLockedValue { state -> CKError? in
            guard chunk.offset == state.written else {
                return CKError(.internalError, message: "the server sent bytes at \(chunk.offset), expected \(state.written)")
            }
            var done = 0
            let count = chunk.data.count
            let failed = chunk.data.withUnsafeBytes { buffer -> Bool in
                while done < count {
                    let n = pwrite(self.fd, buffer.baseAddress! + done, count - done, off_t(state.written) + off_t(done))
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { return true }
                    done += n
                }
                return false
            }
            if failed {
                return CKError(.internalError, message: "cannot write \(self.path): \(String(cString: strerror(errno)))")
            }
            state.digest.update(chunk.data)
            // Sent to the disk while the next chunks arrive, so the fsync that keeps the file
            // waits only for the last ones (a failure here shows at that fsync).
            if count > 0 { _ = cirrus_start_writeback(self.fd, Int64(clamping: state.written), Int64(count)) }
            state.written += UInt64(count)
            self.progress(state.written)
            return nil
        }
    }

    /// The SHA-256 of everything written.
    func finish() -> [UInt8] {
        self.state.withLockedValue { $0.digest.finalize() }
    }
}
