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
            do throws(CKError) {
                if probe {
                    let result = try await self.send(Wire.UploadAssetRequest(uploadID: uploadID, totalSize: size, sha256: digest))
                    probe = false
                    if !result.uploadHandle.isEmpty {
                        progress(size)
                        return result.uploadHandle
                    }
                    offset = min(result.receivedBytes, size)
                    progress(offset)
                }
                return try await self.sendChunks(
                    fd, path: url.path, from: offset, size: size, digest: digest, uploadID: uploadID
                ) { received in
                    offset = max(offset, received)
                    failures = 0
                    progress(received)
                }
            } catch {
                guard Self.isRetryable(error) else { throw error }
                failures += 1
                guard failures <= self.maximumAttempts else { throw error }
                try await Self.backoff(failures)
                probe = true
            }
        }
    }

    /// Sends the chunks from `start` to the end, `uploadWindow` in flight (the server takes
    /// each in turn); the handle the final one answers. `received` gets the bytes the server
    /// has after each answer.
    private func sendChunks(
        _ fd: Int32, path: String, from start: UInt64, size: UInt64, digest: [UInt8], uploadID: String,
        received: (UInt64) -> Void
    ) async throws(CKError) -> String {
        let chunk = UInt64(max(1, self.uploadChunkBytes))
        let result: Result<String, CKError> = await withTaskGroup(of: Result<Wire.UploadAssetResult, CKError>.self) { group in
            var next = start
            var inFlight = 0
            var sentFinal = false
            func launch() -> CKError? {
                guard !sentFinal else { return nil }
                let count = min(chunk, size - next)
                var request = Wire.UploadAssetRequest(uploadID: uploadID, offset: next, totalSize: size, sha256: digest)
                do throws(CKError) {
                    request.data = try Self.read(fd, at: next, count: Int(count), path: path)
                } catch {
                    return error
                }
                request.isFinal = next + count == size
                sentFinal = request.isFinal
                next += count
                inFlight += 1
                group.addTask {
                    do throws(CKError) { return .success(try await self.send(request)) } catch { return .failure(error) }
                }
                return nil
            }
            while inFlight < max(1, self.uploadWindow) && !sentFinal {
                if let error = launch() { group.cancelAll(); return .failure(error) }
            }
            var handle: String?
            for await answer in group {
                inFlight -= 1
                switch answer {
                case .failure(let error):
                    group.cancelAll()
                    return .failure(error)
                case .success(let answer):
                    received(answer.receivedBytes)
                    if !answer.uploadHandle.isEmpty { handle = answer.uploadHandle }
                }
                if let error = launch() {
                    group.cancelAll()
                    return .failure(error)
                }
            }
            guard let handle else {
                return .failure(CKError(.internalError, message: "the server finished the upload without a handle"))
            }
            return .success(handle)
        }
        return try result.get()
    }

    /// One chunk (or a question) and the server's answer.
    private func send(_ request: Wire.UploadAssetRequest) async throws(CKError) -> Wire.UploadAssetResult {
        let complete = try await self.run(.uploadAsset(request))
        guard case .uploadAsset(let result)? = complete.result else {
            throw CKError(.internalError, message: "the server answered an upload chunk without its result")
        }
        return result
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
