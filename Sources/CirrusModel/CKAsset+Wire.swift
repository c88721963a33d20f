import CirrusWire
import Foundation

extension CKAsset {
    /// Where fetched asset content goes when the caller names no directory:
    /// `<temporary directory>/CirrusAssets`.
    public static var defaultContentDirectory: URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("CirrusAssets", isDirectory: true)
    }

    /// The SHA-256 digest of `bytes` (32 bytes), as `Wire.Asset.sha256` carries it.
    public static func sha256(of bytes: some Sequence<UInt8>) -> [UInt8] {
        Wire.SHA256.hash(bytes)
    }

    /// An asset from a wire message. Inline content is checked against the message's
    /// size and checksum, then written to `contentDirectory` (created if needed) under a
    /// name made from its SHA-256, so equal content shares one file; `fileURL` points at
    /// it. Without inline content the asset's file is `localFile` when given (the file it
    /// was uploaded from), else the file of its SHA-256 in `contentDirectory` if one was
    /// downloaded there (see ``contentFile(for:in:)``), else none; it keeps the message in
    /// `wireAsset` (for a later download).
    ///
    /// - throws: `CKError` `.assetFileModified` if the content does not match its size
    ///   or checksum; `.internalError` if the file cannot be written.
    package convenience init(
        wire: Wire.Asset, contentDirectory: URL = CKAsset.defaultContentDirectory, localFile: URL? = nil
    ) throws(CKError) {
        guard case .inlineData(let bytes) = wire.content else {
            if let localFile {
                self.init(fileURL: localFile, wireAsset: wire)
                return
            }
            let downloaded = wire.sha256.count == 32 ? Self.contentFile(for: wire, in: contentDirectory) : nil
            if let downloaded, FileManager.default.fileExists(atPath: downloaded.path) {
                self.init(fileURL: downloaded, wireAsset: wire)
            } else {
                self.init(fileURL: nil, wireAsset: wire)
            }
            return
        }
        if wire.size != 0 && wire.size != UInt64(bytes.count) {
            throw CKError(
                .assetFileModified,
                message: "asset content is \(bytes.count) bytes but the message says \(wire.size)")
        }
        let digest = Wire.SHA256.hash(bytes)
        if !wire.sha256.isEmpty && wire.sha256 != digest {
            throw CKError(.assetFileModified, message: "asset content does not match its SHA-256")
        }
        let url = contentDirectory.appendingPathComponent(Self.fileName(digest: digest, original: wire.fileName))
        do {
            try FileManager.default.createDirectory(at: contentDirectory, withIntermediateDirectories: true)
            if !FileManager.default.fileExists(atPath: url.path) {
                try Data(bytes).write(to: url, options: .atomic)
            }
        } catch {
            throw CKError(.internalError, message: "cannot write asset file \(url.path): \(error)")
        }
        var described = wire
        described.sha256 = digest
        described.size = UInt64(bytes.count)
        self.init(fileURL: url, wireAsset: described)
    }

    /// The asset as a wire message: the file's checksum, size and name, and, when
    /// `inlineContent` is true, the content itself. An asset without a file (fetched but
    /// not downloaded) gives its server description without content.
    ///
    /// - throws: `CKError` `.assetFileNotFound` if the file cannot be read.
    package func wireAsset(inlineContent: Bool) throws(CKError) -> Wire.Asset {
        guard let fileURL else {
            guard let wireAsset else {
                throw CKError(.assetFileNotFound, message: "asset has neither a file nor a server description")
            }
            return wireAsset
        }
        if !inlineContent {
            let (digest, size) = try Self.digestOfFile(at: fileURL)
            return Wire.Asset(sha256: digest, size: size, fileName: fileURL.lastPathComponent, content: nil)
        }
        let bytes: [UInt8]
        do {
            bytes = [UInt8](try Data(contentsOf: fileURL))
        } catch {
            throw CKError(.assetFileNotFound, message: "cannot read asset file \(fileURL.path): \(error)")
        }
        return Wire.Asset(
            sha256: Wire.SHA256.hash(bytes), size: UInt64(bytes.count), fileName: fileURL.lastPathComponent,
            content: .inlineData(bytes))
    }

    /// Where the content of `wire` goes in `directory` once downloaded: a name made from its
    /// SHA-256 (so equal content shares one file) plus the original name's extension.
    package static func contentFile(for wire: Wire.Asset, in directory: URL) -> URL {
        Self.contentFile(sha256: wire.sha256, fileName: wire.fileName, in: directory)
    }

    /// Where content with SHA-256 `sha256` whose original file was named `fileName` goes in
    /// `directory` once downloaded.
    public static func contentFile(sha256: [UInt8], fileName: String, in directory: URL) -> URL {
        directory.appendingPathComponent(Self.fileName(digest: sha256, original: fileName))
    }

    /// The SHA-256 and size of a file, read `chunkSize` bytes (default 1 MiB) at a time.
    public static func digestOfFile(at url: URL, chunkSize: Int = 1 << 20) throws(CKError) -> (digest: [UInt8], size: UInt64) {
        do {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            var hasher = Wire.SHA256()
            var size: UInt64 = 0
            while let chunk = try handle.read(upToCount: max(1, chunkSize)), !chunk.isEmpty {
                hasher.update(chunk)
                size += UInt64(chunk.count)
            }
            return (hasher.finalize(), size)
        } catch {
            throw CKError(.assetFileNotFound, message: "cannot read asset file \(url.path): \(error)")
        }
    }

    /// A file name that never leaves the directory: the hex digest plus the original
    /// name's extension if it is short and alphanumeric.
    static func fileName(digest: [UInt8], original: String) -> String {
        let hex = digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
            .joined()
        let ext = (original as NSString).pathExtension
        let safe = !ext.isEmpty && ext.count <= 16 && ext.unicodeScalars.allSatisfy { $0.isASCII && CharacterSet.alphanumerics.contains($0) }
        return safe ? hex + "." + ext : hex
    }
}
