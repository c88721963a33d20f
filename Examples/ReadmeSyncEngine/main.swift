import CirrusKit   // SwiftPM product "CirrusKit"

/// The app's notes, kept in sync with the private database by a CKSyncEngine.
actor NotesStore: CKSyncEngineDelegate {
    let stateURL: URL
    var notes: [CKRecord.ID: CKRecord] = [:]

    init(stateURL: URL) {
        self.stateURL = stateURL
    }

    func put(_ note: CKRecord) {
        notes[note.recordID] = note
    }

    func handleEvent(_ event: CKSyncEngine.Event, syncEngine: CKSyncEngine) async {
        switch event {
        case .stateUpdate(let update):
            // Persist it: the next launch continues from here, nothing lost or sent twice.
            try? JSONEncoder().encode(update.stateSerialization).write(to: stateURL, options: .atomic)
        case .fetchedRecordZoneChanges(let changes):
            for modification in changes.modifications { notes[modification.record.recordID] = modification.record }
            for deletion in changes.deletions { notes[deletion.recordID] = nil }
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords { notes[record.recordID] = record }   // the new change tag
            for failure in sent.failedRecordSaves where failure.error.code == .serverRecordChanged {
                // Someone else saved first: put our title on their version and send it again.
                guard let server = failure.error.serverRecord else { continue }
                server["title"] = failure.record["title"] as? String
                notes[server.recordID] = server
                syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(server.recordID)])
            }
        default:
            break
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: CKSyncEngine.SendChangesContext, syncEngine: CKSyncEngine
    ) async -> CKSyncEngine.RecordZoneChangeBatch? {
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        return await CKSyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in await self.notes[id] }
    }
}

let stateURL = URL(fileURLWithPath: "notes-sync-state.json")
let store = NotesStore(stateURL: stateURL)
let savedState = try? JSONDecoder().decode(CKSyncEngine.State.Serialization.self, from: Data(contentsOf: stateURL))
let container = CKContainer(identifier: "iCloud.com.example.notes")
let syncEngine = CKSyncEngine(
    CKSyncEngine.Configuration(database: container.privateCloudDatabase, stateSerialization: savedState, delegate: store))

// A local edit: keep it, tell the engine. It is sent within milliseconds (automaticallySync),
// and every other device's engine fetches it when the server's push arrives.
let zoneID = CKRecordZone.ID(zoneName: "Notes")
let note = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "groceries", zoneID: zoneID))
note["title"] = "Groceries"
await store.put(note)
syncEngine.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: zoneID))])
syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(note.recordID)])
try await syncEngine.sendChanges()   // or leave it to automatic sync
