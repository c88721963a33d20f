import CirrusKit   // SwiftPM product "CirrusKit"

let container = CKContainer(identifier: "iCloud.com.example.notes")
let database = container.privateCloudDatabase

let note = CKRecord(recordType: "Note")
note["title"] = "Groceries"
note["due"] = Date()
let saved = try await database.save(note)

let fetched = try await database.record(for: saved.recordID)
print(fetched["title"] as? String ?? "")

// Or the operation API, with per-record callbacks streamed from the server:
let operation = CKModifyRecordsOperation(recordsToSave: [fetched], recordIDsToDelete: nil)
operation.perRecordSaveBlock = { id, result in print(id.recordName, result) }
operation.modifyRecordsResultBlock = { result in print("done:", result) }
database.add(operation)

// Queries, as CloudKit writes them (CirrusModel supplies both initializers on Linux).
let query = CKQuery(recordType: "Note", predicate: NSPredicate(format: "title BEGINSWITH %@", "Groc"))
query.sortDescriptors = [NSSortDescriptor(key: "due", ascending: false)]
let (matches, cursor) = try await database.records(matching: query, resultsLimit: 50)

// Incremental sync, in a custom zone: what changed since the token saved last time (nil = everything).
let zone = try await database.save(CKRecordZone(zoneName: "Notes"))
var savedToken: CKServerChangeToken? = nil
let changes = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: savedToken)
savedToken = changes.changeToken   // persist it after applying changes.modificationResultsByID / .deletions
