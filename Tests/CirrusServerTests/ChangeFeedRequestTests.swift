import CirrusServer
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// What a raw client gets for change-feed requests no CirrusKit client would send, and the
/// pieces of cirrusd the feeds rely on (the secret file, the duration flags).
@Suite("Change feed requests and settings")
struct ChangeFeedRequestTests {
    static let zone = Wire.RecordZoneID(zoneName: "Z", ownerName: "__defaultOwner__")

    @Test func malformedZoneChangeRequestsAreRefusedWhole() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            let twice = Wire.FetchRecordZoneChangesRequest(zoneConfigurations: [
                Wire.ZoneChangesConfiguration(zoneID: Self.zone), Wire.ZoneChangesConfiguration(zoneID: Self.zone),
            ])
            let (events, complete) = try await alice.run(.fetchRecordZoneChanges(twice))
            #expect(events.isEmpty)
            #expect(complete.error?.code == .invalidArguments)
            #expect(complete.error?.message.contains("more than once") == true)

            let noZone = Wire.FetchRecordZoneChangesRequest(zoneConfigurations: [Wire.ZoneChangesConfiguration()])
            #expect(try await alice.run(.fetchRecordZoneChanges(noZone)).complete.error?.code == .invalidArguments)

            let tooMany = Wire.FetchRecordZoneChangesRequest(
                zoneConfigurations: (0..<401).map { Wire.ZoneChangesConfiguration(zoneID: Wire.RecordZoneID(zoneName: "z\($0)")) })
            #expect(try await alice.run(.fetchRecordZoneChanges(tooMany)).complete.error?.code == .limitExceeded)

            let garbage = Wire.FetchDatabaseChangesRequest(previousServerChangeToken: Wire.ServerChangeToken(opaque: [1, 2, 3]))
            #expect(try await alice.run(.fetchDatabaseChanges(garbage)).complete.error?.code == .invalidArguments)
            await alice.client.close()
        }
    }

    @Test func theSecretIsCreatedOnceKeptPrivateAndAWrongFileIsRefused() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-secret-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try ServerSecret.loadOrCreate(inDirectory: directory)
        #expect(first.count == 32)
        #expect(try ServerSecret.loadOrCreate(inDirectory: directory) == first)
        let path = (directory as NSString).appendingPathComponent(ServerSecret.fileName)
        let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(permissions == 0o600)

        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path))
        #expect(throws: ServerSecret.Failure.self) { try ServerSecret.loadOrCreate(inDirectory: directory) }
    }

    @Test(arguments: [
        "--tombstone-retention", "--query-cursor-lifetime", "--long-lived-retention", "--notification-retention",
        "--maintenance-interval",
    ])
    func cirrusdRefusesABadDuration(flag: String) throws {
        for bad in ["0", "-5m", "5x", "h", "99999999999999999d"] {
            let process = ChildProcess()
            process.executableURL = CirrusdProcess.binary
            process.arguments = ["\(flag)=\(bad)", "--port", "0"]
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = Pipe()
            try process.run()
            process.waitUntilExit()
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(process.terminationStatus == 64, "\(flag) \(bad)")
            #expect(message.contains(bad), "\(flag) \(bad): \(message)")
        }
    }
}
