import CirrusStore
import CirrusWire
import Foundation

extension AssetStore {
    /// What one collection pass removed.
    public struct Collection: Sendable, Hashable {
        /// Content files no record, unexpired upload handle or upload in progress referred to.
        public var contents = 0
        /// Unfinished uploads past their lifetime since their last chunk, and finished uploads
        /// whose handle expired.
        public var uploads = 0

        public init(contents: Int = 0, uploads: Int = 0) {
            self.contents = contents
            self.uploads = uploads
        }
    }

    /// Removes expired uploads, then content nothing refers to any more: no record, no
    /// unexpired upload handle or upload in progress (their files, on any node), and no commit
    /// of the last `uploadLifetimeSeconds` (noted in the storage by any node). Several nodes
    /// may collect one directory at once.
    ///
    /// - throws: the storage's error (what was removed before it stays removed).
    public func collect() async throws -> Collection {
        let now = self.clock().seconds
        let lifetime = self.limits.uploadLifetimeSeconds
        var collection = Collection()
        var pending = Set<[UInt8]>()
        let uploads = "\(self.directory)/uploads"
        for user in (try? FileManager.default.contentsOfDirectory(atPath: uploads)) ?? [] {
            let directory = "\(uploads)/\(user)"
            for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
                let path = "\(directory)/\(name)"
                if name.hasSuffix(".done") {
                    let done = Self.declaration(at: path)
                    if let done, (done.finished ?? 0) + lifetime >= now, let sha = Self.bytes(hex: done.sha256) {
                        pending.insert(sha)
                    } else {
                        unlink(path)
                        collection.uploads += 1
                    }
                } else if name.hasSuffix(".meta") {
                    let base = String(path.dropLast(".meta".count))
                    // An upload open here knows its last chunk; one left by an earlier run, or
                    // going on on another node, has its file's modification time.
                    let openKey = self.open.keys.first { self.uploadPaths($0).meta == path }
                    let last = max(
                        openKey.flatMap { self.open[$0]?.lastChunk } ?? 0,
                        AssetFile.modified(base + ".part") ?? AssetFile.modified(path) ?? 0)
                    if last + lifetime < now {
                        if let openKey { self.open[openKey] = nil }
                        unlink(base + ".part")
                        unlink(path)
                        collection.uploads += 1
                    } else if let sha = Self.declaration(at: path).flatMap({ Self.bytes(hex: $0.sha256) }) {
                        pending.insert(sha)
                    }
                } else if name.hasSuffix(".part"), !AssetFile.exists(String(path.dropLast(".part".count)) + ".meta") {
                    unlink(path)
                } else if name.contains(".tmp"), (AssetFile.modified(path) ?? 0) + lifetime < now {
                    // A marker whose writer stopped before its rename.
                    unlink(path)
                }
            }
        }
        let tmp = "\(self.directory)/tmp"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? [] {
            let path = "\(tmp)/\(name)"
            if (AssetFile.modified(path) ?? 0) + lifetime < now { unlink(path) }
        }
        // Content committed within the grace, on any node, stays for the save that names it.
        let cutoff = Wire.Timestamp(seconds: now - lifetime, nanos: 0)
        try await self.storage.forgetAssetCommits(before: cutoff)
        let content = "\(self.directory)/content"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: content)) ?? [] {
            guard let sha = Self.bytes(hex: name), sha.count == 32, !pending.contains(sha) else { continue }
            if try await self.remove(sha, committedBefore: cutoff) { collection.contents += 1 }
        }
        return collection
    }

    /// Removes the file of content `sha256` if the storage drops the content (no record refers
    /// to it, and no node committed it since `cutoff`): moved aside inside the storage's drop,
    /// so a node noting a commit meanwhile either kept it or finds it gone and writes it
    /// again; deleted once the drop committed, put back if it failed.
    private func remove(_ sha256: [UInt8], committedBefore cutoff: Wire.Timestamp) async throws -> Bool {
        let path = self.contentPath(sha256)
        let aside = "\(self.directory)/tmp/\(Self.hex(sha256)).collected-\(UInt64.random(in: 0...UInt64.max))"
        let dropped: Bool
        do {
            dropped = try await self.storage.dropAssetIfUnreferenced(sha256, committedBefore: cutoff) {
                // Gone already: another node's collection took it (or this closure ran before,
                // the storage retrying its transaction).
                guard rename(path, aside) == 0 else {
                    guard errno == ENOENT else { throw AssetStoreError.system("cannot move \(path) to", aside) }
                    return
                }
                // Dated now: no collection of `tmp/` takes it before this one is done.
                utimes(aside, nil)
            }
        } catch {
            // The content stays known: so does its file (the same bytes, if a node wrote it again).
            if AssetFile.exists(aside) { rename(aside, path) }
            throw error
        }
        // Counted by the node that moved the file.
        guard dropped, AssetFile.exists(aside) else { return false }
        unlink(aside)
        return true
    }
}
