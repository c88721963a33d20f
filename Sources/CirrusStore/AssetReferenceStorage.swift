public import CirrusWire

/// What a storage keeps of asset content: which contents it knows (a record may name one by
/// its SHA-256 alone once it is known), which records refer to each, and which contents the
/// server's asset file store committed lately.
///
/// The content itself is either kept by the storage (inline bytes a record brought) or a file
/// of the server's asset file store, whose directory every node shares; the storage decides,
/// for every node at once, when such a file may go. A file store calls
/// ``noteAssetsCommitted(_:at:)`` before it relies on a file being there (a save that follows
/// names it), and removes a file only inside
/// ``dropAssetIfUnreferenced(_:committedBefore:whileLocked:)``: the two exclude each other per
/// content, so a content one node just committed for a save is never removed by another
/// node's collection, and a node that committed content a collection removed writes it again.
///
/// For example:
/// ```swift
/// try await storage.noteAssetsCommitted([digest], at: now)
/// let gone = try await storage.dropAssetIfUnreferenced(digest, committedBefore: cutoff) { moveAway(digest) }
/// ```
public protocol AssetReferenceStorage: Sendable {
    /// Deletes stored asset contents no record refers to any more; returns how many.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    func pruneUnreferencedAssets() async throws -> Int

    /// Records that the asset file store committed the contents `digests` at `time` (placed
    /// them, or found them there): ``dropAssetIfUnreferenced(_:committedBefore:whileLocked:)``
    /// with a cutoff at or before `time` keeps them. Waits for a drop of one of them in
    /// progress, so once it returns a content's file is either kept or already gone.
    ///
    /// - throws: ``StoreError``.
    func noteAssetsCommitted(_ digests: [[UInt8]], at time: Wire.Timestamp) async throws

    /// Forgets the asset content `sha256` if no record refers to it and it was not committed
    /// at or after `cutoff` (``noteAssetsCommitted(_:at:)``), in one transaction that calls
    /// `remove` (which moves its file out of the way) before it commits: true when it is now
    /// unknown (a save naming it after this fails with `assetFileNotFound`); false, without
    /// calling `remove`, when it is still needed. A `remove` that throws undoes the drop.
    ///
    /// - throws: ``StoreError``, or what `remove` threw.
    func dropAssetIfUnreferenced(
        _ sha256: [UInt8], committedBefore cutoff: Wire.Timestamp, whileLocked remove: @escaping @Sendable () throws -> Void
    ) async throws -> Bool

    /// Forgets the commits of asset contents (``noteAssetsCommitted(_:at:)``) made before
    /// `cutoff`; returns how many.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    func forgetAssetCommits(before cutoff: Wire.Timestamp) async throws -> Int

    /// Whether any record refers to the asset content `sha256`.
    ///
    /// - throws: ``StoreError``.
    func assetIsReferenced(_ sha256: [UInt8]) async throws -> Bool

    /// Bytes of distinct asset content referred to by records `user` created (the
    /// per-user quota counts these).
    ///
    /// - throws: ``StoreError``.
    func assetBytes(createdBy user: String) async throws -> UInt64
}

extension AssetReferenceStorage {
    /// ``dropAssetIfUnreferenced(_:committedBefore:whileLocked:)`` for content that has no
    /// file to move: whatever its commits, as long as no record refers to it.
    public func dropAssetIfUnreferenced(_ sha256: [UInt8]) async throws -> Bool {
        try await dropAssetIfUnreferenced(
            sha256, committedBefore: Wire.Timestamp(seconds: Int64.max / 2, nanos: 0), whileLocked: {})
    }
}
