import CirrusServer
import CirrusStore
import CirrusWire
import Foundation
import Testing

@testable import CirrusOperations

/// A fresh directory under the system temporary directory, removed by the caller.
func temporaryDirectory(_ prefix: String = "cirrus-ops") -> String {
    (NSTemporaryDirectory() as NSString).appendingPathComponent("\(prefix)-\(UUID().uuidString)")
}

private let key = DatabaseKey.private(container: "iCloud.com.example.tests", user: "_alice")

private func note(_ name: String) -> Wire.Record {
    Wire.Record(
        recordID: Wire.RecordID(recordName: name, zoneID: Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: key.owner)),
        recordType: "Note",
        fields: [Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("note \(name)")))])
}

@Suite("Data directory backups")
struct DataDirectoryBackupTests {
    @Test func aBackupRestoresToTheSameRecordsAndSecret() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let storage = try SQLiteStorage(directory: root + "/data")
        let secret = try ServerSecret.loadOrCreate(inDirectory: root + "/data")
        let saved = try await storage.modifyRecords(
            RecordModification(saving: (0..<30).map { note("n\($0)") }), in: key, by: "_alice")
        #expect(saved.saves.compactMap(\.value).count == 30)

        // The storage stays open: a backup is taken from a running server.
        let summary = try DataDirectoryBackup.backup(dataDirectory: root + "/data", to: root + "/copy.backup")
        #expect(summary.includesServerSecret)
        #expect(summary.bytes > 0)
        try storage.close()

        let restored = try DataDirectoryBackup.restore(from: root + "/copy.backup", into: root + "/restored")
        #expect(restored.includesServerSecret)
        #expect(try ServerSecret.loadOrCreate(inDirectory: root + "/restored") == secret)
        let reopened = try SQLiteStorage(directory: root + "/restored")
        defer { try? reopened.close() }
        let fetched = try await reopened.fetchRecords(
            (0..<30).map { note("n\($0)").recordID! }, desiredKeys: nil, in: key)
        #expect(fetched.compactMap(\.value).count == 30)
    }

    @Test func backupRefusesWhatItCannotDo() throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(throws: DataDirectoryBackup.Failure.self) {
            try DataDirectoryBackup.backup(dataDirectory: root + "/none", to: root + "/x.backup")
        }
        let storage = try SQLiteStorage(directory: root + "/data")
        defer { try? storage.close() }
        _ = FileManager.default.createFile(atPath: root + "/taken", contents: Data("keep".utf8))
        #expect(throws: DataDirectoryBackup.Failure.self) {
            try DataDirectoryBackup.backup(dataDirectory: root + "/data", to: root + "/taken")
        }
        #expect(FileManager.default.contents(atPath: root + "/taken") == Data("keep".utf8))
        // Into a directory that does not exist: nothing is left behind.
        #expect(throws: DataDirectoryBackup.Failure.self) {
            try DataDirectoryBackup.backup(dataDirectory: root + "/data", to: root + "/missing/x.backup")
        }
        #expect(!FileManager.default.fileExists(atPath: root + "/missing"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root).sorted() == ["data", "taken"])
    }

    @Test func restoreRefusesAFileThatIsNoBackupAndAnOccupiedDirectory() throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let storage = try SQLiteStorage(directory: root + "/data")
        try storage.close()
        // The storage file itself is a database, but not a backup.
        do {
            _ = try DataDirectoryBackup.restore(from: root + "/data/cirrus.sqlite", into: root + "/restored")
            Issue.record("a plain storage file was restored")
        } catch {
            #expect(error.description.contains("is not a backup"), "\(error)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/restored").isEmpty)

        _ = FileManager.default.createFile(atPath: root + "/garbage", contents: Data(repeating: 7, count: 4096))
        #expect(throws: DataDirectoryBackup.Failure.self) {
            try DataDirectoryBackup.restore(from: root + "/garbage", into: root + "/restored")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/restored").isEmpty)

        _ = try DataDirectoryBackup.backup(dataDirectory: root + "/data", to: root + "/good.backup")
        do {
            _ = try DataDirectoryBackup.restore(from: root + "/good.backup", into: root + "/data")
            Issue.record("restored over a live data directory")
        } catch {
            #expect(error.description.contains("restore only into a new or empty data directory"), "\(error)")
        }
    }
}
