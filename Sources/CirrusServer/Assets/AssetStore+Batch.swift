import CirrusWire
import Foundation
import NIOPosix

extension AssetStore {
    /// Stores contents that came inline with the records of one modify, each unless the same
    /// content is there already; their SHA-256s, in order.
    ///
    /// New contents are written to temporary files and fsynced side by side on the store's
    /// blocking pool (the file system commits concurrent syncs together), then renamed into
    /// place and their directories synced: the cost of a durable small file is paid once per
    /// batch, not once per asset.
    ///
    /// - throws: ``AssetStoreError`` (`limitExceeded` above `maxAssetBytes`; a full disk says
    ///   so); contents already placed stay (they are collected if nothing refers to them).
    public func storeInline(_ contents: [[UInt8]]) async throws -> [[UInt8]] {
        for bytes in contents where UInt64(bytes.count) > self.limits.maxAssetBytes {
            throw AssetStoreError(
                code: .limitExceeded, message: "asset of \(bytes.count) bytes; at most \(self.limits.maxAssetBytes)")
        }
        let digests = contents.map { Wire.SHA256.hash($0) }
        guard !digests.isEmpty else { return [] }
        // Noted before the files are looked at: a content found here stays until its save.
        try await self.noteCommitted(digests)
        var fresh: [(digest: [UInt8], bytes: [UInt8])] = []
        var seen = Set<[UInt8]>()
        for (digest, bytes) in zip(digests, contents) {
            if seen.insert(digest).inserted && !AssetFile.exists(self.contentPath(digest)) {
                fresh.append((digest, bytes))
            }
        }
        guard !fresh.isEmpty else { return digests }
        try self.checkFreeSpace(for: fresh.reduce(0) { $0 + UInt64($1.bytes.count) })
        let directory = self.directory
        let targets = fresh.map { self.contentPath($0.digest) }
        let pool = self.blockingPool
        // Write and sync each new content under a temporary name, side by side.
        let temporaries: [String] = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for (i, item) in fresh.enumerated() {
                group.addTask {
                    let path = "\(directory)/tmp/\(Self.hex(item.digest)).\(UInt64.random(in: 0...UInt64.max))"
                    try await pool.runIfActive {
                        let file = try AssetFile.writing(path)
                        do {
                            try file.write(item.bytes, at: 0)
                            try file.sync()
                        } catch {
                            unlink(path)
                            throw error
                        }
                    }
                    return (i, path)
                }
            }
            var paths = [String](repeating: "", count: fresh.count)
            for try await (i, path) in group { paths[i] = path }
            return paths
        }
        var directories = Set<String>()
        for (temporary, target) in zip(temporaries, targets) {
            let parent = (target as NSString).deletingLastPathComponent
            try AssetFile.makeDirectory(parent)
            guard rename(temporary, target) == 0 else {
                let error = AssetStoreError.system("cannot rename \(temporary) to", target)
                for path in temporaries { unlink(path) }
                throw error
            }
            directories.insert(parent)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for parent in directories {
                group.addTask { try await pool.runIfActive { try AssetFile.syncDirectory(parent) } }
            }
            try await group.waitForAll()
        }
        return digests
    }
}
