import CirrusKit
import CirrusModel
import Foundation

/// Writes lines to a file handle in blocks.
package final class LineWriter: @unchecked Sendable {
    // @unchecked Sendable: `buffer` is only touched under `lock`.
    private let handle: FileHandle
    private let lock = NSLock()
    private var buffer = Data()

    package init(handle: FileHandle) {
        self.handle = handle
    }

    package func write(_ line: String) {
        self.lock.lock()
        defer { self.lock.unlock() }
        self.buffer.append(contentsOf: Array(line.utf8))
        self.buffer.append(0x0A)
        if self.buffer.count >= 64 * 1024 {
            self.handle.write(self.buffer)
            self.buffer.removeAll(keepingCapacity: true)
        }
    }

    package func flush() {
        self.lock.lock()
        defer { self.lock.unlock() }
        if !self.buffer.isEmpty {
            self.handle.write(self.buffer)
            self.buffer.removeAll(keepingCapacity: true)
        }
    }
}

/// `cirrus export`: a zone's records as JSON Lines (`RecordJSON`), which `cirrus import`
/// reads back.
package enum Exporter {
    /// Writes every record of `zoneID` (of `recordType` only, when given) to `writer`; returns
    /// how many. Without a record type it reads the zone's change feed (private database);
    /// with one it runs a query, which works in the package database too.
    ///
    /// - parameter assetDirectory: where each asset's file goes (named by its content, so a
    ///   file shared by records is written once); the lines name those files. Nil = the lines
    ///   name the files the fetch downloaded to.
    /// - parameter progress: told how many records were written so far, after each one.
    /// - throws: `CLIError`.
    package static func export(
        database: CKDatabase, zoneID: CKRecordZone.ID, recordType: String?, writer: LineWriter,
        assetDirectory: URL? = nil, progress: (@Sendable (Int) -> Void)? = nil
    ) async throws(CLIError) -> Int {
        let converter = Locked(FieldConverter(zoneID: zoneID))
        let count = Locked(0)
        let failure = Locked<CLIError?>(nil)
        let write: @Sendable (CKRecord) -> Void = { record in
            if let assetDirectory {
                do throws(CLIError) {
                    try Self.placeAssets(of: record, in: assetDirectory)
                } catch {
                    failure.withLock { $0 = $0 ?? error }
                    return
                }
            }
            let line = converter.withLock { RecordJSON.object(record, converter: $0).jsonText }
            writer.write(line)
            let written = count.withLock { value in
                value += 1
                return value
            }
            progress?(written)
        }
        do {
            if let recordType {
                var (matches, cursor) = try await database.records(
                    matching: CKQuery(recordType: recordType, predicate: CKPredicate(value: true)), inZoneWith: zoneID)
                while true {
                    for (_, result) in matches { write(try result.get()) }
                    guard let next = cursor else { break }
                    (matches, cursor) = try await database.records(continuingMatchFrom: next)
                }
            } else {
                let operation = CKFetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], configurationsByRecordZoneID: nil)
                operation.fetchAllChanges = true
                let failure = Locked<(any Error)?>(nil)
                operation.recordWasChangedBlock = { _, result in
                    switch result {
                    case .success(let record): write(record)
                    case .failure(let error): failure.withLock { $0 = $0 ?? error }
                    }
                }
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    operation.fetchRecordZoneChangesResultBlock = { result in
                        if let error = failure.withLock({ $0 }) {
                            continuation.resume(throwing: error)
                        } else {
                            continuation.resume(with: result)
                        }
                    }
                    database.add(operation)
                }
            }
        } catch {
            writer.flush()
            throw CLIError.from(error, context: "export of zone \(zoneID.zoneName)")
        }
        writer.flush()
        if let error = failure.withLock({ $0 }) { throw error }
        return count.withLock { $0 }
    }

    /// Puts the file of each asset of `record` into `directory` (a hard link when it can, a
    /// copy otherwise) and points the record's assets at those files.
    static func placeAssets(of record: CKRecord, in directory: URL) throws(CLIError) {
        func place(_ asset: CKAsset) throws(CLIError) -> CKAsset {
            guard let source = asset.fileURL else { return asset }
            let target = directory.appendingPathComponent(source.lastPathComponent)
            let manager = FileManager.default
            do {
                try manager.createDirectory(at: directory, withIntermediateDirectories: true)
                if !manager.fileExists(atPath: target.path) {
                    do {
                        try manager.linkItem(at: source, to: target)
                    } catch {
                        try manager.copyItem(at: source, to: target)
                    }
                }
            } catch {
                throw CLIError.usage("--assets \(directory.path): cannot write \(target.lastPathComponent): \(error.localizedDescription)")
            }
            return CKAsset(fileURL: target, wireAsset: asset.wireAsset)
        }
        for key in record.allKeys() {
            switch record[key] {
            case let asset as CKAsset:
                record[key] = try place(asset)
            case let list as [CKAsset]:
                var placed: [CKAsset] = []
                for asset in list { placed.append(try place(asset)) }
                record[key] = placed
            default:
                continue
            }
        }
    }
}

