import CirrusWire
import Foundation

/// One upload: its user and the client's upload ID.
struct UploadKey: Hashable, Sendable {
    var user: String
    var uploadID: String
}

/// What an upload declared (its `.meta` file), and for a finished one when it finished (its
/// `.done` file).
struct UploadDeclaration: Codable, Sendable, Hashable {
    var size: UInt64
    var sha256: String
    var finished: Int64?
}

/// An unfinished upload being written: its file and the digest of the bytes in it so far (as
/// far as this node knows: other nodes may have appended since, see
/// ``AssetStore/catchUp(_:)``).
final class OpenUpload {
    let file: AssetFile
    let declaration: UploadDeclaration
    var digest = Wire.SHA256()
    var received: UInt64 = 0
    /// When the last chunk came (by the store's clock): the upload expires a lifetime later.
    var lastChunk: Int64
    /// Why the last write failed (a full disk): chunks waiting for their turn fail with it at
    /// once instead of waiting out the reorder window. Cleared by the next write that succeeds
    /// (the client resumes once there is room).
    var writeFailure: AssetStoreError?

    init(file: AssetFile, declaration: UploadDeclaration, now: Int64) {
        self.file = file
        self.declaration = declaration
        self.lastChunk = now
    }
}

extension AssetStore {
    /// Takes one chunk of an upload (`UploadAssetRequest`) from `user`; how many bytes the
    /// server has (the next chunk's offset) and, after the final chunk, the upload handle.
    ///
    /// The upload may have started, or gone on, on another node sharing the directory (a client
    /// that reconnected after a failover): its state is its files, and each chunk is written
    /// under the file's lock after the bytes other nodes appended.
    ///
    /// A chunk may start before the bytes received (a resumed client sending again what was
    /// made durable: the overlap is skipped). One that starts after them, within
    /// `reorderWindowBytes`, waits up to `reorderWaitSeconds` for the chunks before it (a
    /// client keeps several in flight); further ahead, or waiting longer, it is refused as out
    /// of order. An empty chunk asks where to resume. A repeated final chunk of a finished
    /// upload answers the same handle.
    ///
    /// - throws: ``AssetStoreError``: `invalidArguments` (a chunk out of order or past the
    ///   declared size, a declaration that changed), `assetFileModified` (the content does not
    ///   match its SHA-256; the upload is discarded), `limitExceeded` (above `maxAssetBytes`),
    ///   `quotaExceeded` (above `maxUserBytes`, or the disk is full).
    public func receive(_ chunk: Wire.UploadAssetRequest, from user: String) async throws -> Wire.UploadAssetResult {
        let key = UploadKey(user: user, uploadID: chunk.uploadID)
        guard !chunk.uploadID.isEmpty, chunk.uploadID.utf8.count <= 256 else {
            throw AssetStoreError.invalid("an upload needs an upload ID of 1 to 256 bytes")
        }
        guard chunk.sha256.count == 32 else {
            throw AssetStoreError.invalid("an upload declares the 32-byte SHA-256 of its content")
        }
        guard chunk.totalSize <= self.limits.maxAssetBytes else {
            throw AssetStoreError(
                code: .limitExceeded,
                message: "asset of \(chunk.totalSize) bytes; this server takes at most \(self.limits.maxAssetBytes)")
        }
        let declared = UploadDeclaration(size: chunk.totalSize, sha256: Self.hex(chunk.sha256))
        let paths = self.uploadPaths(key)
        if let done = Self.declaration(at: paths.done) {
            guard done.sha256 == declared.sha256, done.size == declared.size else {
                throw AssetStoreError.invalid("upload \(chunk.uploadID) finished with another content; use a new upload ID")
            }
            return self.finishedResult(key, done)
        }
        if self.open[key] == nil && !AssetFile.exists(paths.meta) {
            try self.checkFreeSpace(for: chunk.totalSize)
            try await self.checkQuota(of: user, adding: chunk.totalSize)
        }
        if chunk.offset == 0, chunk.isFinal, self.open[key] == nil, !AssetFile.exists(paths.meta) {
            return try await self.receiveWhole(chunk, key, paths)
        }
        let (end, overflow) = chunk.offset.addingReportingOverflow(UInt64(chunk.data.count))
        guard !overflow, end <= chunk.totalSize else {
            throw AssetStoreError.invalid(
                "chunk at \(chunk.offset) of \(chunk.data.count) bytes goes past the declared size \(chunk.totalSize)")
        }
        if chunk.isFinal {
            // Noted before the upload's file may become content (``noteCommitted(_:)``); another
            // copy of this chunk, here or on another node, may have finished it meanwhile.
            try await self.noteCommitted([chunk.sha256])
            if let done = Self.declaration(at: paths.done), done.sha256 == declared.sha256, done.size == declared.size {
                return self.finishedResult(key, done)
            }
        }
        let opened = try self.openUpload(key, declared)
        guard opened.declaration.size == declared.size, opened.declaration.sha256 == declared.sha256 else {
            throw AssetStoreError.invalid(
                "upload \(chunk.uploadID) declared \(opened.declaration.size) bytes with another SHA-256; use a new upload ID")
        }
        guard let upload = try await self.waitForTurn(of: chunk, in: opened, key: key) else {
            // Another copy of a chunk (sent again after a lost connection) finished the upload
            // while this one waited: answer what it answered.
            guard let done = Self.declaration(at: paths.done), done.sha256 == declared.sha256 else {
                throw AssetStoreError.invalid("upload \(chunk.uploadID) was discarded while this chunk waited; start again")
            }
            return self.finishedResult(key, done)
        }
        upload.lastChunk = self.clock().seconds
        // Under the file's lock from here to the end: no other node appends meanwhile.
        try upload.file.lock()
        defer { upload.file.unlock() }
        guard upload.file.isStill(at: paths.part) else {
            // Finished or discarded on another node while this one kept it open.
            if self.open[key] === upload { self.open[key] = nil }
            if let done = Self.declaration(at: paths.done), done.sha256 == declared.sha256, done.size == declared.size {
                return self.finishedResult(key, done)
            }
            throw AssetStoreError.invalid("upload \(chunk.uploadID) was discarded; start again")
        }
        try self.catchUp(upload)
        guard chunk.offset <= upload.received else {
            throw AssetStoreError.invalid(
                "chunk out of order: it starts at \(chunk.offset) but the server has \(upload.received) bytes; send from \(upload.received)")
        }
        if end > upload.received {
            let skip = Int(upload.received - chunk.offset)
            let failure: AssetStoreError? = chunk.data.withUnsafeBytes { buffer in
                let fresh = UnsafeRawBufferPointer(rebasing: buffer[skip...])
                do throws(AssetStoreError) {
                    try upload.file.write(fresh, at: upload.received)
                } catch {
                    return error
                }
                upload.digest.update(buffer: fresh)
                return nil
            }
            if let failure {
                upload.writeFailure = failure
                throw failure
            }
            upload.writeFailure = nil
            upload.file.startWriteback(at: upload.received, count: Int(end - upload.received))
            upload.received = end
        }
        guard chunk.isFinal else {
            return Wire.UploadAssetResult(receivedBytes: upload.received, uploadHandle: "")
        }
        return try self.finish(key, upload, paths)
    }

    /// An upload in one chunk (a small file): checked and stored at once, with no files of an
    /// unfinished upload.
    private func receiveWhole(
        _ chunk: Wire.UploadAssetRequest, _ key: UploadKey, _ paths: UploadPaths
    ) async throws -> Wire.UploadAssetResult {
        guard UInt64(chunk.data.count) == chunk.totalSize else {
            throw AssetStoreError.invalid(
                "final chunk with \(chunk.data.count) of \(chunk.totalSize) bytes received; send the rest first")
        }
        guard Wire.SHA256.hash(chunk.data) == chunk.sha256 else {
            throw AssetStoreError(
                code: .assetFileModified,
                message: "the uploaded content does not match its SHA-256; nothing was stored, upload it again")
        }
        // Written and synced on the blocking pool, so small uploads sync side by side.
        _ = try await self.storeInline([chunk.data])
        return try self.markFinished(key, UploadDeclaration(size: chunk.totalSize, sha256: Self.hex(chunk.sha256)), paths)
    }

    /// Records that the upload finished (its `.done` file keeps the content until the handle
    /// expires) and answers its handle. The marker is not fsynced: lost in a crash, the content
    /// is only collected earlier, and the handle stays valid while the content is there.
    private func markFinished(
        _ key: UploadKey, _ declaration: UploadDeclaration, _ paths: UploadPaths
    ) throws(AssetStoreError) -> Wire.UploadAssetResult {
        var done = declaration
        done.finished = self.clock().seconds
        try AssetFile.makeDirectory((paths.done as NSString).deletingLastPathComponent)
        let body = Array((try? JSONEncoder().encode(done)) ?? Data())
        // A name of its own: another node may finish the same upload (a chunk sent again).
        let temporary = paths.done + ".tmp-\(UInt64.random(in: 0...UInt64.max))"
        let file = try AssetFile.writing(temporary)
        try file.truncate(to: 0)
        try file.write(body, at: 0)
        guard rename(temporary, paths.done) == 0 else {
            let error = AssetStoreError.system("cannot rename \(temporary) to", paths.done)
            unlink(temporary)
            throw error
        }
        unlink(paths.meta)
        self.open[key] = nil
        return self.finishedResult(key, done)
    }

    /// The upload once the chunk's offset is reached: a chunk ahead of the bytes received (within
    /// the window) waits for the chunks before it, leaving the store free meanwhile.
    /// Nil when the upload was finished or discarded meanwhile.
    private func waitForTurn(
        of chunk: Wire.UploadAssetRequest, in upload: OpenUpload, key: UploadKey
    ) async throws -> OpenUpload? {
        guard chunk.offset > upload.received, !chunk.data.isEmpty else { return upload }
        let outOfOrder = AssetStoreError.invalid(
            "chunk out of order: it starts at \(chunk.offset) but the server has \(upload.received) bytes; send from \(upload.received)")
        guard chunk.offset - upload.received <= self.limits.reorderWindowBytes else { throw outOfOrder }
        let deadline = ContinuousClock.now + .milliseconds(Int64(self.limits.reorderWaitSeconds * 1000))
        var current = upload
        while chunk.offset > current.received {
            // The chunk before this one could not be written: this one never gets its turn.
            if let failure = current.writeFailure { throw failure }
            guard ContinuousClock.now < deadline else {
                throw AssetStoreError.invalid(
                    "chunk out of order: it starts at \(chunk.offset) but the server has \(current.received) bytes; send from \(current.received)")
            }
            try await Task.sleep(for: .milliseconds(1))
            guard let again = self.open[key], again === current else { return nil }
            current = again
            // The chunks before this one may have come to another node.
            try current.file.lock()
            defer { current.file.unlock() }
            if current.file.isStill(at: self.uploadPaths(key).part) { try self.catchUp(current) }
        }
        return current
    }

    /// Adds to the upload's digest the bytes other nodes appended to its file since this node
    /// last wrote or read it; called holding the file's lock. Bytes once in the file never
    /// change (every writer appends under the lock), so the digest of what this node saw
    /// stays the digest of the file's start.
    func catchUp(_ upload: OpenUpload) throws(AssetStoreError) {
        let size = min(try upload.file.size(), upload.declaration.size)
        if size < upload.received {
            // Cut short under this node (not by a writer of this store): read it again.
            upload.digest = Wire.SHA256()
            upload.received = 0
        }
        var offset = upload.received
        while offset < size {
            let bytes = try upload.file.read(at: offset, count: Int(min(size - offset, 1 << 20)))
            guard !bytes.isEmpty else { break }
            upload.digest.update(bytes)
            offset += UInt64(bytes.count)
        }
        upload.received = offset
    }

    /// Checks the finished upload's size and digest, moves it into the content, and answers
    /// its handle. A mismatch discards the upload.
    private func finish(
        _ key: UploadKey, _ upload: OpenUpload, _ paths: UploadPaths
    ) throws(AssetStoreError) -> Wire.UploadAssetResult {
        guard upload.received == upload.declaration.size else {
            throw AssetStoreError.invalid(
                "final chunk with \(upload.received) of \(upload.declaration.size) bytes received; send the rest first")
        }
        let digest = upload.digest.finalize()
        guard Self.hex(digest) == upload.declaration.sha256 else {
            self.discard(key)
            throw AssetStoreError(
                code: .assetFileModified,
                message: "the uploaded content does not match its SHA-256; nothing was stored, upload it again")
        }
        try self.commit(upload.file, as: digest)
        return try self.markFinished(key, upload.declaration, paths)
    }

    private func finishedResult(_ key: UploadKey, _ done: UploadDeclaration) -> Wire.UploadAssetResult {
        let claim = AssetHandleSealer.Claim(
            sha256: Self.bytes(hex: done.sha256) ?? [], size: done.size,
            expires: (done.finished ?? 0) + self.limits.uploadLifetimeSeconds)
        return Wire.UploadAssetResult(
            receivedBytes: done.size, uploadHandle: self.handles.seal(.upload, claim, for: key.user))
    }

    /// The upload's open state: kept in memory, or opened again from its files (after a
    /// restart, or when it started on another node, the digest of what is there is computed
    /// once), or started. A state kept here whose file was finished or discarded on another
    /// node is dropped.
    private func openUpload(_ key: UploadKey, _ declared: UploadDeclaration) throws(AssetStoreError) -> OpenUpload {
        let paths = self.uploadPaths(key)
        if let upload = self.open[key] {
            if upload.file.isStill(at: paths.part) { return upload }
            self.open[key] = nil
        }
        try AssetFile.makeDirectory((paths.meta as NSString).deletingLastPathComponent)
        let declaration: UploadDeclaration
        if let existing = Self.declaration(at: paths.meta) {
            declaration = existing
        } else {
            unlink(paths.part)
            try AssetFile.writeAtomically(Array((try? JSONEncoder().encode(declared)) ?? Data()), to: paths.meta)
            declaration = declared
        }
        let upload = OpenUpload(
            file: try AssetFile.writing(paths.part), declaration: declaration, now: self.clock().seconds)
        try upload.file.lock()
        defer { upload.file.unlock() }
        try self.catchUp(upload)
        // Bytes past the declared size (or a short read) go: the next chunk appends here.
        if try upload.file.size() != upload.received { try upload.file.truncate(to: upload.received) }
        self.open[key] = upload
        return upload
    }

    /// Forgets an unfinished upload and deletes its files.
    func discard(_ key: UploadKey) {
        let paths = self.uploadPaths(key)
        self.open[key] = nil
        unlink(paths.part)
        unlink(paths.meta)
    }

    /// Refuses an upload that would take `user` above `maxUserBytes`: the content their
    /// records hold plus their unfinished uploads.
    private func checkQuota(of user: String, adding size: UInt64) async throws {
        guard let limit = self.limits.maxUserBytes else { return }
        let stored = try await self.storage.assetBytes(createdBy: user)
        var pending: UInt64 = 0
        let directory = self.userDirectory(user)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasSuffix(".meta") {
            pending += Self.declaration(at: "\(directory)/\(name)")?.size ?? 0
        }
        guard stored + pending + size <= limit else {
            throw AssetStoreError(
                code: .quotaExceeded,
                message: "\(size) more bytes would take this user's assets to \(stored + pending + size) bytes; the limit is \(limit)")
        }
    }

    struct UploadPaths {
        var part: String
        var meta: String
        var done: String
    }

    func userDirectory(_ user: String) -> String {
        "\(self.directory)/uploads/\(Self.hex(Array(Wire.SHA256.hash(Array(user.utf8)).prefix(16))))"
    }

    func uploadPaths(_ key: UploadKey) -> UploadPaths {
        let base = "\(self.userDirectory(key.user))/\(Self.hex(Array(Wire.SHA256.hash(Array(key.uploadID.utf8)).prefix(16))))"
        return UploadPaths(part: base + ".part", meta: base + ".meta", done: base + ".done")
    }

    static func declaration(at path: String) -> UploadDeclaration? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(UploadDeclaration.self, from: data)
    }
}
