import CirrusStore
import CirrusWire
import Foundation
import NIOPosix

/// The server's asset content: content-addressed files under a directory of their own,
/// streamed in and out in chunks, never whole in memory.
///
/// Layout under `directory`:
/// - `content/abcd…` — one file per distinct content, named by its SHA-256 (hex), written
///   to a temporary name, fsynced and renamed, so a name always holds complete, checked bytes;
/// - `uploads/<user>/<upload>.part` and `.meta` — an unfinished upload and what it declared;
///   `.done` — a finished upload whose handle has not expired (its content stays until then);
/// - `tmp/` — content being written, and content a collection is removing.
///
/// The records that refer to content are in the storage (``AssetReferenceStorage``: its `assets`
/// rows say the server has content, its `asset_references` which records hold it); ``collect()``
/// removes content no record, unexpired upload handle or upload in progress refers to.
///
/// Several stores, one per `cirrusd` node, may share one directory (a shared file system) over
/// one storage (PostgreSQL). Nothing one of them needs of another is in its memory:
/// - an upload is its files: a chunk may come to any node (a client that reconnected after a
///   failover), which takes the file's lock, adds the bytes other nodes appended to its digest,
///   and appends its own (an open upload here is a cache of the files, checked per chunk);
/// - a content committed for a save still to come is noted in the storage
///   (``AssetReferenceStorage/noteAssetsCommitted(_:at:)``) before the store relies on its file,
///   and a collection removes a file only inside the storage's drop of that content, which
///   waits for such notes and keeps what they name for `uploadLifetimeSeconds`: a content one
///   node committed is never removed by another node's collection before its save had its
///   chance, and a node that committed content a collection was removing writes it again;
/// - temporary names are random, so two nodes never write one.
///
/// For example:
/// ```swift
/// let assets = try AssetStore(directory: dataDir + "/assets", storage: storage, secret: secret)
/// let result = try await assets.receive(chunk, from: "_alice")
/// ```
public actor AssetStore {
    /// Limits on what users may store.
    public struct Limits: Sendable, Hashable {
        /// The largest asset accepted (`limitExceeded` above it). Default 16 GiB.
        public var maxAssetBytes: UInt64 = 16 << 30
        /// Bytes of asset content one user's records and unfinished uploads may hold
        /// (`quotaExceeded` above it); nil = no limit.
        public var maxUserBytes: UInt64?
        /// Seconds an unfinished upload is kept after its last chunk, and an upload handle is
        /// valid after the upload finished. Default 24 h.
        public var uploadLifetimeSeconds: Int64 = 86_400
        /// Seconds a download handle is valid. Default 24 h (a journaled long-lived operation
        /// replays its events within the operation retention).
        public var downloadHandleLifetimeSeconds: Int64 = 86_400
        /// Free bytes the asset directory's file system keeps: content that would leave less is
        /// refused before anything is written (`quotaExceeded`, "out of disk space").
        /// Default 64 MiB.
        public var minimumFreeBytes: UInt64 = 64 << 20
        /// How far ahead of the bytes received a chunk may start and wait for the chunks
        /// before it (a client keeps several in flight). Default 16 MiB.
        public var reorderWindowBytes: UInt64 = 16 << 20
        /// How long such a chunk waits before it is refused as out of order. Default 30 s.
        public var reorderWaitSeconds: Double = 30

        public init(maxAssetBytes: UInt64 = 16 << 30, maxUserBytes: UInt64? = nil) {
            self.maxAssetBytes = maxAssetBytes
            self.maxUserBytes = maxUserBytes
        }
    }

    /// Bytes per download event when the client names no size: 1 MiB.
    public static let defaultChunkBytes = 1 << 20

    /// Where the files are.
    public nonisolated let directory: String
    /// What users may store.
    public nonisolated let limits: Limits
    let storage: any AssetReferenceStorage
    let handles: AssetHandleSealer
    let clock: @Sendable () -> Wire.Timestamp

    /// Threads for file work that blocks (writes and syncs of many small contents at once),
    /// kept off the concurrency pool.
    nonisolated let blockingPool: NIOThreadPool

    /// Uploads with an open file and a running digest, by user and upload ID: a cache of
    /// their files, which other nodes may extend.
    var open: [UploadKey: OpenUpload] = [:]

    /// - parameter directory: created if missing.
    /// - parameter secret: keys the upload and download handles (the server secret, so
    ///   handles survive a restart).
    /// - throws: ``AssetStoreError`` if the directories cannot be made.
    public init(
        directory: String,
        storage: any AssetReferenceStorage,
        secret: [UInt8],
        limits: Limits = Limits(),
        clock: @escaping @Sendable () -> Wire.Timestamp = SQLiteStorage.systemClock
    ) throws(AssetStoreError) {
        self.directory = directory
        self.storage = storage
        self.handles = AssetHandleSealer(secret: secret)
        self.limits = limits
        self.clock = clock
        for sub in ["content", "uploads", "tmp"] {
            try AssetFile.makeDirectory((directory as NSString).appendingPathComponent(sub))
        }
        self.blockingPool = NIOThreadPool(numberOfThreads: 16)
        self.blockingPool.start()
    }

    deinit {
        self.blockingPool.shutdownGracefully { _ in }
    }

    // MARK: - Content

    /// The file of content `sha256`.
    nonisolated func contentPath(_ sha256: [UInt8]) -> String {
        // One directory: a batch of new contents costs one directory sync, not one per prefix.
        "\(self.directory)/content/\(Self.hex(sha256))"
    }

    /// Whether the store holds content `sha256`.
    public func hasContent(_ sha256: [UInt8]) -> Bool {
        sha256.count == 32 && AssetFile.exists(self.contentPath(sha256))
    }

    /// Notes in the storage that contents `digests` are committed now, for saves still to
    /// come: no node's collection removes them for `uploadLifetimeSeconds`. Called before the
    /// store looks whether their files are there (a collection that removed one before the
    /// note returned has removed it for good: the file is written again).
    func noteCommitted(_ digests: [[UInt8]]) async throws {
        try await self.storage.noteAssetsCommitted(digests, at: self.clock())
    }

    /// Moves a complete, checked file into place as content `sha256` (or drops it when that
    /// content is there already: placed by this node or another, the same bytes). Its commit
    /// was noted first (``noteCommitted(_:)``).
    func commit(_ file: AssetFile, as sha256: [UInt8]) throws(AssetStoreError) {
        let target = self.contentPath(sha256)
        if AssetFile.exists(target) {
            unlink(file.path)
            return
        }
        try file.sync()
        try AssetFile.makeDirectory((target as NSString).deletingLastPathComponent)
        do {
            try AssetFile.move(file.path, to: target)
        } catch {
            // Another node placed the content meanwhile (or finished this very upload, whose
            // file it moved).
            guard AssetFile.exists(target) else { throw error }
            unlink(file.path)
        }
    }

    /// Refuses `bytes` more content when the disk would keep less than `minimumFreeBytes`.
    nonisolated func checkFreeSpace(for bytes: UInt64) throws(AssetStoreError) {
        var info = statvfs()
        guard statvfs(self.directory, &info) == 0 else { return }
        let free = UInt64(info.f_bavail) &* UInt64(info.f_frsize)
        let (needed, overflow) = bytes.addingReportingOverflow(self.limits.minimumFreeBytes)
        guard !overflow, needed <= free else {
            throw AssetStoreError(
                code: .quotaExceeded,
                message: "the server is out of disk space for assets (\(free) bytes free, \(bytes) more asked); nothing was stored")
        }
    }

    // MARK: - Handles

    /// The download handle of content `sha256` for `user` (who may read a record holding it).
    public nonisolated func downloadHandle(sha256: [UInt8], size: UInt64, for user: String) -> String {
        let expires = self.clock().seconds + self.limits.downloadHandleLifetimeSeconds
        return self.handles.seal(.download, .init(sha256: sha256, size: size, expires: expires), for: user)
    }

    /// What an upload handle names, when `user` may save it: issued to them, unexpired, and its
    /// content is here.
    ///
    /// - throws: ``AssetStoreError`` `permissionFailure` (another user's, or damaged),
    ///   `assetFileNotFound` (expired, or its content is gone).
    public func resolveUpload(_ handle: String, for user: String) throws(AssetStoreError) -> AssetHandleSealer.Claim {
        let claim = try self.handles.open(handle, .upload, for: user, now: self.clock().seconds)
        guard self.hasContent(claim.sha256) else {
            throw AssetStoreError(code: .assetFileNotFound, message: "the uploaded content is gone; upload it again")
        }
        return claim
    }

    /// The content a download handle names, opened for reading, when it was issued to `user`,
    /// has not expired, and a record still refers to the content.
    ///
    /// - throws: ``AssetStoreError`` `permissionFailure` (another user's, or damaged),
    ///   `assetFileNotFound` (expired, or the asset was deleted).
    func openDownload(
        _ handle: String, for user: String
    ) async throws -> (file: AssetFile, claim: AssetHandleSealer.Claim) {
        let claim = try self.handles.open(handle, .download, for: user, now: self.clock().seconds)
        let deleted = AssetStoreError(
            code: .assetFileNotFound, message: "the asset is no longer stored (its record was deleted or changed)")
        guard try await self.storage.assetIsReferenced(claim.sha256) else { throw deleted }
        do {
            return (try AssetFile.reading(self.contentPath(claim.sha256)), claim)
        } catch {
            throw deleted
        }
    }

    // MARK: - Names

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func bytes(hex: String) -> [UInt8]? {
        let chars = Array(hex.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let high = Self.nibble(chars[i]), let low = Self.nibble(chars[i + 1]) else { return nil }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
