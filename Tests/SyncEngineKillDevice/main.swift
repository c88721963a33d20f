// A device process for CirrusCLITests' SyncEngineKillTests: it syncs one zone of Alice's
// private database with a CKSyncEngine whose state lives in a file, so a test can kill it with
// SIGKILL in the middle of a send and start it again from that file.
//
//   SyncEngineKillDevice PORT CERTS_DIRECTORY STATE_FILE COUNT [PAUSE_AFTER_BATCH]
//
// The first run (no state file) queues the zone "Kill" and COUNT records kill-00000 … (field
// v = index) and sends them; a later run continues from the state file. Output, one line each:
// "saved NAME TAG", "failed NAME CODE", then "done" (exit 0) or "error …" (exit 1). With
// PAUSE_AFTER_BATCH = N, the delegate stops in its handling of the Nth batch's outcome, after
// printing it and before the state that acknowledges it is handed over ("paused"): the server
// has applied that batch, the state file still names it in flight.
import CirrusKit

let arguments = CommandLine.arguments
guard (5...6).contains(arguments.count), let port = Int(arguments[1]), let count = Int(arguments[4]),
    let pauseAfter = arguments.count == 6 ? Int(arguments[5]) : 0
else {
    FileHandle.standardError.write(Data("usage: SyncEngineKillDevice PORT CERTS_DIRECTORY STATE_FILE COUNT [PAUSE_AFTER_BATCH]\n".utf8))
    exit(2)
}
let certificates = arguments[2]
let stateURL = URL(fileURLWithPath: arguments[3])
let zoneID = CKRecordZone.ID(zoneName: "Kill")

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

final class Device: CKSyncEngineDelegate {
    let stateURL: URL
    let pauseAfter: Int
    /// Batches whose outcome the delegate handled (the engine calls it one call at a time).
    nonisolated(unsafe) var batches = 0

    init(stateURL: URL, pauseAfter: Int) {
        self.stateURL = stateURL
        self.pauseAfter = pauseAfter
    }

    func handleEvent(_ event: CKSyncEngine.Event, syncEngine: CKSyncEngine) async {
        switch event {
        case .stateUpdate(let update):
            do {
                try JSONEncoder().encode(update.stateSerialization).write(to: self.stateURL, options: .atomic)
            } catch {
                say("error writing the state: \(error)")
                exit(1)
            }
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords {
                say("saved \(record.recordID.recordName) \(record.recordChangeTag ?? "")")
            }
            for failure in sent.failedRecordSaves {
                say("failed \(failure.record.recordID.recordName) \(failure.error.code)")
            }
            self.batches += 1
            if self.batches == self.pauseAfter {
                say("paused")
                try? await Task.sleep(for: .seconds(3_600))
            }
        default:
            break
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: CKSyncEngine.SendChangesContext, syncEngine: CKSyncEngine
    ) async -> CKSyncEngine.RecordZoneChangeBatch? {
        await CKSyncEngine.RecordZoneChangeBatch(pendingChanges: syncEngine.state.pendingRecordZoneChanges) { id in
            guard let index = Int(id.recordName.dropFirst("kill-".count)) else { return nil }
            let record = CKRecord(recordType: "Item", recordID: id)
            record["v"] = index
            return record
        }
    }
}

let saved = try? JSONDecoder().decode(CKSyncEngine.State.Serialization.self, from: Data(contentsOf: stateURL))
let client = CirrusClientConfiguration(
    host: "127.0.0.1", port: port, trustRootsPath: certificates + "/ca.pem",
    certificateChainPath: certificates + "/alice.pem", privateKeyPath: certificates + "/alice-key.pem")
let container = CKContainer(identifier: "iCloud.com.example.notes", configuration: client)
let device = Device(stateURL: stateURL, pauseAfter: pauseAfter)
var configuration = CKSyncEngine.Configuration(database: container.privateCloudDatabase, stateSerialization: saved, delegate: device)
configuration.automaticallySync = false
let engine = CKSyncEngine(configuration)
if saved == nil {
    engine.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: zoneID))])
    engine.state.add(pendingRecordZoneChanges: (0..<count).map {
        .saveRecord(CKRecord.ID(recordName: String(format: "kill-%05d", $0), zoneID: zoneID))
    })
}
do {
    try await engine.sendChanges()
    say("done")
    exit(0)
} catch {
    say("error \(error)")
    exit(1)
}
