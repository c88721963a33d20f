internal import CSystemShims
import Foundation
import NIOCore

/// An open file of the asset store: the few POSIX calls it needs, each failure an
/// ``AssetStoreError`` naming the path and the system's reason (a full disk says so).
final class AssetFile: @unchecked Sendable {
    // @unchecked Sendable: the descriptor is only read with `pread` (no shared offset) once a
    // download hands it to its task; writes happen inside the `AssetStore` actor only.
    let path: String
    private let fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    deinit {
        close(self.fd)
    }

    /// Opens `path` for reading.
    static func reading(_ path: String) throws(AssetStoreError) -> AssetFile {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw AssetStoreError.system("cannot open", path) }
        return AssetFile(path: path, fd: fd)
    }

    /// Opens `path` for writing, creating it (mode 0600) if needed.
    static func writing(_ path: String) throws(AssetStoreError) -> AssetFile {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AssetStoreError.system("cannot create", path) }
        return AssetFile(path: path, fd: fd)
    }

    /// The file's length in bytes.
    func size() throws(AssetStoreError) -> UInt64 {
        var info = stat()
        guard fstat(self.fd, &info) == 0 else { throw AssetStoreError.system("cannot stat", self.path) }
        return UInt64(max(info.st_size, 0))
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(AssetStoreError) {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let n = pwrite(self.fd, base + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw AssetStoreError.system("cannot write", self.path) }
            done += n
        }
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: [UInt8], at offset: UInt64) throws(AssetStoreError) {
        let failure: AssetStoreError? = bytes.withUnsafeBytes { buffer in
            do throws(AssetStoreError) {
                try self.write(buffer, at: offset)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Up to `count` bytes at `offset`; fewer only at the end of the file.
    func read(at offset: UInt64, count: Int) throws(AssetStoreError) -> [UInt8] {
        var failed = false
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = 0
            guard let base = buffer.baseAddress else { return }
            var done = 0
            while done < count {
                let n = pread(self.fd, base + done, count - done, off_t(offset) + off_t(done))
                if n < 0 && errno == EINTR { continue }
                if n < 0 { failed = true }
                if n <= 0 { break }
                done += n
            }
            initialized = done
        }
        if failed { throw AssetStoreError.system("cannot read", self.path) }
        return bytes
    }

    /// Appends up to `count` bytes at `offset` to `buffer`; fewer only at the end of the file.
    func read(at offset: UInt64, count: Int, into buffer: inout ByteBuffer) throws(AssetStoreError) {
        var failed = false
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { target in
            guard let base = target.baseAddress else { return 0 }
            var done = 0
            while done < count {
                let n = pread(self.fd, base + done, count - done, off_t(offset) + off_t(done))
                if n < 0 && errno == EINTR { continue }
                if n < 0 { failed = true }
                if n <= 0 { break }
                done += n
            }
            return done
        }
        if failed { throw AssetStoreError.system("cannot read", self.path) }
    }

    /// Waits for, then holds, the exclusive lock of the file (`flock`), which other processes
    /// and other nodes on a shared file system (NFS) take too: a writer that holds it sees what
    /// the others wrote before. Held for one short write at a time.
    func lock() throws(AssetStoreError) {
        while flock(self.fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw AssetStoreError.system("cannot lock", self.path) }
        }
    }

    /// Releases ``lock()``.
    func unlock() {
        _ = flock(self.fd, LOCK_UN)
    }

    /// Whether `path` names this open file still (it was neither removed nor replaced).
    func isStill(at path: String) -> Bool {
        var open = stat()
        var named = stat()
        guard fstat(self.fd, &open) == 0, stat(path, &named) == 0 else { return false }
        return open.st_dev == named.st_dev && open.st_ino == named.st_ino
    }

    /// Drops everything after `length`.
    func truncate(to length: UInt64) throws(AssetStoreError) {
        guard ftruncate(self.fd, off_t(length)) == 0 else { throw AssetStoreError.system("cannot truncate", self.path) }
    }

    /// Starts writing `count` bytes at `offset` (just written) to the disk, without waiting:
    /// a large upload then reaches the disk while its next chunks arrive, and ``sync()`` at its
    /// end waits only for what is still in flight. Makes nothing durable; a failure here is
    /// left for ``sync()`` to report.
    func startWriteback(at offset: UInt64, count: Int) {
        guard count > 0 else { return }
        _ = cirrus_start_writeback(self.fd, Int64(clamping: offset), Int64(count))
    }

    /// Makes what was written durable.
    func sync() throws(AssetStoreError) {
        guard fsync(self.fd) == 0 else { throw AssetStoreError.system("cannot sync", self.path) }
    }

    /// Makes a directory's entries (a rename into it) durable.
    static func syncDirectory(_ path: String) throws(AssetStoreError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw AssetStoreError.system("cannot open directory", path) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw AssetStoreError.system("cannot sync directory", path) }
    }

    /// Writes `bytes` to `path` durably: a temporary name in the same directory, fsync, rename.
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws(AssetStoreError) {
        let temporary = path + ".tmp-\(UInt64.random(in: 0...UInt64.max))"
        let file = try AssetFile.writing(temporary)
        do throws(AssetStoreError) {
            try file.truncate(to: 0)
            try file.write(bytes, at: 0)
            try file.sync()
            try move(temporary, to: path)
        } catch {
            unlink(temporary)
            throw error
        }
    }

    /// Renames `source` to `target` and syncs the target's directory.
    static func move(_ source: String, to target: String) throws(AssetStoreError) {
        guard rename(source, target) == 0 else { throw AssetStoreError.system("cannot rename \(source) to", target) }
        try syncDirectory((target as NSString).deletingLastPathComponent)
    }

    /// Creates `path` and its parents if they are missing.
    static func makeDirectory(_ path: String) throws(AssetStoreError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw AssetStoreError(code: .internalError, message: "cannot create directory \(path): \(error)")
        }
    }

    /// Whether `path` exists.
    static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// Seconds since the epoch of `path`'s last modification, nil if it is gone.
    static func modified(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_mtim.tv_sec)
    }
}
