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

    /// Removes expired uploads, then content nothing refers to any more.
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
                    // An upload open here knows its last chunk; one left by an earlier run has
                    // its file's modification time.
                    let openKey = self.open.keys.first { self.uploadPaths($0).meta == path }
                    let last = openKey.flatMap { self.open[$0]?.lastChunk }
                        ?? AssetFile.modified(base + ".part") ?? AssetFile.modified(path) ?? 0
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
        for (sha, when) in self.recentCommits where when + lifetime < now {
            self.recentCommits[sha] = nil
        }
        let tmp = "\(self.directory)/tmp"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? [] {
            let path = "\(tmp)/\(name)"
            if (AssetFile.modified(path) ?? 0) + lifetime < now { unlink(path) }
        }
        let content = "\(self.directory)/content"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: content)) ?? [] {
            guard let sha = Self.bytes(hex: name), sha.count == 32 else { continue }
            guard !pending.contains(sha), self.recentCommits[sha] == nil else { continue }
            guard try await self.storage.dropAssetIfUnreferenced(sha) else { continue }
            // Committed again while the storage was asked: a save is about to refer to it.
            guard self.recentCommits[sha] == nil else { continue }
            unlink("\(content)/\(name)")
            collection.contents += 1
        }
        return collection
    }
}
