import CirrusKit

/// One device of the notes app: its own container (and so its own connection to the server),
/// its local copy of the notes, and the change token of what it has already seen.
actor Device {
    let name: String
    let container: CKContainer
    let zoneID: CKRecordZone.ID
    private var notes: [CKRecord.ID: CKRecord] = [:]
    private var changeToken: CKServerChangeToken?
    private var watch: Task<Void, any Error>?

    init(name: String, configuration: CirrusClientConfiguration, zoneID: CKRecordZone.ID) {
        self.name = name
        self.container = CKContainer(identifier: "iCloud.com.example.notes", configuration: configuration)
        self.zoneID = zoneID
    }

    var database: CKDatabase { container.privateCloudDatabase }

    /// The titles of the notes this device holds, sorted.
    var titles: [String] { notes.values.compactMap { $0["title"] as? String }.sorted() }

    /// Starts listening for pushes: every notification about the notes zone makes the device
    /// fetch the zone's changes since its token. The watch begins by catching up from `since`.
    func startWatching(since notificationToken: CKServerChangeToken?) {
        let container = self.container
        let zoneID = self.zoneID
        watch = Task {
            for try await notification in container.notifications(since: notificationToken) {
                guard let zoneNotification = notification as? CKRecordZoneNotification,
                    zoneNotification.recordZoneID == zoneID
                else { continue }
                try await self.fetchChanges()
            }
        }
    }

    func stopWatching() {
        watch?.cancel()
    }

    /// Brings the local notes up to date with the zone's change feed.
    func fetchChanges() async throws {
        var moreComing = true
        while moreComing {
            let changes = try await database.recordZoneChanges(inZoneWith: zoneID, since: changeToken)
            for (id, result) in changes.modificationResultsByID {
                if case .success(let modification) = result { notes[id] = modification.record }
            }
            for deletion in changes.deletions { notes[deletion.recordID] = nil }
            changeToken = changes.changeToken
            moreComing = changes.moreComing
        }
    }

    /// Writes a new note and keeps the server's copy.
    func write(_ title: String, name recordName: String) async throws {
        let note = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: recordName, zoneID: zoneID))
        note["title"] = title
        let saved = try await database.save(note)
        notes[saved.recordID] = saved
        print("\(name): wrote \"\(title)\"")
    }

    /// Changes the title of a note this device holds, saving against the change tag it knows.
    func retitle(_ recordName: String, to title: String) async throws {
        let id = CKRecord.ID(recordName: recordName, zoneID: zoneID)
        guard let note = notes[id] else { throw NotesError("\(name) has no note \(recordName)") }
        note["title"] = title
        notes[id] = try await database.save(note)
        print("\(name): renamed \(recordName) to \"\(title)\"")
    }

    /// Deletes a note.
    func delete(_ recordName: String) async throws {
        let id = CKRecord.ID(recordName: recordName, zoneID: zoneID)
        _ = try await database.deleteRecord(withID: id)
        notes[id] = nil
        print("\(name): deleted \(recordName)")
    }
}

/// What the notes app reports when something does not go as it should.
struct NotesError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
